#!/usr/bin/env python3
"""Regenerates the predicted throughput table of docs/simulate.md.

For every model (a published config.json under test/fixtures/hf) and every
GPU profile (data/hardware) it runs

  mtc simulate --hf DIR --gpu GPU --batch 1 --seq 4096 --micro-batches 16 \
      --host-memory HOST --sweep

(64k tokens per step; --sweep searches the micro-batch size and count at
those tokens, the prefetch depth and the recompute policy) and prints one
markdown row per pair with the best configuration's figures. When no
configuration fits the host memory with gradient clipping and fp32 gradients
(16 B/param of state) the row is the --grad-dtype bf16 plan (14 B/param,
clipping kept), else the --clip 0 plan (12 B/param: the immediate optimizer
placement), marked so. A second tokens/s column is the same plan with
--host-convert off (fp32 -> bf16 conversions on the device instead of the
host's conversion pool).

These are predictions of an uncalibrated model, not measurements.

usage: scripts/simulate-table.py [--mtc build/bin/mtc] [--host 2048GiB]
"""

import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = [
    ("Llama-3.1-8B", "llama-3.1-8b"),
    ("Qwen2.5-14B", "qwen2.5-14b"),
    ("Qwen2.5-32B", "qwen2.5-32b"),
    ("Llama-3.1-70B", "llama-3.1-70b"),
    ("Qwen2.5-72B", "qwen2.5-72b"),
    ("Qwen3-30B-A3B", "qwen3-30b-a3b"),
    ("Mixtral-8x22B", "mixtral-8x22b-v0.1"),
    ("Mistral-Large-2 (123B dense)", "mistral-large-2"),
]
GPUS = ["h100-pcie", "h200", "gh200"]


def simulate(mtc, model, gpu, host, extra):
    cmd = [mtc, "simulate", "--hf", os.path.join(ROOT, "test/fixtures/hf", model),
           "--gpu", gpu, "--batch", "1", "--seq", "4096", "--micro-batches",
           "16", "--host-memory", host] + extra
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p, time.time() - t0


def best(out):
    """The `key: value` lines after 'best:' (or all of them)."""
    text = out.split("\nbest:\n", 1)[-1]
    fields = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_0-9 ]+): (.*)$", line)
        if m:
            fields[m.group(1)] = m.group(2)
    return fields


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mtc", default=os.path.join(ROOT, "build/bin/mtc"))
    ap.add_argument("--host", default="2048GiB")
    args = ap.parse_args()
    print("| model | GPU | best configuration | tokens/s | MFU | host RAM | "
          "device memory | bottleneck | tokens/s, no host convert | sim time |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, model in MODELS:
        for gpu in GPUS:
            for extra in ([], ["--grad-dtype", "bf16"], ["--clip", "0"]):
                p, secs = simulate(args.mtc, model, gpu, args.host,
                                   ["--sweep"] + extra)
                note = ", " + " ".join(extra) if extra else ""
                if p.returncode == 0:
                    break
            if p.returncode != 0:
                err = p.stderr.strip().splitlines()
                print(f"| {label} | {gpu} | does not fit: "
                      f"{err[0] if err else '?'} | | | | | | | |")
                continue
            f = best(p.stdout)
            st = f["step"]
            mb, b = re.match(
                r"(\d+) micro-batch(?:es)? of \[(\d+), \d+\] tokens", st).groups()
            depth = re.search(r"prefetch depth (\d+)", st).group(1)
            rec = re.search(r"recompute (\w+)", st).group(1)
            ck = re.search(r"checkpoints (\w+)", st).group(1)
            # Mixed recomputation and segment checkpointing (auto's plans).
            sel = re.search(r"for the first (\d+) layer instances", st)
            seg = re.search(r"checkpoint every (\d+)", st)
            shown = rec
            policy = ["--recompute", rec]
            if sel:
                shown += f" for the first {sel.group(1)} instances"
                policy += ["--selective-layers", sel.group(1)]
            if seg:
                shown += f", checkpoint every {seg.group(1)}"
                policy += ["--checkpoint-every", seg.group(1)]
            config = f"{mb} x [{b}, 4096], depth {depth}, {shown}, ckpt {ck}{note}"
            host_gib = int(f["host_memory_bytes"]) / 2**30
            dev_gib = int(f["device_peak_bytes"]) / 2**30
            flags = ["--micro-batches", mb, "--prefetch-depth", depth] + \
                policy + ["--host-convert", "off"]
            flags[1:2] = [mb]
            q = subprocess.run(
                [args.mtc, "simulate", "--hf",
                 os.path.join(ROOT, "test/fixtures/hf", model), "--gpu", gpu,
                 "--batch", b, "--seq", "4096", "--host-memory", args.host,
                 "--checkpoints", ck] + flags +
                extra,
                capture_output=True, text=True)
            noconv = best(q.stdout).get("tokens_per_s", "?") \
                if q.returncode == 0 else "?"
            print(f"| {label} | {gpu} | {config} | {float(f['tokens_per_s']):,.0f} "
                  f"| {float(f['mfu']):.2f} | {host_gib:,.0f} GiB | "
                  f"{dev_gib:.1f} GiB | {f['bottleneck']} | "
                  f"{float(noconv):,.0f} | {secs:.1f} s |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
