"""Writes a copy of a hardware profile with some fields set.

usage: edit-profile.py IN OUT PATH=VALUE...

PATH is dotted ("device.memory_bandwidth", "device.peak_flops.bf16");
VALUE is JSON text written as it is (1e999 reaches the reader unchanged).
"""
import json
import sys

src, dst, *sets = sys.argv[1:]
with open(src) as f:
    profile = json.load(f)
raw = {}
for i, s in enumerate(sets):
    path, value = s.split("=", 1)
    *parents, leaf = path.split(".")
    node = profile
    for p in parents:
        node = node[p]
    marker = "@@value%d@@" % i
    node[leaf] = marker
    raw['"%s"' % marker] = value
text = json.dumps(profile, indent=2)
for marker, value in raw.items():
    text = text.replace(marker, value)
with open(dst, "w") as f:
    f.write(text)
