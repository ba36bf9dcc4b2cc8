"""Compares two .safetensors files tensor by tensor (names, dtypes, shapes and
data bytes; order and metadata ignored).

usage: compare-safetensors.py A.safetensors B.safetensors [--dtype D]

--dtype D: only check that every tensor of B has dtype D and A's shape (for
a converted export). Prints "N tensors identical" (or "N tensors: dtype D,
shapes identical"), or the first difference (exit 1). Standard library only.
"""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    return {k: (v["dtype"], v["shape"],
                raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in header.items()}


def main():
    a, b = read(sys.argv[1]), read(sys.argv[2])
    dtype = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--dtype" else None
    if set(a) != set(b):
        print("names differ: only in A: %s; only in B: %s" %
              (sorted(set(a) - set(b)), sorted(set(b) - set(a))))
        return 1
    for k in sorted(a):
        if dtype:
            if b[k][0] != dtype or b[k][1] != a[k][1]:
                print(f"{k}: {b[k][0]} {b[k][1]}, expected {dtype} {a[k][1]}")
                return 1
        elif a[k] != b[k]:
            print(f"{k}: differs ({a[k][0]} {a[k][1]} vs {b[k][0]} {b[k][1]})")
            return 1
    if dtype:
        print(f"{len(a)} tensors: dtype {dtype}, shapes identical")
    else:
        print(f"{len(a)} tensors identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
