#!/usr/bin/env python3
"""Streaming overhead: step time at a device budget of 1/8 of the weights
against a budget that holds everything, in one run (python3 stdlib only).

Both configurations train the same model, seed and data with `mtc train
--device-memory SIZE` on the CPU device; they differ only in the budget (and
so in the compiled plan: with the small budget, weights stream through a few
slots and checkpoints may go to host memory). A third configuration runs the
plain executor (no --device-memory) for reference. Runs alternate between the
configurations (--repeats rounds) so that load from other users of the machine
hits all of them; each run's first --warmup steps are dropped and the median
`step_time_s` of the rest is taken from the --metrics JSONL; the summary is the
median over runs, and the ratio small / full (target <= 1.10).

The per-step losses of the two budgets must be bit-identical; the script
checks that too.

Usage (from the repository root, after `make build`):
  python3 bench/streaming_overhead.py
  python3 bench/streaming_overhead.py --set n_layers=32 --batch 4 --seq 128
  python3 bench/streaming_overhead.py --small-recompute full
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def weight_bytes(mtc, model, sets):
    """fp32 bytes of every parameter (from `mtc compile --emit=summary`)."""
    cmd = [mtc, "compile", model, "--emit=summary"]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"parameters:\s*([0-9,]+)", out)
    if not m:
        sys.exit("cannot read the parameter count from: " + out)
    return 4 * int(m.group(1).replace(",", ""))


plans = {}  # tag -> "POLICY, checkpoints PLACE" of its streaming plan


def run(mtc, args, sets, budget, tmp, tag):
    metrics = os.path.join(tmp, tag + ".jsonl")
    cmd = [mtc, "train", args.model, "--data", args.data, "--steps",
           str(args.steps), "--batch", str(args.batch), "--seq", str(args.seq),
           "--micro-batches", str(args.micro_batches), "--eval-every", "0",
           "--eval-batches", "1", "--metrics", metrics, "--threads",
           str(args.threads), "--seed", "1"]
    if budget:
        cmd += ["--device-memory", str(budget)]
    if tag == "small" and args.small_recompute != "auto":
        cmd += ["--recompute", args.small_recompute]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"recompute (\w+), checkpoints (\w+)", out)
    if m:
        plans[tag] = f"{m.group(1)}, checkpoints {m.group(2)}"
    recs = [json.loads(l) for l in open(metrics) if l.strip()]
    recs = [r for r in recs if "step_time_s" in r]
    times = [r["step_time_s"] for r in recs][args.warmup:]
    return times, [r["loss"] for r in recs], recs[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mtc", default=os.path.join(ROOT, "build/bin/mtc"))
    ap.add_argument("--model", default=os.path.join(ROOT, "examples/tiny-llama.mt"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data/corpus.txt"))
    ap.add_argument("--set", action="append", default=None,
                    help="config override (default: a deep, narrow model)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--micro-batches", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--small-recompute", default="auto",
                    choices=["auto", "full", "selective", "none"],
                    help="--recompute of the small budget (default: the "
                         "compiler's choice)")
    ap.add_argument("--fraction", type=float, default=8.0,
                    help="small budget = weights / FRACTION")
    args = ap.parse_args()
    sets = args.set if args.set is not None else [
        "n_layers=128", "dim=256", "ffn=688"]

    wbytes = weight_bytes(args.mtc, args.model, sets)
    small = int(wbytes / args.fraction)
    full = 4 * wbytes + (256 << 20)
    print(f"model {os.path.basename(args.model)} {' '.join(sets)}: "
          f"{wbytes / 2**20:.1f} MiB of fp32 weights")
    print(f"budgets: small {small / 2**20:.1f} MiB (1/{args.fraction:g}), "
          f"full {full / 2**20:.1f} MiB; {args.micro_batches} x {args.batch} x "
          f"{args.seq} tokens per step, {args.threads} threads")
    res = {"small": [], "full": [], "plain": []}
    best = {"small": float("inf"), "full": float("inf"), "plain": float("inf")}
    losses = {}
    last = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for tag, budget in (("small", small), ("full", full),
                                ("plain", 0)):
                times, l, rec = run(args.mtc, args, sets, budget, tmp, tag)
                t = statistics.median(times)
                res[tag].append(t)
                best[tag] = min(best[tag], min(times))
                losses[tag] = l
                last[tag] = rec
                print(f"  round {r + 1} {tag:5s}: median step {t * 1e3:.1f} ms")
    same = losses["small"] == losses["full"]
    print(f"losses small == full (bit-identical): {same}")
    for tag in ("small", "full"):
        rec = last[tag]
        print(f"  {tag}: recompute {plans.get(tag, '?')}, weight_loads "
              f"{rec.get('weight_loads')}, h2d "
              f"{rec.get('h2d_bytes', 0) / 2**20:.1f} MiB, device peak "
              f"{rec.get('device_peak_bytes', 0) / 2**20:.1f} MiB, overlap "
              f"{rec.get('overlap', 0):.2f}")
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"median step: small {med['small'] * 1e3:.1f} ms, full "
          f"{med['full'] * 1e3:.1f} ms, plain executor {med['plain'] * 1e3:.1f} ms")
    print(f"streaming overhead (small / full): {med['small'] / med['full']:.3f}x "
          f"(target <= 1.10)")
    print(f"small / plain executor: {med['small'] / med['plain']:.3f}x")
    # The fastest step of each configuration over all runs: less sensitive to
    # other users of a shared machine than the medians (which it bounds).
    print(f"fastest step: small {best['small'] * 1e3:.1f} ms, full "
          f"{best['full'] * 1e3:.1f} ms, plain {best['plain'] * 1e3:.1f} ms; "
          f"small / full {best['small'] / best['full']:.3f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
