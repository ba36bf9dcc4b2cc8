"""Trains one small model across a matrix of device budgets x micro-batches x
recompute policies x checkpoint placements on the CPU device and checks that
the measured device peak never exceeds the budget and that every
configuration with the same micro-batches gives bit-identical per-step losses
(and the same losses as the plain executor).

usage: streaming-matrix.py MTC MODEL DATA WORKDIR [--set NAME=VALUE]...

Budgets: the smallest feasible one for each configuration (from `mtc plan`,
min_device_memory), 1.5 times that, and 1 GiB. Prints one line per
configuration and a summary; exit 1 on the first violation. Standard library
only.
"""
import json
import os
import subprocess
import sys


def main():
    mtc, model, data, work = sys.argv[1:5]
    sets = []
    rest = sys.argv[5:]
    while rest:
        if rest[0] == "--set":
            sets += ["--set", rest[1]]
            rest = rest[2:]
        else:
            print("unknown argument " + rest[0])
            return 2
    common = ["--batch", "2", "--seq", "16"]
    runs = 0
    for mb in (1, 2, 3):
        plain = os.path.join(work, f"plain-{mb}.jsonl")
        subprocess.run([mtc, "train", model, "--data", data, "--steps", "3",
                        "--micro-batches", str(mb), "--eval-every", "0",
                        "--eval-batches", "1", "--threads", "1", "--metrics",
                        plain] + common + sets, check=True,
                       stdout=subprocess.DEVNULL)
        want = [json.loads(l)["loss"] for l in open(plain)]
        for recompute in ("full", "none", "selective"):
            for ckpt in ("device", "host"):
                opts = ["--micro-batches", str(mb), "--recompute", recompute,
                        "--checkpoints", ckpt]
                out = subprocess.run(
                    [mtc, "plan", model] + common + opts + sets, check=True,
                    capture_output=True, text=True).stdout
                least = int(out.split("min_device_memory:")[1].split()[0])
                for budget in (least, least * 3 // 2, 1 << 30):
                    tag = f"mb{mb}-{recompute}-{ckpt}-{budget}"
                    metrics = os.path.join(work, tag + ".jsonl")
                    r = subprocess.run(
                        [mtc, "train", model, "--data", data, "--steps", "3",
                         "--eval-every", "0", "--eval-batches", "1",
                         "--threads", "1", "--metrics", metrics,
                         "--device-memory", str(budget)] + common + opts +
                        sets, capture_output=True, text=True)
                    if r.returncode != 0:
                        print(f"{tag}: mtc train failed:\n{r.stderr}")
                        return 1
                    recs = [json.loads(l) for l in open(metrics)]
                    for rec in recs:
                        if rec["device_peak_bytes"] > budget or \
                                rec["device_budget_bytes"] != budget:
                            print(f"{tag}: step {rec['step']}: peak "
                                  f"{rec['device_peak_bytes']} budget "
                                  f"{rec['device_budget_bytes']}")
                            return 1
                    got = [rec["loss"] for rec in recs]
                    if got != want:
                        print(f"{tag}: losses {got} differ from the plain "
                              f"executor's {want}")
                        return 1
                    print(f"{tag}: peak {recs[-1]['device_peak_bytes']} <= "
                          f"{budget}, losses identical")
                    runs += 1
    print(f"{runs} configurations: peaks within budget, losses identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
