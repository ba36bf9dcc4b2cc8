"""How far the losses of two `mtc train --metrics` runs drift apart.

usage: loss-drift.py --early N --early-tol A --tol B --val-tol C REF.jsonl RUN.jsonl

Both runs must log the same steps. Prints the largest relative loss difference
|run - ref| / ref over steps 1..N ("early"), over every step, and of the last
validation loss, each with its tolerance, then "within tolerance" (exit 0) or
"exceeds tolerance" (exit 1). Standard library only.
"""
import json
import sys


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    args = sys.argv[1:]
    opts = {}
    while args and args[0].startswith("--"):
        opts[args[0]] = float(args[1])
        args = args[2:]
    ref, run = records(args[0]), records(args[1])
    if [r["step"] for r in ref] != [r["step"] for r in run]:
        print("the runs logged different steps")
        return 1
    early = int(opts["--early"])
    rel = [abs(b["loss"] - a["loss"]) / abs(a["loss"]) for a, b in zip(ref, run)]
    worst = max(range(len(rel)), key=lambda i: rel[i])
    vals = [(a["val_loss"], b["val_loss"]) for a, b in zip(ref, run)
            if "val_loss" in a and "val_loss" in b]
    val = abs(vals[-1][1] - vals[-1][0]) / abs(vals[-1][0]) if vals else 0.0
    checks = [
        ("steps 1..%d" % early, max(rel[:early]), opts["--early-tol"]),
        ("all %d steps (largest at step %d)" % (len(rel), ref[worst]["step"]),
         rel[worst], opts["--tol"]),
        ("last validation loss", val, opts["--val-tol"]),
    ]
    ok = True
    for what, got, tol in checks:
        print("%s: max relative loss difference %.3g (tolerance %g)" %
              (what, got, tol))
        ok = ok and got <= tol
    print("within tolerance" if ok else "exceeds tolerance")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
