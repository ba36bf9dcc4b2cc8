#!/usr/bin/env python3
"""Copies a HuggingFace weights fixture with one change to its checkpoint.

  edit_hf_weights.py SRC DST drop NAME          remove tensor NAME
  edit_hf_weights.py SRC DST add NAME FROM      add NAME, a copy of FROM
  edit_hf_weights.py SRC DST shape NAME D0,D1   relabel NAME's shape (same size)

SRC/DST are directories (config.json, inputs.json, expected.json and
model.safetensors). Pure Python: the safetensors layout is an 8-byte
little-endian header length, the JSON header, then the data.
"""

import json
import os
import shutil
import struct
import sys


def main():
    src, dst, op = sys.argv[1], sys.argv[2], sys.argv[3]
    args = sys.argv[4:]
    if os.path.isdir(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    for f in os.listdir(src):
        if f != "model.safetensors":
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
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
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


if __name__ == "__main__":
    main()
