"""Compares the per-step training records of two `mtc train --metrics` files.

usage: compare-metrics.py EXPECTED.jsonl ACTUAL.jsonl

Both must hold steps 1..N in order with bit-identical loss, lr, grad_norm and
val_loss (JSON numbers are written in their shortest round-trip form, so equal
floats are equal bits). Timing fields are ignored. Prints "N steps identical"
or the first difference (exit 1). Standard library only.
"""
import json
import sys

FIELDS = ("loss", "lr", "grad_norm", "val_loss")


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    expected, actual = records(sys.argv[1]), records(sys.argv[2])
    for name, recs in ((sys.argv[1], expected), (sys.argv[2], actual)):
        steps = [r["step"] for r in recs]
        if steps != list(range(1, len(recs) + 1)):
            print(f"{name}: steps are {steps}, not 1..{len(recs)}")
            return 1
    if len(expected) != len(actual):
        print(f"{len(expected)} steps expected, {len(actual)} found")
        return 1
    for e, a in zip(expected, actual):
        for k in FIELDS:
            if e.get(k) != a.get(k):
                print(f"step {e['step']}: {k} {e.get(k)!r} != {a.get(k)!r}")
                return 1
    print(f"{len(expected)} steps identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
