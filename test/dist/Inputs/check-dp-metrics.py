"""Checks the data-parallel fields of an `mtc train --metrics` file.

usage: check-dp-metrics.py FILE.jsonl --ranks N --allreduce-bytes B
       [--max-state-bytes-per-param X --params P]

Every record must carry `ranks` N, `allreduce_bytes` B (the bytes of the
gradients reduced over the ranks in that step, and of the values gathered
with a sharded optimizer), a finite `allreduce_exposed_s`, `host_bytes` and
`host_state_bytes`; with --max-state-bytes-per-param, host_state_bytes / P
(this rank's parameters, gradients and AdamW state) must not exceed X. Prints one line (what held) or the first violation (exit 1).
Standard library only.
"""
import json
import math
import sys


def main():
    path, args = sys.argv[1], sys.argv[2:]
    opts = dict(zip(args[::2], args[1::2]))
    ranks = int(opts["--ranks"])
    want = int(opts["--allreduce-bytes"])
    with open(path) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    worst = 0.0
    for r in recs:
        for key in ("ranks", "allreduce_bytes", "allreduce_exposed_s",
                    "host_bytes", "host_state_bytes"):
            if key not in r:
                print(f"step {r['step']}: no '{key}'")
                return 1
        if r["ranks"] != ranks or r["allreduce_bytes"] != want:
            print(f"step {r['step']}: ranks {r['ranks']}, allreduce_bytes "
                  f"{r['allreduce_bytes']} (expected {ranks}, {want})")
            return 1
        if not math.isfinite(r["allreduce_exposed_s"]):
            print(f"step {r['step']}: allreduce_exposed_s not finite")
            return 1
        if "--params" in opts:
            per = r["host_state_bytes"] / int(opts["--params"])
            worst = max(worst, per)
            if per > float(opts["--max-state-bytes-per-param"]):
                print(f"step {r['step']}: host_state_bytes "
                      f"{r['host_state_bytes']} is {per:.2f} B/param")
                return 1
    line = f"{len(recs)} steps: ranks {ranks}, allreduce_bytes {want}"
    if "--params" in opts:
        line += f", host state {worst:.2f} B/param"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
