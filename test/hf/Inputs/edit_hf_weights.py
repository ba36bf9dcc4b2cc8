#!/usr/bin/env python3
"""Copies a HuggingFace weights fixture with one change to its checkpoint.

  edit_hf_weights.py SRC DST drop NAME          remove tensor NAME
  edit_hf_weights.py SRC DST add NAME FROM      add NAME, a copy of FROM
  edit_hf_weights.py SRC DST shape NAME D0,D1   relabel NAME's shape (same size)
  edit_hf_weights.py SRC DST scale NAME F       multiply F32 tensor NAME by F
  edit_hf_weights.py SRC DST transpose NAME     transpose 2-D F32 tensor NAME
  edit_hf_weights.py SRC DST config KEY JSON    set config.json's KEY to JSON
  edit_hf_weights.py SRC DST strip PREFIX       remove PREFIX from every name

--file F before SRC edits SRC/F (e.g. grads.safetensors, the reference
gradients) instead of model.safetensors. SRC/DST are directories (the
fixture's files are copied). Pure Python: the safetensors layout is an 8-byte
little-endian header length, the JSON header, then the data.
"""

import array
import json
import os
import shutil
import struct
import sys


def main():
    argv = sys.argv[1:]
    target = "model.safetensors"
    if argv[0] == "--file":
        target, argv = argv[1], argv[2:]
    src, dst, op = argv[0], argv[1], argv[2]
    args = argv[3:]
    if os.path.isdir(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    for f in os.listdir(src):
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    if op == "config":
        path = os.path.join(dst, "config.json")
        with open(path) as f:
            cfg = json.load(f)
        cfg[args[0]] = json.loads(args[1])
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2)
        return
    with open(os.path.join(src, target), "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", None)
    tensors = {k: (v, data[v["data_offsets"][0]:v["data_offsets"][1]])
               for k, v in header.items()}
    if op == "drop":
        del tensors[args[0]]
    elif op == "add":
        info, blob = tensors[args[1]]
        tensors[args[0]] = (dict(info), blob)
    elif op == "shape":
        tensors[args[0]][0]["shape"] = [int(d) for d in args[1].split(",")]
    elif op in ("scale", "transpose"):
        info, blob = tensors[args[0]]
        assert info["dtype"] == "F32" and sys.byteorder == "little"
        a = array.array("f", blob)
        if op == "scale":
            a = array.array("f", (x * float(args[1]) for x in a))
        else:
            rows, cols = info["shape"]
            a = array.array("f", (a[r * cols + c] for c in range(cols)
                                  for r in range(rows)))
            info = dict(info, shape=[cols, rows])
        tensors[args[0]] = (info, a.tobytes())
    elif op == "strip":
        tensors = {(k[len(args[0]):] if k.startswith(args[0]) else k): v
                   for k, v in tensors.items()}
    else:
        sys.exit("unknown operation " + op)
    out_header, blobs, off = {}, [], 0
    if meta is not None:
        out_header["__metadata__"] = meta
    for k, (info, blob) in tensors.items():
        info = dict(info, data_offsets=[off, off + len(blob)])
        out_header[k] = info
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(out_header).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(dst, target), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


if __name__ == "__main__":
    main()
