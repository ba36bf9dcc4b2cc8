#!/usr/bin/env python3
"""Writes lib/Tokenizer/UnicodeTables.inc: the Unicode data the tokenizer needs.

The HuggingFace `tokenizers` library mixes Unicode versions: its regexes
(Oniguruma) and Rust's char methods use Unicode 16.0, while its NFC / NFD
normalizers (the unicode-normalization-alignments crate) predate Unicode 11.
The tables follow each:

  kCategoryRuns      general category of every code point (Unicode 16.0, from
                     unicodedata2==16.0.0), as runs: (first << 5) | category
                     index (the Category enum of Unicode.h, CATEGORIES below);
                     a run lasts until the next entry's first code point
  kCombiningRuns     canonical combining class as the library's normalizer
                     sees it: Unicode 16.0's value for the marks it reorders,
                     0 for the marks it does not know; runs (first << 8) | ccc
  kDecompositions    the library's full canonical decomposition (NFD) of every
                     code point it decomposes, Hangul syllables excepted
                     (algorithmic): a flat list of [code point, length,
                     decomposition...]
  kCompositions      the pairs NFC composes: (first << 42) | (second << 21) |
                     composite, sorted

The decomposition, composition and combining-class data are read off the
library itself (tokenizers.normalizers.NFD / NFC on each code point), so they
are what it does, whatever its tables' version. A self-check compares the
category table with Oniguruma's \\p{L} and \\p{N} through the library.

Versions used for the committed file (also in the header it writes):
  Python 3.11.7, tokenizers==0.23.3, unicodedata2==16.0.0 (from PyPI)

Regenerate (from the repository root):
  python3 -m venv /tmp/tok-venv
  /tmp/tok-venv/bin/pip install tokenizers==0.23.3 unicodedata2==16.0.0
  /tmp/tok-venv/bin/python lib/Tokenizer/gen_unicode_tables.py
"""
import os
import sys

import tokenizers
import unicodedata2 as ud
from tokenizers import Regex, normalizers, pre_tokenizers

CATEGORIES = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
              "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
              "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3


def rows(values, per_line, fmt):
    out = []
    for i in range(0, len(values), per_line):
        out.append("    " + ", ".join(fmt % v for v in values[i:i + per_line])
                   + ",")
    return "\n".join(out)


def code_points():
    return (cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)


def check_categories(cats):
    """Oniguruma's \\p{L} and \\p{N}, through the library, must agree."""
    for cls, major in (("L", "L"), ("N", "N")):
        split = pre_tokenizers.Split(Regex(r"\p{%s}+" % cls), "removed")
        chars = [chr(cp) for cp in code_points()]
        for i in range(0, len(chars), 8192):
            chunk = chars[i:i + 8192]
            left = set("".join(p for p, _ in split.pre_tokenize_str(
                "\u3000".join(chunk))))
            for ch in chunk:
                ours = CATEGORIES[cats[ord(ch)]][0] == major
                if ours != (ch not in left):
                    sys.exit("category table disagrees with the library's "
                             "\\p{%s} at U+%04X" % (cls, ord(ch)))


def main():
    if ud.unidata_version != "16.0.0":
        sys.exit("needs unicodedata2==16.0.0, found %s" % ud.unidata_version)
    nfd = normalizers.NFD()
    nfc = normalizers.NFC()
    index = {c: i for i, c in enumerate(CATEGORIES)}

    cats = [0] * 0x110000
    cat_runs, prev = [], None
    for cp in range(0x110000):
        cat = index[ud.category(chr(cp))]
        cats[cp] = cat
        if cat != prev:
            cat_runs.append((cp << 5) | cat)
            prev = cat

    # Combining classes: a mark the library knows is reordered before U+0345
    # (class 240) or, for class 240 itself, after U+0334 (class 1).
    ccc_runs, prev = [], None
    for cp in range(0x110000):
        cc = 0
        if not 0xD800 <= cp <= 0xDFFF:
            cc = ud.combining(chr(cp))
            if cc:
                ch = chr(cp)
                known = (nfd.normalize_str("a\u0345" + ch) != "a\u0345" + ch
                         or nfd.normalize_str("a" + ch + "\u0334")
                         != "a" + ch + "\u0334")
                if not known:
                    cc = 0
        if cc != prev:
            ccc_runs.append((cp << 8) | cc)
            prev = cc

    decomp, compositions = [], []
    for cp in code_points():
        if HANGUL_FIRST <= cp <= HANGUL_LAST:
            continue
        ch = chr(cp)
        d = nfd.normalize_str(ch)
        if d == ch:
            continue
        decomp.extend([cp, len(d)] + [ord(x) for x in d])
        if len(d) >= 2 and nfc.normalize_str(d) == ch:
            first = nfc.normalize_str(d[:-1])
            assert len(first) == 1, (hex(cp), d)
            compositions.append((ord(first) << 42) | (ord(d[-1]) << 21) | cp)
    compositions.sort()

    check_categories(cats)

    out = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "UnicodeTables.inc")
    with open(out, "w", encoding="ascii", newline="\n") as f:
        f.write("// Generated by lib/Tokenizer/gen_unicode_tables.py (Python "
                "%s, tokenizers %s,\n// unicodedata2 %s). Do not edit.\n"
                "// clang-format off\n\n"
                % (sys.version.split()[0], tokenizers.__version__,
                   ud.unidata_version))
        f.write("static const char kUnicodeVersion[] = \"%s\";\n\n"
                % ud.unidata_version)
        f.write("static const uint32_t kCategoryRuns[] = {\n%s\n};\n\n"
                % rows(cat_runs, 8, "0x%x"))
        f.write("static const uint32_t kCombiningRuns[] = {\n%s\n};\n\n"
                % rows(ccc_runs, 8, "0x%x"))
        f.write("static const uint32_t kDecompositions[] = {\n%s\n};\n\n"
                % rows(decomp, 8, "0x%x"))
        f.write("static const uint64_t kCompositions[] = {\n%s\n};\n"
                % rows(compositions, 4, "0x%xull"))
        f.write("\n// clang-format on\n")
    print("wrote %s: %d category runs, %d combining-class runs, "
          "%d decomposition words, %d compositions"
          % (out, len(cat_runs), len(ccc_runs), len(decomp),
             len(compositions)))


if __name__ == "__main__":
    main()
