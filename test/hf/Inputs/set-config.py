"""Writes a copy of a config.json with some fields set.

usage: set-config.py IN OUT FIELD=VALUE...

VALUE is JSON text written as it is (so that 1e999 or 2147483647 reach the
reader unchanged; Python's json would turn 1e999 into Infinity).
"""
import json
import sys

src, dst, *sets = sys.argv[1:]
with open(src) as f:
    cfg = json.load(f)
raw = {}
for i, s in enumerate(sets):
    field, value = s.split("=", 1)
    marker = "@@value%d@@" % i
    cfg[field] = marker
    raw['"%s"' % marker] = value
text = json.dumps(cfg, indent=2)
for marker, value in raw.items():
    text = text.replace(marker, value)
with open(dst, "w") as f:
    f.write(text)
