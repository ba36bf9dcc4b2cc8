#!/usr/bin/env python3
"""The peer of mtc-bench-cuda (bench/cuda_gpu.cpp): the same copies and GEMM
shapes through PyTorch on the same GPU, so that mtc's rates are read against
what the framework gets from the hardware. Run by scripts/gpu-check.sh.

    python3 bench/torch_peer.py [--copy-mib N]
"""
import argparse
import sys

try:
    import torch
except ImportError:
    sys.exit("torch_peer.py: PyTorch is not installed here")


def timed(fn, iters, warm=2):
    for _ in range(warm):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / iters  # ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--copy-mib", type=int, default=256)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_peer.py: no CUDA device visible to PyTorch")
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    p = torch.cuda.get_device_properties(dev)
    print(f"PyTorch {torch.__version__} on {p.name}, {p.multi_processor_count} SMs")
    n = args.copy_mib << 20
    host = torch.empty(n, dtype=torch.uint8).pin_memory()
    pageable = torch.empty(n, dtype=torch.uint8)
    gpu = torch.empty(n, dtype=torch.uint8, device=dev)
    print(f"\n| copy ({args.copy_mib} MiB), PyTorch | GB/s |\n| --- | ---: |")
    for what, fn in [
        ("host->device, pinned", lambda: gpu.copy_(host, non_blocking=True)),
        ("device->host, pinned", lambda: host.copy_(gpu, non_blocking=True)),
        ("host->device, pageable", lambda: gpu.copy_(pageable)),
    ]:
        ms = timed(fn, 8)
        print(f"| {what} | {n / (ms * 1e-3) / 1e9:.1f} |")
    shapes = [
        ("square 8192", 8192, 8192, 8192),
        ("qkv/o proj fwd (x W^T)", 8192, 4096, 4096),
        ("mlp up fwd", 8192, 14336, 4096),
        ("mlp down fwd", 8192, 4096, 14336),
    ]
    print("\n| GEMM, PyTorch | m x n x k | bf16 TFLOP/s | fp32 TFLOP/s |")
    print("| --- | --- | ---: | ---: |")
    for what, m, nn, k in shapes:
        rates = []
        for dt, iters in ((torch.bfloat16, 20), (torch.float32, 5)):
            a = torch.randn(m, k, device=dev, dtype=dt)
            w = torch.randn(nn, k, device=dev, dtype=dt)
            ms = timed(lambda: a @ w.t(), iters)
            rates.append(2 * m * nn * k / (ms * 1e-3) / 1e12)
        print(f"| {what} | {m} x {nn} x {k} | {rates[0]:.1f} | {rates[1]:.1f} |")


if __name__ == "__main__":
    main()
