#!/usr/bin/env python3
"""The PyTorch peer of scripts/gpu-check.sh's throughput runs: the same Llama
(examples/tiny-llama.mt's config with --set overrides; the model of
bench/train_vs_pytorch.py, plain PyTorch, no transformers) trained in eager
mode on the GPU, every parameter and the AdamW state resident in GPU memory.

A step is as mtc's: --micro-batches micro-batches of [--batch, --seq] random
windows of data/corpus.txt's bytes (gradient accumulation), the global
gradient-norm clip at 1.0, AdamW (fused). Two precisions: fp32 (what mtc runs
on the GPU today) and bf16 autocast (fp32 master weights, bf16 matmuls: the
usual mixed-precision baseline). Prints tokens/s, achieved TFLOPS counted as
mtc's report counts them (6 * params * tokens per step) and MFU against the
GPU's dense bf16 peak (scripts/gpu-check-report.py's table); the median of
the steps after the first.

Exit status 3 (and a message) when PyTorch or a CUDA device is missing, so
that a dry run of gpu-check.sh on a machine without them goes on.

  python3 bench/gpu_peer.py --gpu-name "NVIDIA H100 80GB HBM3" \\
      --set dim=2048 ... --batch 4 --seq 1024 --micro-batches 8
"""
import argparse
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "scripts"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--micro-batches", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--gpu-name", default="")
    ap.add_argument("--model", default=os.path.join(here, "..", "examples",
                                                     "tiny-llama.mt"))
    ap.add_argument("--data", default=os.path.join(here, "..", "data",
                                                    "corpus.txt"))
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("gpu_peer: PyTorch is not installed here: no peer measured")
        return 3
    if not torch.cuda.is_available():
        print("gpu_peer: PyTorch sees no CUDA device: no peer measured")
        return 3
    from train_vs_pytorch import build_torch_model, parse_sets, read_config
    report = __import__("gpu-check-report")
    cfg = read_config(args.model, parse_sets(args.set))
    gpu = args.gpu_name or torch.cuda.get_device_name()
    _, bf16_peak, _ = report.peak(gpu)
    data = torch.frombuffer(bytearray(open(args.data, "rb").read()),
                            dtype=torch.uint8).long()
    B, S, M = args.batch, args.seq, args.micro_batches
    tokens = B * S * M
    print(f"PyTorch {torch.__version__} eager on {gpu}; [{B}, {S}] x {M} "
          f"micro-batches = {tokens} tokens per step")
    for precision in ("fp32", "bf16-autocast"):
        torch.manual_seed(1)
        model = build_torch_model(torch, cfg, S).cuda()
        params = list(model.parameters())
        n = sum(p.numel() for p in params)
        opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), eps=1e-8,
                                weight_decay=0.1, fused=True)
        g = torch.Generator().manual_seed(1)
        offs = torch.arange(S + 1)
        times = []
        for _ in range(args.steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            for _ in range(M):
                starts = torch.randint(0, len(data) - S - 1, (B, 1),
                                       generator=g)
                win = data[starts + offs].cuda(non_blocking=True)
                with torch.autocast("cuda", dtype=torch.bfloat16,
                                    enabled=precision != "fp32"):
                    loss = model(win[:, :-1], win[:, 1:]) / M
                loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        t = statistics.median(times[1:] or times)
        tflops = 6 * n * tokens / t / 1e12
        mfu = f"MFU {100 * tflops / bf16_peak:5.1f}% of bf16 {bf16_peak}" \
            if bf16_peak else "MFU n/a"
        peak_mem = torch.cuda.max_memory_allocated() / 2**30
        print(f"torch {precision:14s} {n:,} params  {tokens / t:10.0f} tok/s"
              f"  {tflops:7.2f} TFLOPS  {mfu}  step {t:.3f} s"
              f"  peak GPU memory {peak_mem:.1f} GiB")
        del model, opt, params
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return 0


if __name__ == "__main__":
    sys.exit(main())
