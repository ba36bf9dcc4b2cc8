"""Mixed recomputation (`--selective-layers S`) against its references.

usage: mixed-recompute.py MTC EXAMPLES DATA WORKDIR

Every configuration trains 3 steps of a 5-layer model whose first S layer
instances keep their selective checkpoints (matmul and attention results)
and whose other instances keep their input alone and recompute their whole
forward (the layer's backward_full). Losses and gradient norms must equal
the reference's bit for bit: on the CPU device the plain executor
(everything resident), on cuda-emu a resident plan (1 GiB, full
recomputation, checkpoints on the device) of the same precision. Budgets are
the smallest the plan allows (`mtc plan`, min_device_memory) and 1 GiB;
checkpoints on the device and in host memory (with 2 micro-batches: host
activations and the host stage). The measured device peak stays within the
budget, the weight loads per step are 2 N - 2, and the host bytes of a run
with host checkpoints lie strictly between the pure full and the pure
selective plans' (0 < S < N). Prints one line per configuration and a
summary; exit 1 on the first difference. Standard library only.
"""
import subprocess
import sys

from recompute_runs import MIXTRAL, N, TINY, TINY_EMU, Runner


def main():
    mtc, examples, data, work = sys.argv[1:5]
    runs = 0

    runner = Runner(mtc, examples, data, work)
    model, train, reference = runner.model, runner.train, runner.reference

    def plan(spec, opts, field):
        out = subprocess.run([mtc, "plan"] + model(spec) + [
            "--batch", "2", "--seq", "16"] + opts, check=True,
            capture_output=True, text=True).stdout
        return int(out.split(field + ":")[1].split()[0])

    # (name, model, device, extra flags, [(S, checkpoints, budget)])
    matrix = [
        ("tiny-cpu", TINY, "cpu", ["--micro-batches", "2"],
         [(2, "host", "least"), (2, "device", "1GiB"), (0, "host", "1GiB"),
          (4, "device", "least"), (N, "host", "least")]),
        ("tiny-cpu-mb1", TINY, "cpu", ["--micro-batches", "1"],
         [(3, "host", "least"), (1, "device", "least")]),
        ("mixtral-cpu", MIXTRAL, "cpu", ["--micro-batches", "2"],
         [(2, "host", "least"), (3, "device", "1GiB")]),
        ("tiny-emu", TINY_EMU, "cuda-emu", ["--micro-batches", "2"],
         [(2, "host", "least"), (3, "device", "1GiB")]),
        ("tiny-emu-bf16", TINY_EMU, "cuda-emu",
         ["--micro-batches", "2", "--precision", "bf16"],
         [(2, "host", "least"), (3, "device", "least"), (N, "host", "1GiB")]),
        ("mixtral-emu", MIXTRAL, "cuda-emu", ["--micro-batches", "2"],
         [(2, "host", "least")]),
    ]
    for name, spec, device, extra, configs in matrix:
        want = reference(name + "-ref", spec, device, extra)
        base = extra + (["--device", device] if device != "cpu" else [])
        for s, ckpt, budget in configs:
            opts = base + ["--selective-layers", str(s), "--checkpoints",
                           ckpt]
            size = (plan(spec, opts, "min_device_memory")
                    if budget == "least" else 1 << 30)
            tag = f"{name}-s{s}-{ckpt}-{budget}"
            recs = train(tag, spec, opts + ["--device-memory", str(size)])
            got = [(r["loss"], r["grad_norm"]) for r in recs]
            if got != want:
                print(f"{tag}: losses and gradient norms {got} differ from "
                      f"the reference's {want}")
                sys.exit(1)
            for r in recs:
                if r["weight_loads"] != 2 * N - 2:
                    print(f"{tag}: {r['weight_loads']} weight loads, "
                          f"expected {2 * N - 2}")
                    sys.exit(1)
                if r["device_peak_bytes"] > size:
                    print(f"{tag}: peak {r['device_peak_bytes']} > {size}")
                    sys.exit(1)
            note = ""
            if ckpt == "host" and 0 < s < N:
                pure = base + ["--checkpoints", "host", "--device-memory",
                               str(size)]
                lo = plan(spec, pure + ["--recompute", "full"],
                          "host_memory_bytes")
                hi = plan(spec, pure + ["--recompute", "selective"],
                          "host_memory_bytes")
                mid = plan(spec, opts + ["--device-memory", str(size)],
                           "host_memory_bytes")
                if not lo < mid < hi:
                    print(f"{tag}: host memory {mid} is not strictly between "
                          f"full's {lo} and selective's {hi}")
                    sys.exit(1)
                note = f", host memory {lo} < {mid} < {hi}"
            print(f"{tag}: identical, {2 * N - 2} weight loads, peak "
                  f"{recs[-1]['device_peak_bytes']} <= {size}{note}")
            runs += 1
    print(f"{runs} configurations: losses and gradient norms identical to "
          f"the references")
    return 0


if __name__ == "__main__":
    sys.exit(main())
