#!/usr/bin/env python3
"""AdamW step: mtc (runtime/train/Optimizer.h, via build/bin/mtc-bench-adamw)
against torch.optim.AdamW(fused=True) on the CPU, same sizes, same threads.

Both sides update N fp32 parameters (default 64M) with fp32 moments, lr 1e-3,
betas 0.9/0.95, eps 1e-8, weight decay 0.1, in four placements:

  fp32 whole   fp32 gradients; tensors of 4M elements, one step call
  bf16 whole   bf16 gradients; same tensors
  fp32 slices  fp32 gradients; one tensor and one step call per --slice
               parameters (default 50M), in turn, as the streaming trainer
               updates one layer at a time
  bf16 slices  bf16 gradients; same slices

torch's fused CPU kernel takes gradients of the parameters' dtype only, so
for bf16 gradients this script times two torch figures: the fused step on
fp32 gradients ("torch fused", the same update with 2 more bytes read per
parameter) and "torch bf16": copying the bf16 gradients into fp32 ones
(`p.grad.copy_(g16)`) and then the fused step, which is what a torch user with
bf16 gradients and fp32 master weights runs. mtc folds a clipping scale into
its pass (its figures include it); torch's do not clip.

Every figure is the median step time over --reps steps after one warm-up
step; --repeats alternates the mtc probe and the torch runs so that load from
other users of the machine hits both, and the summary takes medians over
those runs, and the fastest run of each side too (--wait-quiet S starts each
run on a quiet machine where one comes within S seconds). The ratio printed
is torch time / mtc time (>= 1: mtc as fast or faster).

  ninja -C build mtc-bench-adamw
  /tmp/parity-venv/bin/python bench/adamw_vs_torch.py [--params N] [--threads 1,2]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_idle import wait_quiet  # noqa: E402
PLACEMENTS = ["fp32_whole", "bf16_whole", "fp32_slices", "bf16_slices"]


def torch_step_time(torch, n, slice_n, threads, placement, impl, reps):
    """Median seconds of one torch AdamW step over n parameters."""
    torch.set_num_threads(threads)
    per_slice = placement.endswith("slices")
    piece = slice_n if per_slice else 4 << 20
    sizes = [min(piece, n - b) for b in range(0, n, piece)]
    bf16 = placement.startswith("bf16")
    g = torch.Generator().manual_seed(0)
    params, grads16 = [], []
    for s in sizes:
        p = torch.nn.Parameter(torch.randn(s, generator=g) * 0.02)
        p.grad = torch.randn(s, generator=g) * 1e-3
        params.append(p)
        if bf16 and impl == "bf16":
            grads16.append(p.grad.to(torch.bfloat16))
    kw = {"foreach": True} if impl == "foreach" else {"fused": True}

    def make(ps):
        return torch.optim.AdamW(ps, lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
                                 weight_decay=0.1, **kw)

    # Per slice: one optimizer (one fused call) per slice, stepped in turn.
    opts = [make([p]) for p in params] if per_slice else [make(params)]

    def step():
        if grads16:
            if per_slice:  # a layer's conversion, then its update
                for p, g16, o in zip(params, grads16, opts):
                    p.grad.copy_(g16)
                    o.step()
                return
            for p, g16 in zip(params, grads16):
                p.grad.copy_(g16)
        for o in opts:
            o.step()

    step()  # warm-up: allocates the moments
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    del opts, params, grads16
    return statistics.median(times)


def mtc_run(exe, n, slice_n, threads, reps):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "adamw.json")
        r = subprocess.run([exe, "--params", str(n), "--slice", str(slice_n),
                            "--reps", str(reps),
                            "--threads", ",".join(map(str, threads)),
                            "--json", out], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"{exe} failed:\n{r.stderr}")
        return json.load(open(out))


def torch_impls(placement, foreach):
    impls = ["fused"] + (["bf16"] if placement.startswith("bf16") else [])
    return impls + (["foreach"] if foreach else [])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", type=int, default=64 << 20)
    ap.add_argument("--slice", type=int, default=50 << 20,
                    help="parameters per slice in the per-layer placements")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=7, help="timed steps per run")
    ap.add_argument("--repeats", type=int, default=3, help="runs per side")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                    help="before each run wait up to S seconds for the "
                         "machine to be 90%% idle over 2 s")
    ap.add_argument("--foreach", action="store_true",
                    help="time torch foreach=True too (slow)")
    ap.add_argument("--exe", default=os.path.join(ROOT, "build/bin/mtc-bench-adamw"))
    ap.add_argument("--json", help="write the results here as JSON")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    if not os.path.exists(args.exe):
        sys.exit(f"{args.exe} missing: ninja -C build mtc-bench-adamw")

    import torch
    try:  # fused AdamW on CPU exists since torch 2.4
        p = torch.nn.Parameter(torch.zeros(4))
        p.grad = torch.zeros(4)
        torch.optim.AdamW([p], fused=True).step()
    except Exception as e:
        sys.exit(f"torch fused AdamW not available on CPU: {e}")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}); "
          f"mtc commit {commit[:12]} ({args.exe}); {args.params:,} parameters, "
          f"slices of {min(args.slice, args.params):,}; "
          f"{args.repeats} runs x {args.reps} steps per side; "
          f"load average {os.getloadavg()[0]:.1f}")

    res = {t: {pl: {"mtc": [], **{i: [] for i in torch_impls(pl, args.foreach)}}
               for pl in PLACEMENTS} for t in threads}
    shaped = {t: [] for t in threads}
    kernel = "?"
    for r in range(args.repeats):
        if args.wait_quiet > 0:
            idle = wait_quiet(args.wait_quiet)
            print(f"  run {r + 1}: machine {100 * idle:.0f}% idle at the start"
                  if idle is not None else "", flush=True)
        m = mtc_run(args.exe, args.params, args.slice, threads, args.reps)
        kernel = m["kernel"]
        runs = {x["threads"]: x for x in m["runs"]}
        for t in threads:
            shaped[t].append(runs[t]["shaped_GBs"])
            line = []
            for pl in PLACEMENTS:
                res[t][pl]["mtc"].append(runs[t][f"{pl}_s"])
                cell = f"{pl} mtc {runs[t][f'{pl}_s'] * 1e3:.1f}"
                for i in torch_impls(pl, args.foreach):
                    s = torch_step_time(torch, args.params, args.slice, t, pl, i,
                                        args.reps)
                    res[t][pl][i].append(s)
                    cell += f" {i} {s * 1e3:.1f}"
                line.append(cell)
            print(f"  run {r + 1}, {t} thread(s), load {os.getloadavg()[0]:.1f}: "
                  + "; ".join(line) + " ms", flush=True)

    print(f"\nmtc kernel: {kernel}")
    n = args.params
    summary = {}
    # "best": the fastest run of each side (the closest to an idle machine).
    print(f"{'threads':>7s} {'placement':>12s} {'side':>12s} {'step ms':>9s} "
          f"{'Gparam/s':>9s} {'torch/mtc':>9s} {'best ms':>9s} {'best t/m':>9s}")
    for t in threads:
        summary[t] = {"shaped_GBs": statistics.median(shaped[t])}
        for pl in PLACEMENTS:
            mt = statistics.median(res[t][pl]["mtc"])
            mb = min(res[t][pl]["mtc"])
            summary[t][f"{pl}_mtc_s"] = mt
            summary[t][f"{pl}_mtc_best_s"] = mb
            for side, xs in res[t][pl].items():
                s, b = statistics.median(xs), min(xs)
                label = "mtc" if side == "mtc" else f"torch {side}"
                print(f"{t:7d} {pl:>12s} {label:>12s} {s * 1e3:9.1f} "
                      f"{n / s / 1e9:9.3f} {s / mt:9.2f} {b * 1e3:9.1f} "
                      f"{b / mb:9.2f}")
                if side != "mtc":
                    summary[t][f"{pl}_torch_{side}_s"] = s
                    summary[t][f"{pl}_torch_{side}_best_s"] = b
                    summary[t][f"{pl}_ratio_{side}"] = s / mt
                    summary[t][f"{pl}_best_ratio_{side}"] = b / mb
        print(f"{'':7s} {'':>12s} {'(shaped)':>12s} "
              f"{28 * n / summary[t]['shaped_GBs'] / 1e6:9.1f}")
    print(f"load average at the end: {os.getloadavg()}")
    if args.json:
        json.dump({"torch": torch.__version__, "commit": commit, "params": n,
                   "slice": min(args.slice, n), "kernel": kernel,
                   "runs": {str(t): res[t] for t in threads},
                   "summary": {str(t): v for t, v in summary.items()}},
                  open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
