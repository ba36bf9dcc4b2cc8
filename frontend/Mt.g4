//===- Mt.g4 - ANTLR4 grammar of the .mt model language ------------------===//
//
// Part of mtc. docs/language.md is the contract; Parser.cpp builds the AST
// (AST.h) from the parse tree of this grammar.
//
// Design notes:
//  * Newlines are plain whitespace. The grammar stays unambiguous without them
//    because no expression can be followed by something that starts the next
//    statement or entry: statements start with a name, 'return' or 'repeat',
//    and no expression form continues with a bare name. `;` is an optional
//    separator wherever a statement, config entry or item may appear.
//  * Only the words listed in the spec are keywords. In `layer Block x COUNT`
//    the `x` is an ordinary identifier (rule xKw) that Parser.cpp checks, so
//    users can still name a variable `x`. Initializer names (zeros, normal,
//    ...) are identifiers too, checked by Parser.cpp.
//  * Expression precedence, loosest first: `+ -`, then `* / % @`, then unary
//    `-`, then `**` (right-associative; its right operand may itself start
//    with `-`), then primaries. So `-a ** 2` is `-(a ** 2)` and `2 ** -1` is
//    `2 ** (-1)`, as in Python. The binary levels are loops (no recursion per
//    operand); unary `-` and `**` recurse, which Parser.cpp bounds before
//    parsing together with bracket nesting.
//  * Malformed tokens (BAD_NUMBER, UNTERMINATED_STRING, UNTERMINATED_COMMENT,
//    UNKNOWN_CHAR) are real tokens so that Parser.cpp can report them with a
//    precise message before the parser runs; the parser never expects them.
//
//===----------------------------------------------------------------------===//

grammar Mt;

// ----------------------------------------------------------------------------
// Structure
// ----------------------------------------------------------------------------

file
    : SEMI* modelDecl SEMI* EOF
    ;

modelDecl
    : MODEL name=ID LBRACE modelItem* RBRACE
    ;

modelItem
    : configBlock
    | paramDecl
    | layerDecl
    | forwardDecl
    | SEMI
    ;

configBlock
    : CONFIG LBRACE (configEntry | SEMI)* RBRACE
    ;

configEntry
    : name=ID ASSIGN expr
    ;

paramDecl
    : PARAM name=ID COLON shape ASSIGN init
    ;

init
    : name=ID (LPAREN (expr (COMMA expr)*)? RPAREN)?
    ;

shape
    : LBRACK (expr (COMMA expr)*)? RBRACK dtype?
    ;

dtype
    : F32
    | BF16
    | I32
    ;

// The forward comes last. It is optional here so that a missing one gets a
// clear message from Parser.cpp; a second one, or a parameter after it, is a
// syntax error ("expected '}' to close layer 'Block'").
layerDecl
    : LAYER name=ID xKw count=expr LBRACE (paramDecl | expertDecl | SEMI)*
      (forwardDecl SEMI*)? RBRACE
    ;

expertDecl
    : EXPERT name=ID xKw count=expr LBRACE (paramDecl | SEMI)*
      (forwardDecl SEMI*)? RBRACE
    ;

// The `x` of `layer NAME x COUNT`; any identifier here, checked by the parser.
xKw
    : ID
    ;

forwardDecl
    : FORWARD LPAREN (argDecl (COMMA argDecl)*)? RPAREN ARROW shape
      LBRACE (stmt | SEMI)* RBRACE
    ;

argDecl
    : name=ID COLON shape
    ;

// ----------------------------------------------------------------------------
// Statements
// ----------------------------------------------------------------------------

stmt
    : assignStmt
    | returnStmt
    | repeatStmt
    ;

assignStmt
    : targets+=ID (COMMA targets+=ID)* ASSIGN expr
    ;

returnStmt
    : RETURN expr
    ;

repeatStmt
    : REPEAT expr LBRACE (stmt | SEMI)* RBRACE
    ;

// ----------------------------------------------------------------------------
// Expressions
// ----------------------------------------------------------------------------

expr
    : operands+=mulExpr (ops+=(PLUS | MINUS) operands+=mulExpr)*
    ;

mulExpr
    : operands+=unaryExpr (ops+=(STAR | SLASH | PERCENT | AT) operands+=unaryExpr)*
    ;

unaryExpr
    : MINUS unaryExpr
    | powExpr
    ;

powExpr
    : primary (POW unaryExpr)?
    ;

primary
    : NUMBER                                                    # numberExpr
    | STRING                                                    # stringExpr
    | (TRUE | FALSE)                                            # boolExpr
    | callee=ID (LBRACK index=expr RBRACK)? LPAREN callArgs? RPAREN # callExpr
    | ID                                                        # nameExpr
    | LPAREN expr RPAREN                                        # parenExpr
    | LBRACK (expr (COMMA expr)*)? RBRACK                       # listExpr
    ;

callArgs
    : arg (COMMA arg)*
    ;

arg
    : name=ID ASSIGN expr
    | expr
    ;

// ----------------------------------------------------------------------------
// Tokens
// ----------------------------------------------------------------------------

MODEL   : 'model' ;
CONFIG  : 'config' ;
PARAM   : 'param' ;
LAYER   : 'layer' ;
EXPERT  : 'expert' ;
FORWARD : 'forward' ;
RETURN  : 'return' ;
REPEAT  : 'repeat' ;
TRUE    : 'true' ;
FALSE   : 'false' ;
F32     : 'f32' ;
BF16    : 'bf16' ;
I32     : 'i32' ;

LBRACE  : '{' ;
RBRACE  : '}' ;
LPAREN  : '(' ;
RPAREN  : ')' ;
LBRACK  : '[' ;
RBRACK  : ']' ;
COMMA   : ',' ;
SEMI    : ';' ;
COLON   : ':' ;
ASSIGN  : '=' ;
ARROW   : '->' ;
PLUS    : '+' ;
MINUS   : '-' ;
POW     : '**' ;
STAR    : '*' ;
SLASH   : '/' ;
PERCENT : '%' ;
AT      : '@' ;

NUMBER
    : NUM_BODY EXPONENT?
    ;

// `1e`, `2.5e+`, `3abc`: a number glued to letters. Longer than the NUMBER
// prefix, so it wins and Parser.cpp reports "invalid number".
BAD_NUMBER
    : NUM_BODY [eE] [+-]?
    | NUM_BODY EXPONENT? [A-Za-z_] [A-Za-z0-9_]*
    ;

ID
    : [A-Za-z_] [A-Za-z0-9_]*
    ;

STRING
    : '"' (~["\\\r\n] | '\\' ~[\r\n])* '"'
    ;

UNTERMINATED_STRING
    : '"' (~["\\\r\n] | '\\' ~[\r\n])* '\\'?
    ;

WS
    : [ \t\r\n\f\uFEFF]+ -> skip
    ;

LINE_COMMENT
    : ('#' | '//') ~[\r\n]* -> skip
    ;

BLOCK_COMMENT
    : '/*' .*? '*/' -> skip
    ;

// The longest text without a closing `*/`: shorter than BLOCK_COMMENT when the
// comment is closed, so it only wins for an unterminated comment.
UNTERMINATED_COMMENT
    : '/*' (~'*' | '*'+ ~[*/])* '*'*
    ;

UNKNOWN_CHAR
    : .
    ;

fragment NUM_BODY
    : DIGIT+ ('.' DIGIT*)?
    | '.' DIGIT+
    ;

fragment EXPONENT
    : [eE] [+-]? DIGIT+
    ;

fragment DIGIT
    : [0-9]
    ;
