// RUN: python3 -c "print('model M {\n  config { a = ' + '(' * 250 + '1' + ')' * 250 + ' }\n}')" > %t.mt
// RUN: not mtc compile %t.mt --emit=ast 2>&1 | FileCheck %s
// RUN: python3 -c "print('model M {\n  config { a = ' + '-' * 100000 + '1 }\n}')" > %t2.mt
// RUN: not mtc compile %t2.mt --emit=ast 2>&1 | FileCheck %s
// RUN: python3 -c "print('model M {\n  config { a = 1' + ' + 1' * 100000 + ' }\n}')" > %t3.mt
// RUN: not mtc compile %t3.mt --emit=ast 2>&1 | FileCheck %s
// Deep nesting is rejected before parsing (no stack overflow); so are long
// operator chains, which would make the AST as deep as they are long.
// CHECK: {{.*}}.mt:2:{{[0-9]+}}: error: nesting too deep: more than 200 levels of brackets and operators
// CHECK: 1 error generated.
