"""Writes a copy of a JSON object (a hardware profile, a config.json) with
some fields set.

usage: edit-json.py IN OUT PATH=VALUE...

PATH is dotted ("device.memory_bandwidth", "num_hidden_layers"); VALUE is
JSON text written as it is (1e999 or 18446744073709551615 reach the reader
unchanged; Python's json would turn 1e999 into Infinity).
"""
import json
import sys

src, dst, *sets = sys.argv[1:]
with open(src) as f:
    doc = json.load(f)
raw = {}
for i, s in enumerate(sets):
    path, value = s.split("=", 1)
    *parents, leaf = path.split(".")
    node = doc
    for p in parents:
        node = node[p]
    marker = "@@value%d@@" % i
    node[leaf] = marker
    raw['"%s"' % marker] = value
text = json.dumps(doc, indent=2)
for marker, value in raw.items():
    text = text.replace(marker, value)
with open(dst, "w") as f:
    f.write(text)
