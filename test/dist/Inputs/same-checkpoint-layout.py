"""Checks that two `mtc train --out` checkpoints have the same layout.

usage: same-checkpoint-layout.py DIR_A DIR_B

The same files; in each safetensors file the same tensors (names, dtypes,
shapes, offsets) and metadata; trainer_state.json the same but for the values
a run's rounding changes (loss, val_loss and the files' xxh64). Prints
"same layout: N tensors" or the first difference (exit 1). Standard library
only.
"""
import json
import os
import struct
import sys


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def scrub(state):
    state = dict(state)
    for k in ("loss", "val_loss"):
        state.pop(k, None)
    for f in state.get("files", {}).values():
        f.pop("xxh64", None)
    return state


def main():
    a, b = sys.argv[1], sys.argv[2]
    if sorted(os.listdir(a)) != sorted(os.listdir(b)):
        print("files differ:", sorted(os.listdir(a)), sorted(os.listdir(b)))
        return 1
    tensors = 0
    for name in sorted(os.listdir(a)):
        if name.endswith(".safetensors"):
            ha, hb = header(os.path.join(a, name)), header(os.path.join(b, name))
            if ha != hb:
                diff = sorted(k for k in set(ha) | set(hb) if ha.get(k) != hb.get(k))
                print(f"{name}: headers differ at {diff[:3]}")
                return 1
            tensors += len(ha) - ("__metadata__" in ha)
    sa = scrub(json.load(open(os.path.join(a, "trainer_state.json"))))
    sb = scrub(json.load(open(os.path.join(b, "trainer_state.json"))))
    if sa != sb:
        diff = sorted(k for k in set(sa) | set(sb) if sa.get(k) != sb.get(k))
        print("trainer_state.json differs at", diff)
        return 1
    print(f"same layout: {tensors} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
