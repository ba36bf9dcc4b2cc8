"""Compares the per-step training records of two `mtc train --metrics` files.

usage: compare-metrics.py [--rtol R] EXPECTED.jsonl ACTUAL.jsonl

Both must hold steps 1..N in order with bit-identical loss, lr, grad_norm and
val_loss (JSON numbers are written in their shortest round-trip form, so equal
floats are equal bits). Timing fields are ignored. Prints "N steps identical"
or the first difference (exit 1). With --rtol R, loss, grad_norm and val_loss
need only agree within R relative (lr stays exact): prints "N steps within R
(max relative difference D)". Standard library only.
"""
import json
import sys

FIELDS = ("loss", "lr", "grad_norm", "val_loss")


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    args = sys.argv[1:]
    rtol = None
    if args[:1] == ["--rtol"]:
        rtol = float(args[1])
        args = args[2:]
    expected, actual = records(args[0]), records(args[1])
    worst = 0.0
    for name, recs in ((args[0], expected), (args[1], actual)):
        steps = [r["step"] for r in recs]
        if steps != list(range(1, len(recs) + 1)):
            print(f"{name}: steps are {steps}, not 1..{len(recs)}")
            return 1
    if len(expected) != len(actual):
        print(f"{len(expected)} steps expected, {len(actual)} found")
        return 1
    for e, a in zip(expected, actual):
        for k in FIELDS:
            x, y = e.get(k), a.get(k)
            if rtol is not None and k != "lr" and isinstance(x, (int, float)) \
                    and isinstance(y, (int, float)):
                diff = abs(x - y) / max(abs(x), 1e-30)
                worst = max(worst, diff)
                if diff <= rtol:
                    continue
            if x != y:
                print(f"step {e['step']}: {k} {x!r} != {y!r}")
                return 1
    if rtol is not None:
        print(f"{len(expected)} steps within {rtol:g} "
              f"(max relative difference {worst:.2g})")
    else:
        print(f"{len(expected)} steps identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
