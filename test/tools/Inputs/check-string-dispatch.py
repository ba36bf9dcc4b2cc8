#!/usr/bin/env python3
"""check-string-dispatch.py SRC_ROOT [DIR...] -- no run-time path decides by
comparing names.

The runtime decodes names once, where they enter (the bundle reader, the
flag parsers, lib/Bundle's parse functions), into enums: OpKind (an op's
name, lib/Bundle/Ops.def), DeviceKind (--device, runtime/driver/DeviceKind.h),
Precision, GradDType and Recompute (lib/Bundle/Plan.h). This script scans the
C++ and CUDA sources under each DIR (default: SRC_ROOT/runtime) for an
equality comparison (==, !=, strcmp, compare) of a string literal that is a
device kind, a precision, a recompute policy or an op name of Ops.def, and
prints each as FILE:LINE: the comparison. Exit status 1 when any is found.
"""
import os
import re
import sys

DEVICE_KINDS = ["cpu", "cuda", "cuda-emu"]
PRECISIONS = ["fp32", "bf16"]
RECOMPUTE = ["full", "none", "selective"]


def op_names(src_root):
    names = []
    with open(os.path.join(src_root, "lib", "Bundle", "Ops.def")) as f:
        for line in f:
            m = re.match(r'MTC_OP\(\s*\w+\s*,\s*"([^"]+)"', line)
            if m:
                names.append(m.group(1))
    if not names:
        sys.exit("check-string-dispatch: no MTC_OP rows in lib/Bundle/Ops.def")
    return names


def strip_comments(text):
    # Line comments (outside string literals) and block comments; string
    # literals are kept.
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: check-string-dispatch.py SRC_ROOT [DIR...]")
    src_root = sys.argv[1]
    dirs = sys.argv[2:] or [os.path.join(src_root, "runtime")]
    # Device kinds, precisions and recompute policies: any comparison. Op
    # names: a comparison with a name (an attribute's value may be spelled
    # like an op: reduce's "sum", gelu's "tanh").
    policy = "|".join(re.escape(w) for w in DEVICE_KINDS + PRECISIONS + RECOMPUTE)
    ops = "|".join(re.escape(w) for w in op_names(src_root))
    name = r"[\w.>-]*(?:name|Name)\b(?:\(\))?"
    patterns = [
        re.compile(r'[!=]=\s*"(%s)"' % policy),
        re.compile(r'"(%s)"\s*[!=]=' % policy),
        re.compile(r'\bstrn?cmp\s*\([^;]*"(%s)"' % policy),
        re.compile(r'\.compare\s*\(\s*"(%s)"' % policy),
        re.compile(r'%s\s*[!=]=\s*"(%s)"' % (name, ops)),
        re.compile(r'"(%s)"\s*[!=]=\s*%s' % (ops, name)),
        re.compile(r'\bstrn?cmp\s*\(\s*%s\s*,\s*"(%s)"' % (name, ops)),
        re.compile(r'%s\.compare\s*\(\s*"(%s)"' % (name, ops)),
    ]
    found = 0
    files = 0
    for d in dirs:
        for root, _, names in os.walk(d):
            for name in sorted(names):
                if not name.endswith((".cpp", ".h", ".cu", ".cuh", ".inc")):
                    continue
                path = os.path.join(root, name)
                files += 1
                with open(path, errors="replace") as f:
                    code = strip_comments(f.read())
                for no, line in enumerate(code.split("\n"), 1):
                    if any(p.search(line) for p in patterns):
                        print("%s:%d: %s" % (os.path.relpath(path, src_root), no,
                                             line.strip()))
                        found += 1
    if found:
        print("%d string comparison(s) of device kinds, precisions, recompute "
              "policies or op names: decode the name once into its enum "
              "(DeviceKind, Precision, GradDType, Recompute, OpKind)" % found)
        return 1
    print("ok: %d files, no string comparison of device kinds, precisions, "
          "recompute policies or op names" % files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
