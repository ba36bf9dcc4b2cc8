"""Writes a hostile chat template (mtc tokenize --chat-template FILE,
docs/tokenize.md): nesting at and past the engine's depth limits, values that
grow, huge numbers where sizes and indices go, and broken syntax.
test/sanitize/chat-templates.test renders each over instruction data: each is
rendered or refused, never a crash, and under the sanitizers (make
check-sanitize) without a report.

usage: hostile-template.py NAME OUT.jinja
Standard library only.
"""
import sys

BIG = "9223372036854775807"


def nest(open_, close, n, core):
    return open_ * n + core + close * n


TEMPLATES = {
    # Nesting: an expression may nest 200 levels (a parenthesis, a call or a
    # list is three: 65 of them are the deepest that parses), blocks 200.
    # At the limit the template still renders, with the sanitizers' larger
    # stack frames too; past it, it is refused.
    "parens-65": "{{ " + nest("(", ")", 65, "7") + " }}",
    "parens-3000": "{{ " + nest("(", ")", 3000, "7") + " }}",
    "not-195": "{{ " + "not " * 195 + "1 }}",
    "not-3000": "{{ " + "not " * 3000 + "1 }}",
    "minus-195": "{{ " + "-" * 195 + "1 }}",
    "filters-199": "{{ 1" + "|string" * 199 + " }}",
    "filters-3000": "{{ 1" + "|string" * 3000 + " }}",
    "filter-args-65": "{{ " + nest("'a'|default(", ")", 65, "'b'") + " }}",
    "filter-args-3000": "{{ " + nest("'a'|default(", ")", 3000, "'b'") + " }}",
    "replace-args-65": "{{ " + nest("'x'|replace('x', ", ")", 65, "'y'") + " }}",
    "calls-65": "{{ " + nest("range(", ")|length", 65, "3") + " }}",
    "lists-65": "{{ " + nest("[", "]", 65, "1") + "|length }}",
    "dicts-65": "{{ " + nest("{'a': ", " }", 65, "1") + "|length }}",
    "dicts-3000": "{{ " + nest("{'a': ", " }", 3000, "1") + "|length }}",
    "subscripts-60": "{{ messages" + "[0]['role'][0]" * 60 + " }}",
    "ifs-200": nest("{% if 1 %}", "{% endif %}", 200, "x"),
    "fors-200": nest("{% for i in [1] %}", "{% endfor %}", 200, "{{ i }}"),
    "ifs-201": nest("{% if 1 %}", "{% endif %}", 201, "x"),
    "ternaries-199": "{{ " + "1 if 1 else " * 199 + "2 }}",
    "plus-chain-3000": "{{ 1" + "+1" * 3000 + " }}",
    "value-depth": "{% set ns = namespace(x=1) %}{% for i in range(500) %}"
                   "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
    "tojson-deep": "{% set ns = namespace(x=1) %}{% for i in range(199) %}"
                   "{% set ns.x = {'a': [ns.x]} %}{% endfor %}"
                   "{{ ns.x|tojson(indent=2) }}",
    # Growth: values that double, shared or copied.
    "list-doubling": "{% set ns = namespace(x='ab') %}{% for i in range(40) %}"
                     "{% set ns.x = [ns.x, ns.x] %}{% endfor %}"
                     "{{ ns.x == ns.x }}",
    "string-doubling": "{% set ns = namespace(s='ab') %}{% for i in range(60) %}"
                       "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
                       "{{ ns.s|length }}",
    "string-times-big": "{{ ('ab' * " + BIG + ")|length }}",
    "list-times-big": "{{ ([1] * " + BIG + ")|length }}",
    "indent-big": "{{ messages|tojson(indent=" + BIG + ") }}",
    "indent-filter-big": "{{ 'a\nb'|indent(" + BIG + ") }}",
    "range-step-big": "{{ range(0, " + BIG + ", " + BIG + ")|list }}",
    "replace-empty": "{{ ('ab' * 1000)|replace('', 'xyz' * 1000)|length }}",
    "split-empty": "{{ 'abc'.split('') }}",
    # Numbers where sizes, indices and powers go.
    "index-big": "{{ messages[" + BIG + "] }}{{ messages[-" + BIG + " - 1] }}",
    "slice-big": "{{ messages[-" + BIG + " - 1:" + BIG + ":" + BIG + "] }}"
                 "{{ 'abc'[::-" + BIG + "] }}",
    "int-overflow": "{{ " + BIG + " + 1 }}",
    "pow-negative": "{{ 0 ** -1 }}",
    "pow-float": "{{ 10.0 ** 400 }}",
    "float-to-int": "{{ (1e308 * 10)|int }}{{ (0.0 / 0.0)|int }}",
    "modulo-min": "{{ (-" + BIG + " - 1) % -1 }}{{ (-" + BIG + " - 1) // -1 }}",
    "literal-huge": "{{ 99999999999999999999999999 }}",
    "float-literal-huge": "{{ 1e999 }}",
    # Broken syntax and text.
    "unterminated-expr": "{{ messages",
    "unterminated-block": "{% for m in messages %}{{ m.content }}",
    "unterminated-comment": "{# never closed",
    "unterminated-string": "{{ 'abc }}",
    "stray-end": "{% endfor %}{% endif %}{% endset %}",
    "empty-subscript": "{{ x[] }}",
    "attribute-number": "{{ x.99999999999999999999 }}",
    "invalid-utf8": "{{ '\udcff\udcfe' }}\udcc0\udc80",
    "nul-bytes": "{{ 'a\0b' }}\0{% if 1 %}\0{% endif %}",
    "escapes": "{{ '\\x' }}{{ '\\u12' }}{{ '\\U0011ffff' }}{{ '\\N{x}' }}",
    "namespace-cycle": "{% set ns = namespace(a=1) %}{% set ns.a = ns %}",
    "raise": "{{ raise_exception('no ' * 100000) }}",
    "long-literal": "{{ '" + "x" * (1 << 20) + "'|length }}",
}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in TEMPLATES:
        raise SystemExit("usage: hostile-template.py {%s} OUT.jinja"
                         % ",".join(TEMPLATES))
    with open(sys.argv[2], "w", encoding="utf-8",
              errors="surrogateescape") as f:
        f.write(TEMPLATES[sys.argv[1]])


if __name__ == "__main__":
    main()
