"""Segment checkpointing (`--checkpoint-every K`) against its references.

usage: segment-checkpoints.py MTC EXAMPLES DATA WORKDIR

Every configuration trains 3 steps of a 5-layer model (5 is a multiple of
neither 2 nor 3, so the last segment is shorter) and must give the per-step
losses and gradient norms of its reference bit for bit: on the CPU device
the plain executor (everything resident), on cuda-emu a resident plan (1 GiB,
full recomputation, every instance checkpointed) of the same precision.
Budgets are the smallest the plan allows (`mtc plan`, min_device_memory) and
1 GiB; checkpoints on the device and in host memory (with 2 micro-batches:
host activations and the host stage). The measured device peak stays within
the budget and the weight loads per step are 2 N - max(2, K): a segment's
instances stay resident from their recomputed forward to their backward, so
segments add no load. Prints one line per configuration and a summary; exit
1 on the first difference. Standard library only.
"""
import subprocess
import sys

from recompute_runs import MIXTRAL, N, TINY, TINY_EMU, Runner


def main():
    mtc, examples, data, work = sys.argv[1:5]
    runs = 0

    runner = Runner(mtc, examples, data, work)
    model, train, reference = runner.model, runner.train, runner.reference

    def least(spec, opts):
        out = subprocess.run([mtc, "plan"] + model(spec) + [
            "--batch", "2", "--seq", "16"] + opts, check=True,
            capture_output=True, text=True).stdout
        return int(out.split("min_device_memory:")[1].split()[0])

    def check(tag, recs, want, k, budget):
        nonlocal runs
        got = [(r["loss"], r["grad_norm"]) for r in recs]
        if got != want:
            print(f"{tag}: losses and gradient norms {got} differ from the "
                  f"reference's {want}")
            sys.exit(1)
        loads = 2 * N - max(2, k)
        for r in recs:
            if r["weight_loads"] != loads:
                print(f"{tag}: {r['weight_loads']} weight loads, expected "
                      f"{loads}")
                sys.exit(1)
            if r["device_peak_bytes"] > budget:
                print(f"{tag}: peak {r['device_peak_bytes']} > {budget}")
                sys.exit(1)
        print(f"{tag}: identical, {loads} weight loads, peak "
              f"{recs[-1]['device_peak_bytes']} <= {budget}")
        runs += 1

    # (name, model, device, extra flags, [(K, checkpoints, budget)])
    matrix = [
        ("tiny-cpu", TINY, "cpu", ["--micro-batches", "2"],
         [(k, c, b) for k in (2, 3, 5) for c in ("device", "host")
          for b in ("least", "1GiB")]),
        ("tiny-cpu-mb1", TINY, "cpu", ["--micro-batches", "1"],
         [(2, "host", "least"), (3, "device", "least")]),
        ("mixtral-cpu", MIXTRAL, "cpu", ["--micro-batches", "2"],
         [(2, "host", "least"), (3, "device", "1GiB")]),
        ("tiny-emu", TINY_EMU, "cuda-emu", ["--micro-batches", "2"],
         [(2, "host", "least"), (3, "device", "1GiB")]),
        ("tiny-emu-bf16", TINY_EMU, "cuda-emu",
         ["--micro-batches", "2", "--precision", "bf16"],
         [(2, "host", "least"), (3, "device", "least")]),
        ("mixtral-emu", MIXTRAL, "cuda-emu", ["--micro-batches", "2"],
         [(2, "host", "least"), (3, "device", "1GiB")]),
    ]
    for name, spec, device, extra, configs in matrix:
        want = reference(name + "-ref", spec, device, extra)
        full = extra + ["--recompute", "full"]
        if device != "cpu":
            full += ["--device", device]
        for k, ckpt, budget in configs:
            opts = full + ["--checkpoint-every", str(k), "--checkpoints", ckpt]
            size = least(spec, opts) if budget == "least" else 1 << 30
            tag = f"{name}-k{k}-{ckpt}-{budget}"
            recs = train(tag, spec, opts + ["--device-memory", str(size)])
            check(tag, recs, want, k, size)
    print(f"{runs} configurations: losses and gradient norms identical to "
          f"the references")
    return 0


if __name__ == "__main__":
    sys.exit(main())
