"""Checks the streaming telemetry of an `mtc train --device-memory` metrics file.

usage: check-streaming.py METRICS.jsonl [--weight-loads N] [--budget BYTES]

Every step record must carry h2d_bytes, d2h_bytes, weight_loads,
device_peak_bytes, device_budget_bytes, host_bytes and overlap; the measured
device peak must not exceed the budget; overlap must lie in [0, 1];
--weight-loads N: every step loaded exactly N layer instances; --budget: the
device had exactly BYTES. Prints one summary line (FileCheck it) or the first
violation (exit 1). Standard library only.
"""
import json
import sys

FIELDS = ("h2d_bytes", "d2h_bytes", "weight_loads", "device_peak_bytes",
          "device_budget_bytes", "host_bytes", "overlap")


def main():
    args = sys.argv[1:]
    path = args.pop(0)
    want_loads = want_budget = None
    while args:
        flag = args.pop(0)
        if flag == "--weight-loads":
            want_loads = int(args.pop(0))
        elif flag == "--budget":
            want_budget = int(args.pop(0))
        else:
            print("unknown flag " + flag)
            return 2
    recs = [json.loads(l) for l in open(path) if l.strip()]
    if not recs:
        print(path + ": no records")
        return 1
    peak = 0
    for r in recs:
        for f in FIELDS:
            if f not in r:
                print(f"step {r.get('step')}: no {f}")
                return 1
        if r["device_peak_bytes"] > r["device_budget_bytes"]:
            print(f"step {r['step']}: device peak {r['device_peak_bytes']} "
                  f"exceeds the budget {r['device_budget_bytes']}")
            return 1
        if not 0 <= r["overlap"] <= 1:
            print(f"step {r['step']}: overlap {r['overlap']} outside [0, 1]")
            return 1
        if want_loads is not None and r["weight_loads"] != want_loads:
            print(f"step {r['step']}: {r['weight_loads']} weight loads, "
                  f"expected {want_loads}")
            return 1
        if want_budget is not None and r["device_budget_bytes"] != want_budget:
            print(f"step {r['step']}: budget {r['device_budget_bytes']}, "
                  f"expected {want_budget}")
            return 1
        if r["h2d_bytes"] <= 0 or r["d2h_bytes"] <= 0:
            print(f"step {r['step']}: no bytes moved")
            return 1
        peak = max(peak, r["device_peak_bytes"])
    print(f"{len(recs)} steps: peak within budget, weight loads "
          f"{recs[0]['weight_loads']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
