"""trace-ops.py - Summarises the op spans of a `mtc train --trace-ops` trace.

Prints the track names, whether every op span lies on the compute track and
inside one of that track's other (layer or stage) spans, and the distinct op
span names, sorted.
"""
import json
import sys

events = json.load(open(sys.argv[1]))["traceEvents"]
tracks = {e["tid"]: e["args"]["name"] for e in events
          if e.get("name") == "thread_name"}
spans = [e for e in events if e.get("ph") == "X"]
ops = [e for e in spans if e.get("cat") == "op"]
print("op spans: %d" % len(ops))
if not ops:
    sys.exit(0)
print("tracks", sorted(tracks.values()))
print("op spans on compute only:",
      all(tracks[e["tid"]] == "compute" for e in ops))
outer = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans
               if e.get("cat") == "compute" and tracks[e["tid"]] == "compute")
eps = 0.01  # microseconds: the timestamps are rounded to nanoseconds


def inside(e):
    return any(b - eps <= e["ts"] and e["ts"] + e["dur"] <= f + eps
               for b, f in outer)


for name in sorted({e["name"] for e in ops}):
    print(name)
print("every op span inside a compute span:", all(inside(e) for e in ops))
