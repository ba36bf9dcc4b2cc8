#!/usr/bin/env python3
"""same-tensors.py A B: exit 0 when the .safetensors files A and B hold the
same tensor names, dtypes, shapes and bytes (in any order), else 1 with the
first difference. test/train/init-from.test."""

import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    return {k: (v["dtype"], v["shape"],
                data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


a, b = read(sys.argv[1]), read(sys.argv[2])
if set(a) != set(b):
    sys.exit(f"names differ: {sorted(set(a) ^ set(b))}")
for k in sorted(a):
    if a[k] != b[k]:
        sys.exit(f"tensor {k} differs")
