"""Copies a parity fixture directory and edits its inputs.json.

usage: edit_fixture.py SRC DST KEY.PATH=VALUE...

Each KEY.PATH names a field of inputs.json ("set.theta", "adamw.weight_decay")
and VALUE is parsed as JSON. Used by the negative parity tests to make mtc
compute something slightly different from what the PyTorch reference did.
Standard library only.
"""
import json
import shutil
import sys

src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
path = dst + "/inputs.json"
with open(path) as f:
    inputs = json.load(f)
for edit in edits:
    key, value = edit.split("=", 1)
    *parents, leaf = key.split(".")
    node = inputs
    for p in parents:
        node = node[p]
    node[leaf] = json.loads(value)
with open(path, "w") as f:
    json.dump(inputs, f)
