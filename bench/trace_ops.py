#!/usr/bin/env python3
"""trace_ops.py - Where a CPU-device step's compute goes, op by op, in two runs.

Reads two `mtc train --trace FILE --trace-ops` timelines of the same
configuration (typically --threads 1 and --threads 2) and prints, per op
kind and per op (name and result shape), the calls per step and each call's
median (or fastest) time in both runs and their ratio, then the steady
step's wall time, its op time and the time outside the ops (dispatch, waits
for copies, the stream idle) in each. The ratios within a trace are robust
on a shared machine where whole-step times are not: a loaded core slows the
ops of both runs alike only if it slows them at all, so compare the
fastest-call column when the machine was busy.

  mtc train examples/tiny-llama.mt --batch 4 --seq 64 --device-memory 256MiB \\
      --recompute none --data data/corpus.txt --steps 12 --eval-every 0 \\
      --threads 1 --trace t1.json --trace-ops
  (the same with --threads 2 --trace t2.json)
  python3 bench/trace_ops.py t1.json t2.json --top 20

The first --skip steps (default 2: no deferred AdamW in the first, caches
cold) and the last (cut off by the end of the run) are left out.
"""

import argparse
import collections
import json
import statistics
import sys


def load(path, skip):
    """Op durations (microseconds) by name over the steady steps, the steps'
    count, and per step the wall time, the op time and the track's
    category totals."""
    events = json.load(open(path))["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events
              if e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    starts = sorted(e["ts"] for e in spans if e["name"] == "step inputs")
    if len(starts) < skip + 2:
        sys.exit("%s: %d steps, need at least %d (--skip %d)" %
                 (path, len(starts), skip + 2, skip))
    t0, t1 = starts[skip], starts[-1]
    steps = len(starts) - 1 - skip
    ops = collections.defaultdict(list)
    other = collections.defaultdict(float)
    for e in spans:
        if not t0 <= e["ts"] < t1:
            continue
        if e.get("cat") == "op":
            if not e["name"].startswith("apply_layers"):
                ops[e["name"]].append(e["dur"])
        elif tracks.get(e["tid"]) == "compute":
            other[e["cat"] + " " + e["name"].split(" ")[0]] += e["dur"]
    if not ops:
        sys.exit("%s: no op spans (run mtc train with --trace-ops)" % path)
    return ops, steps, (t1 - t0) / steps, other


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", help="the first trace (e.g. --threads 1)")
    ap.add_argument("b", help="the second trace (e.g. --threads 2)")
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--top", type=int, default=15,
                    help="ops listed one by one, by their time in b")
    args = ap.parse_args()
    a, na, wall_a, other_a = load(args.a, args.skip)
    b, nb, wall_b, other_b = load(args.b, args.skip)
    rows = []
    for name in sorted(set(a) & set(b)):
        rows.append((name, len(a[name]) / na, statistics.median(a[name]),
                     statistics.median(b[name]), min(a[name]), min(b[name])))
    ops_a = sum(sum(v) for v in a.values()) / na
    ops_b = sum(sum(v) for v in b.values()) / nb
    print("steady step: %.2f ms / %.2f ms wall (a / b), ops %.2f / %.2f ms, "
          "wall ratio %.2f, op ratio %.2f" % (
              wall_a / 1e3, wall_b / 1e3, ops_a / 1e3, ops_b / 1e3,
              wall_a / wall_b, ops_a / ops_b))
    print("outside the ops (dispatch, waits for copies, the stream idle): "
          "%.2f / %.2f ms per step; sync waits on the compute stream %.2f / "
          "%.2f ms" % ((wall_a - ops_a) / 1e3, (wall_b - ops_b) / 1e3,
                       other_a.get("sync wait", 0) / na / 1e3,
                       other_b.get("sync wait", 0) / nb / 1e3))
    kinds = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0])
    for name, calls, ma, mb, fa, fb in rows:
        k = kinds[name.split(" ")[0]]
        k[0] += calls
        k[1] += calls * ma
        k[2] += calls * mb
        k[3] += calls * fa
        k[4] += calls * fb
    print()
    print("%-26s %6s %10s %10s %6s %10s %10s %6s" % (
        "kind", "calls", "median a", "median b", "a/b", "fastest a",
        "fastest b", "a/b"))
    for kind, (calls, ma, mb, fa, fb) in sorted(kinds.items(),
                                                key=lambda x: -x[1][2]):
        print("%-26s %6.0f %8.3fms %8.3fms %6.2f %8.3fms %8.3fms %6.2f" % (
            kind, calls, ma / 1e3, mb / 1e3, ma / mb if mb else 0, fa / 1e3,
            fb / 1e3, fa / fb if fb else 0))
    print()
    for name, calls, ma, mb, fa, fb in sorted(
            rows, key=lambda r: -r[1] * r[3])[:args.top]:
        print("%-40s x%3.0f  median %8.1f %8.1f us (%.2f)  fastest %8.1f "
              "%8.1f us (%.2f)" % (name, calls, ma, mb, ma / mb, fa, fb,
                                   fa / fb))
    return 0


if __name__ == "__main__":
    sys.exit(main())
