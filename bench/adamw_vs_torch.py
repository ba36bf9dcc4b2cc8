#!/usr/bin/env python3
"""AdamW step: mtc (runtime/train/Optimizer.h, via build/bin/mtc-bench-adamw)
against torch.optim.AdamW on the CPU, same size, same thread counts.

Both sides update N fp32 parameters (default 64M) held in tensors of 4M
elements, lr 1e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1. PyTorch runs
`foreach=True` and, where the CPU build supports it, `fused=True`; its step
does not include gradient clipping (mtc folds the clipping scale into its
pass for free, and its figure includes it). Every figure is the median step
time over --reps steps after one warm-up step; --repeats alternates the mtc
probe and the torch runs so that load from other users of the machine hits
both, and the summary takes medians over those runs.

  ninja -C build mtc-bench-adamw
  /tmp/parity-venv/bin/python bench/adamw_vs_torch.py [--params N] [--threads 1,2]

The ratio printed is torch time / mtc time (> 1: mtc faster).
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


def torch_step_time(torch, n, threads, impl, reps):
    torch.set_num_threads(threads)
    chunk = 4 << 20
    sizes = [min(chunk, n - b) for b in range(0, n, chunk)]
    g = torch.Generator().manual_seed(0)
    params = []
    for s in sizes:
        p = torch.nn.Parameter(torch.randn(s, generator=g) * 0.02)
        p.grad = torch.randn(s, generator=g) * 1e-3
        params.append(p)
    kw = {"foreach": True} if impl == "foreach" else {"fused": True}
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1, **kw)
    opt.step()  # warm-up: allocates the moments
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    del opt, params
    return statistics.median(times)


def mtc_step_times(exe, n, threads, reps):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "adamw.json")
        r = subprocess.run([exe, "--params", str(n), "--reps", str(reps),
                            "--threads", ",".join(map(str, threads)),
                            "--json", out], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"{exe} failed:\n{r.stderr}")
        res = json.load(open(out))
    return {x["threads"]: x for x in res["runs"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", type=int, default=64 << 20)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=7, help="timed steps per run")
    ap.add_argument("--repeats", type=int, default=3, help="runs per side")
    ap.add_argument("--exe", default=os.path.join(ROOT, "build/bin/mtc-bench-adamw"))
    ap.add_argument("--json", help="write the results here as JSON")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    if not os.path.exists(args.exe):
        sys.exit(f"{args.exe} missing: ninja -C build mtc-bench-adamw")

    import torch
    impls = ["foreach"]
    try:  # fused AdamW on CPU exists since torch 2.4
        p = torch.nn.Parameter(torch.zeros(4))
        p.grad = torch.zeros(4)
        torch.optim.AdamW([p], fused=True).step()
        impls.append("fused")
    except Exception as e:
        print(f"torch fused AdamW not available on CPU: {e}")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"torch {torch.__version__}; mtc commit {commit} "
          f"({args.exe}); {args.params:,} parameters; "
          f"{args.repeats} runs x {args.reps} steps per side")

    res = {t: {"mtc": [], "triad_GBs": [], **{i: [] for i in impls}} for t in threads}
    for r in range(args.repeats):
        m = mtc_step_times(args.exe, args.params, threads, args.reps)
        for t in threads:
            res[t]["mtc"].append(m[t]["adamw_s"])
            res[t]["triad_GBs"].append(m[t]["triad_GBs"])
            for i in impls:
                res[t][i].append(torch_step_time(torch, args.params, t, i, args.reps))
            print(f"  run {r + 1}, {t} thread(s): mtc {m[t]['adamw_s'] * 1e3:.1f} ms, "
                  + ", ".join(f"torch {i} {res[t][i][-1] * 1e3:.1f} ms" for i in impls),
                  flush=True)

    print()
    n = args.params
    summary = {}
    hdr = f"{'threads':>7s} {'impl':>14s} {'step ms':>9s} {'Gparam/s':>9s} {'GB/s@28B':>9s} {'torch/mtc':>9s}"
    print(hdr)
    for t in threads:
        mt = statistics.median(res[t]["mtc"])
        summary[t] = {"mtc_s": mt, "triad_GBs": statistics.median(res[t]["triad_GBs"])}
        for name in ["mtc"] + impls:
            s = statistics.median(res[t][name])
            ratio = s / mt
            label = "mtc AdamW" if name == "mtc" else f"torch {name}"
            print(f"{t:7d} {label:>14s} {s * 1e3:9.1f} {n / s / 1e9:9.3f} "
                  f"{28 * n / s / 1e9:9.2f} {ratio:9.2f}")
            summary[t][f"{name}_s"] = s
            if name != "mtc":
                summary[t][f"ratio_{name}"] = ratio
        print(f"{'':7s} {'(triad)':>14s} {'':9s} {'':9s} {summary[t]['triad_GBs']:9.2f}")
    if args.json:
        json.dump({"torch": torch.__version__, "commit": commit, "params": n,
                   "runs": {str(t): res[t] for t in threads},
                   "summary": {str(t): v for t, v in summary.items()}},
                  open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
