#!/usr/bin/env python3
"""Data-parallel scaling: step time of one process against two MPI ranks on
the same global batch, in one run (python3 stdlib only; needs Open MPI and a
build with libmtc-mpi.so, docs/distributed.md).

Both configurations train the same model, seed, data and global batch with
`mtc train`, each process on --threads (default 1) kernel threads: one
process, then `mpirun -np 2` (each rank half of every micro-batch's rows).
Runs alternate between them (--repeats rounds) so that load from other users
of the machine hits both; each run's first --warmup steps are dropped and the
median `step_time_s` of the rest is taken from the --metrics JSONL; the
summary is the median over runs. Scaling efficiency is

    (step time of 1 process) / (2 x step time of 2 ranks)

(1.0: two ranks halve the step time). The script also reports the
reduction time the backward did not hide (`allreduce_exposed_s`) and checks
that the two configurations' losses agree within 1e-6 relative.

Usage (from the repository root, after `make build`):
  python3 bench/dp_scaling.py
  python3 bench/dp_scaling.py --batch 16 --seq 128 --steps 8 --repeats 3
  python3 bench/dp_scaling.py --device-memory 5840960 --set n_layers=64 \
      --set dim=128 --set ffn=344       # streamed, at 1/8 of the weights
  python3 bench/dp_scaling.py --shard-optimizer off
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, ranks, metrics):
    cmd = [os.path.join(args.build, "bin", "mtc"), "train", args.model,
           "--data", args.data, "--steps", str(args.steps),
           "--batch", str(args.batch), "--seq", str(args.seq),
           "--micro-batches", str(args.micro_batches),
           "--threads", str(args.threads), "--eval-every", "0",
           "--eval-batches", "1", "--metrics", metrics]
    for s in args.set:
        cmd += ["--set", s]
    if args.device_memory:
        cmd += ["--device-memory", args.device_memory]
    if ranks > 1:
        cmd += ["--shard-optimizer", args.shard_optimizer]
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np",
               str(ranks)] + cmd
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    with open(metrics) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    os.remove(metrics)
    return recs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--model", default=os.path.join(ROOT, "examples",
                                                   "tiny-llama.mt"))
    p.add_argument("--data", default=os.path.join(ROOT, "data", "corpus.txt"))
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--micro-batches", type=int, default=1)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device-memory", default="")
    p.add_argument("--shard-optimizer", default="auto")
    args = p.parse_args()

    times = {1: [], 2: []}
    exposed = []
    losses = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for ranks in (1, 2):
                recs = run(args, ranks, os.path.join(tmp, f"m{ranks}.jsonl"))
                kept = recs[args.warmup:]
                times[ranks].append(
                    statistics.median(x["step_time_s"] for x in kept))
                if ranks == 2:
                    exposed.append(statistics.median(
                        x["allreduce_exposed_s"] for x in kept))
                losses[ranks] = [x["loss"] for x in recs]
    worst = max(abs(a - b) / abs(a) for a, b in zip(losses[1], losses[2]))
    t1, t2 = statistics.median(times[1]), statistics.median(times[2])
    tokens = args.batch * args.seq * args.micro_batches
    print(f"model {os.path.basename(args.model)} {' '.join(args.set)}; "
          f"global batch {args.micro_batches} x {args.batch} x {args.seq} = "
          f"{tokens} tokens; {args.threads} thread(s) per process; "
          f"{args.device_memory or 'resident'}; shard-optimizer "
          f"{args.shard_optimizer}; {os.cpu_count()} CPUs")
    print(f"1 process: {t1 * 1e3:.1f} ms/step ({tokens / t1:.0f} tokens/s)")
    print(f"2 ranks:   {t2 * 1e3:.1f} ms/step ({tokens / t2:.0f} tokens/s), "
          f"reduction exposed {statistics.median(exposed) * 1e3:.1f} ms/step")
    print(f"scaling efficiency {t1 / (2 * t2):.2f}; losses agree within "
          f"{worst:.1e} relative")
    return 0 if worst <= 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
