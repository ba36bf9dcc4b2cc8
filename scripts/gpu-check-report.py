#!/usr/bin/env python3
"""Summaries of scripts/gpu-check.sh's training runs (standard library only).

  gpu-check-report.py parity NAME CPU.jsonl DEV.jsonl [RTOL]
      one line: the steps compared and the max relative difference of the
      losses and of the gradient norms between the two --metrics files;
      with RTOL, "ok" or "FAILED" against it (and exit 1 when over)
  gpu-check-report.py throughput NAME PARAMS GPU_NAME BUNDLE.mtb RUN.jsonl
      one line: tokens/s, achieved TFLOPS, MFU, host->device GB/s and
      copy/compute overlap as the trainer reports them (median over the
      steps after the first, which pays for loads and kernel compiles);
      then, when gpu-stage.sh left BUNDLE.predicted, what `mtc simulate`
      predicted for this GPU's profile and measured / predicted
  gpu-check-report.py peak GPU_NAME
      the peak used for MFU
  gpu-check-report.py hostneed PARAMS BUNDLE.mtb
      the host memory (bytes) a run needs: 16 B/param (fp32 value,
      gradient, AdamW m and v; 12 without the gradient when the plan has a
      host gradient ring, --clip 0), the plan's host buffers, and an eighth more
      (at least 256 MiB) for the rest of the process (data, staging)

Achieved TFLOPS counts the model's FLOPs as MegaTrain does, 6 * params *
tokens per step (attention scores and recompute left out); `+recompute` adds
the forward pass the plan recomputes in the backward (2 * params * tokens
with recompute full), reported apart. Host->device GB/s is the step's
h2d_bytes over its step time (an average over the step, not the link rate:
docs/cuda.md). MFU is against the GPU's dense bf16 tensor peak, the target's
reference, although the runs are fp32 today (--precision bf16 is not there
yet); the fp32 peak is printed beside it.
"""
import json
import statistics
import sys

# Dense peaks in TFLOPS (NVIDIA data sheets): bf16 tensor, fp32 (non-tensor).
PEAKS = [("H200", 989, 67), ("H100 PCIe", 756, 51), ("H100", 989, 67),
         ("GH200", 989, 67), ("A100", 312, 19.5), ("L40S", 362, 91.6),
         ("RTX 4090", 165, 82.6)]


def peak(gpu):
    for name, bf16, fp32 in PEAKS:
        if name.lower() in gpu.lower():
            return name, bf16, fp32
    return None, None, None


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def parity(name, cpu_path, dev_path, rtol=None):
    cpu, dev = records(cpu_path), records(dev_path)
    if not cpu or len(cpu) != len(dev):
        print(f"{name:28s} FAILED: {len(cpu)} cpu steps, {len(dev)} device")
        return 1
    worst = {"loss": 0.0, "grad_norm": 0.0}
    for c, d in zip(cpu, dev):
        for k in worst:
            x, y = c[k], d[k]
            worst[k] = max(worst[k], abs(x - y) / max(abs(x), 1e-30))
    verdict = ""
    bad = rtol is not None and max(worst.values()) > float(rtol)
    if rtol is not None:
        verdict = f"  {'FAILED' if bad else 'ok'} (tolerance {float(rtol):.0e})"
    print(f"{name:28s} {len(cpu)} steps  loss rel diff {worst['loss']:.2e}"
          f"  grad_norm rel diff {worst['grad_norm']:.2e}{verdict}")
    return 1 if bad else 0


def throughput(name, params, gpu, bundle, path):
    with open(bundle) as f:
        step = json.load(f)["step"]
    tokens = step["batch"] * step["seq"] * step.get("micro_batches", 1)
    recompute = step.get("recompute", "full")
    recs = records(path)
    timed = recs[1:] or recs
    t = statistics.median(r["step_time_s"] for r in timed)
    h2d = statistics.median(r.get("h2d_bytes", 0) / r["step_time_s"]
                            for r in timed)
    overlap = statistics.median(r.get("overlap", 0) for r in timed)
    model = 6 * params * tokens / t / 1e12
    extra = (2 * params * tokens / t / 1e12) if recompute == "full" else 0
    pname, bf16, fp32 = peak(gpu)
    mfu = (f"MFU {100 * model / bf16:5.1f}% of bf16 {bf16} "
           f"({100 * model / fp32:.0f}% of fp32 {fp32})" if bf16 else
           "MFU n/a (peak unknown)")
    print(f"{name:22s} {tokens / t:10.0f} tok/s  {model:#7.3g} TFLOPS"
          f" (+recompute {extra:#.3g})  {mfu}  h2d {h2d / 1e9:#6.3g} GB/s"
          f"  overlap {overlap:.2f}  step {t:.3f} s")
    predicted = bundle[:-len(".mtb")] + ".predicted"
    line = prediction(predicted, gpu)
    if line:
        prof, pt, _, pmfu, bottleneck = line
        print(f"{'':22s} mtc simulate --gpu {prof}: step {float(pt):.3f} s "
              f"(MFU {100 * float(pmfu):.1f}%, bottleneck {bottleneck}); "
              f"measured / predicted {t / float(pt):.2f}")
    return 0


# The profile of mtc simulate for a GPU name (nvidia-smi's), most specific
# first; None for a GPU without one.
PROFILES = [("GH200", "gh200"), ("H200", "h200"), ("H100 PCIe", "h100-pcie"),
            ("H100", "h100-sxm")]


def prediction(path, gpu):
    """The line of gpu-stage.sh's predictions (PROFILE STEP_TIME_S
    TOKENS_PER_S MFU BOTTLENECK) for this GPU, or None."""
    prof = next((p for n, p in PROFILES if n.lower() in gpu.lower()), None)
    try:
        with open(path) as f:
            lines = [l.split() for l in f if l.strip()]
    except OSError:
        return None
    if prof is None and gpu.startswith("emulated") and lines:
        return lines[0]  # a dry run: any profile shows the line works
    return next((l for l in lines if l[0] == prof and len(l) == 5), None)


def hostneed(params, bundle):
    with open(bundle) as f:
        step = json.load(f)["step"]
    host = sum(b["bytes"] for b in step.get("buffers", [])
               if b.get("space") == "host")
    # A plan with a host gradient ring updates each layer as its gradient is
    # final (--clip 0): no model-sized gradient, 12 B/param.
    ring = any(b.get("name") == "grads.host" for b in step.get("buffers", []))
    state = (12 if ring else 16) * params + host
    print(state + max(state // 8, 256 << 20))
    return 0


def main():
    a = sys.argv[1:]
    if a[:1] == ["hostneed"] and len(a) == 3:
        return hostneed(int(a[1]), a[2])
    if a[:1] == ["parity"] and len(a) in (4, 5):
        return parity(*a[1:])
    if a[:1] == ["throughput"] and len(a) == 6:
        return throughput(a[1], int(a[2]), a[3], a[4], a[5])
    if a[:1] == ["peak"] and len(a) == 2:
        pname, bf16, fp32 = peak(a[1])
        print(f"peak ({pname}): bf16 dense {bf16} TFLOPS, fp32 {fp32} TFLOPS"
              if bf16 else f"peak: unknown GPU '{a[1]}' (MFU not computed)")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
