"""Prints 'finite: N tensors' when every float32 tensor of a .safetensors file
holds only finite values, else names the first tensor that does not."""
import array
import json
import math
import struct
import sys

with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
count = 0
for name, t in sorted(header.items()):
    if name == "__metadata__":
        continue
    assert t["dtype"] == "F32", name
    lo, hi = t["data_offsets"]
    values = array.array("f")
    values.frombytes(data[lo:hi])
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        print(f"not finite: {name} holds {bad[0]}")
        sys.exit(1)
    count += 1
print(f"finite: {count} tensors")
