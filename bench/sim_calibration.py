#!/usr/bin/env python3
"""sim_calibration.py - `mtc simulate` predictions against measured CPU-device steps.

For each configuration of a matrix of CPU-device training runs (examples with
different layer counts, device budgets from everything-on-the-device to the
smallest plans, 1 to 8 micro-batches, every recompute policy, host
checkpoints, both optimizer placements), this script

  1. runs `mtc train ... --metrics FILE` for a few steps and takes the median
     `step_time_s` of the steady steps (the first --skip steps are left out:
     the first step has no deferred AdamW to run, and caches are cold),
     --repeat times, keeping the median of the medians;
  2. runs `mtc simulate ... --gpu PROFILE` with the same model and plan flags
     and reads its `step_time_s:` line;
  3. prints predicted, measured and the error, then the median absolute error
     and how many configurations are within --target (15 %).

The profile comes from `mtc simulate --calibrate` (run first with
--calibrate, or given with --profile). The machine's load average is printed
before and after: timings on a shared machine are noisy; run it when the
machine is quiet, and compare --repeat runs.

  python3 bench/sim_calibration.py --calibrate            # measure, then compare
  python3 bench/sim_calibration.py --profile cpu-device.json --repeat 3
  python3 bench/sim_calibration.py --only tl-L4-none,gpt2-L4-mb4 --markdown

Exit status: 0 when every configuration is within --target, 1 otherwise
(2 on a failed command).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from machine_idle import wait_quiet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name, model, --set overrides, batch, seq, micro-batches, device memory,
# extra plan flags (shared by train and simulate).
CONFIGS = [
    # tiny-llama (Llama: RMSNorm, RoPE, GQA, SwiGLU), 4 layers
    ("tl-L4-none", "tiny-llama", [], 4, 64, 1, "256MiB",
     ["--recompute", "none"]),
    ("tl-L4-full-min", "tiny-llama", [], 4, 64, 1, "23MiB",
     ["--recompute", "full"]),
    ("tl-L8-mb2-selective", "tiny-llama", ["n_layers=8"], 4, 64, 2, "64MiB",
     ["--recompute", "selective"]),
    ("tl-L2-b8s128", "tiny-llama", ["n_layers=2"], 8, 128, 1, "512MiB",
     ["--recompute", "none"]),
    ("tl-L12-mb4-host", "tiny-llama", ["n_layers=12"], 2, 64, 4, "19MiB",
     ["--recompute", "full", "--checkpoints", "host"]),
    ("tl-L4-mb8", "tiny-llama", [], 1, 64, 8, "64MiB",
     ["--recompute", "full"]),
    ("tl-L4-mb2-clip0", "tiny-llama", [], 4, 64, 2, "64MiB",
     ["--recompute", "full", "--clip", "0"]),
    # gpt2-small (LayerNorm, GELU, biases, learned positions, tied head)
    ("gpt2-L4-mb4", "gpt2-small", [], 4, 128, 4, "128MiB",
     ["--recompute", "none"]),
    ("gpt2-L8-full-min", "gpt2-small", ["n_layers=8"], 8, 64, 1, "15MiB",
     ["--recompute", "full"]),
    # qwen2-small (wide MLP), gemma2-small (softcaps, window), mixtral (MoE)
    ("qwen2-L4-mb2", "qwen2-small", [], 2, 128, 2, "256MiB",
     ["--recompute", "selective"]),
    ("gemma2-L4", "gemma2-small", [], 4, 64, 1, "128MiB",
     ["--recompute", "full"]),
    ("mixtral-L2", "mixtral-small", ["n_layers=2"], 2, 64, 1, "128MiB",
     ["--recompute", "full"]),
]


def load_average():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


NICE = 0


def run(cmd, timeout):
    """Runs cmd (at --nice); returns stdout, raising RuntimeError with its
    output."""
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout,
                       preexec_fn=(lambda: os.nice(NICE)) if NICE else None)
    if p.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s%s" % (
            p.returncode, " ".join(cmd), p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


def plan_flags(cfg):
    name, model, sets, batch, seq, mb, budget, extra = cfg
    flags = ["examples/%s.mt" % model, "--batch", str(batch), "--seq",
             str(seq), "--micro-batches", str(mb), "--device-memory", budget]
    for s in sets:
        flags += ["--set", s]
    return flags + extra


def measure(args, cfg):
    """The best (or median) steady step time of one `mtc train` run, and
    the steps'."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [args.mtc, "train"] + plan_flags(cfg) + [
            "--data", args.data, "--steps", str(args.steps),
            "--eval-every", "0", "--eval-batches", "1", "--metrics", metrics]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        run(cmd, timeout=args.timeout)
        times = []
        with open(metrics) as f:
            for line in f:
                rec = json.loads(line)
                if rec["step"] > args.skip:
                    times.append(rec["step_time_s"])
    if not times:
        raise RuntimeError("%s: no steady steps (--steps %d, --skip %d)" %
                           (cfg[0], args.steps, args.skip))
    return (min(times) if args.statistic == "best" else
            statistics.median(times)), times


STEP_TIME = re.compile(r"^step_time_s:\s*([0-9.eE+-]+)", re.M)
BOTTLENECK = re.compile(r"^bottleneck:\s*(\S+)", re.M)


def predict(args, cfg, profile):
    cmd = [args.mtc, "simulate"] + plan_flags(cfg) + [
        "--gpu", profile, "--precision", "fp32"]
    out = run(cmd, timeout=args.timeout)
    m = STEP_TIME.search(out)
    if not m:
        raise RuntimeError("no step_time_s line in:\n" + out)
    b = BOTTLENECK.search(out)
    return float(m.group(1)), (b.group(1) if b else "?")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mtc", default=os.path.join(ROOT, "build", "bin", "mtc"))
    ap.add_argument("--profile", default=None,
                    help="profile JSON (default: cpu-device.json in a "
                         "temporary directory, written by --calibrate)")
    ap.add_argument("--calibrate", action="store_true",
                    help="run mtc simulate --calibrate first")
    ap.add_argument("--recalibrate", action="store_true",
                    help="calibrate again right before each round and "
                         "predict it from that profile (a shared machine's "
                         "speed drifts within minutes)")
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "corpus.txt"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--skip", type=int, default=2,
                    help="leading steps left out of the median")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds per configuration (each: a calibration "
                         "with --recalibrate, a training run, a "
                         "prediction); the round with the median error is "
                         "reported")
    ap.add_argument("--statistic", choices=["best", "median"], default="best",
                    help="the steady steps' figure compared (and the "
                         "calibration's): best, the quietest step on a "
                         "shared machine, or median")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--only", default="",
                    help="comma-separated configuration names")
    ap.add_argument("--target", type=float, default=15.0,
                    help="error bound in percent")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="SECONDS",
                    help="before every round, wait up to SECONDS until the "
                         "machine was >= 90%% idle over 2 s")
    ap.add_argument("--nice", type=int, default=0,
                    help="run every mtc command at this niceness (a negative "
                         "one, as root, keeps other work on a shared machine "
                         "from taking the cores mid-measurement)")
    ap.add_argument("--json", default="", help="write the results here")
    ap.add_argument("--markdown", action="store_true",
                    help="print the table as Markdown (docs/benchmarks.md)")
    ap.add_argument("--list", action="store_true",
                    help="list the configurations and exit")
    args = ap.parse_args()
    global NICE
    NICE = args.nice

    configs = CONFIGS
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {c[0] for c in CONFIGS}
        if unknown:
            ap.error("unknown configuration(s): %s (known: %s)" % (
                ", ".join(sorted(unknown)), ", ".join(c[0] for c in CONFIGS)))
        configs = [c for c in CONFIGS if c[0] in wanted]
    if args.list:
        for c in configs:
            print("%-22s %s" % (c[0], " ".join(plan_flags(c))))
        return 0

    tmpdir = tempfile.mkdtemp(prefix="mtc-sim-calib-")
    if args.profile is None:
        args.profile = os.path.join(tmpdir, "cpu-device.json")
    load0 = load_average()
    started = time.time()
    try:
        def calibrate(path, repeats=None):
            cmd = [args.mtc, "simulate", "--calibrate", "-o", path,
                   "--statistic", args.statistic]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            if repeats:
                cmd += ["--repeats", str(repeats)]
            return run(cmd, timeout=args.timeout)

        if args.calibrate:
            out = calibrate(args.profile)
            print("".join(l + "\n" for l in out.splitlines()
                          if not l.startswith("  ")), end="")
        if not os.path.exists(args.profile) and not args.recalibrate:
            ap.error("no profile '%s' (give --profile or --calibrate)" %
                     args.profile)
        results = []
        for cfg in configs:
            rounds = []
            for _ in range(args.repeat):
                if args.wait_quiet > 0:
                    idle = wait_quiet(args.wait_quiet)
                    if idle is not None and idle < 0.9:
                        print("  (machine still busy before %s: %.0f %% "
                              "idle)" % (cfg[0], 100 * idle), flush=True)
                profile = args.profile
                if args.recalibrate:
                    profile = os.path.join(tmpdir, cfg[0] + ".json")
                    # The best of 21 short batches needs them all; a median
                    # of 3 long ones is enough for a paired round.
                    calibrate(profile, repeats=3 if args.statistic == "median"
                              else None)
                measured, times = measure(args, cfg)
                predicted, bottleneck = predict(args, cfg, profile)
                rounds.append({"predicted_s": predicted,
                               "measured_s": measured,
                               "median_step_s": statistics.median(times),
                               "error_pct": 100.0 * (predicted - measured) /
                               measured,
                               "median_error_pct": 100.0 * (
                                   predicted - statistics.median(times)) /
                               statistics.median(times),
                               "step_spread_pct": 100.0 * (max(times) -
                                                           min(times)) /
                               measured,
                               "bottleneck": bottleneck})
            # The round with the median error (each round pairs a
            # prediction with a measurement taken right after it).
            rounds.sort(key=lambda x: x["error_pct"])
            mid = rounds[(len(rounds) - 1) // 2]
            r = dict(mid)
            r.update({"name": cfg[0], "flags": " ".join(plan_flags(cfg)),
                      "tokens": cfg[3] * cfg[4] * cfg[5],
                      "round_errors_pct": [x["error_pct"] for x in rounds]})
            results.append(r)
            print("%-22s predicted %8.4f s  measured %8.4f s  error %+6.1f %%"
                  "  (median step %.4f s, steps spread %.0f %%%s)" % (
                      cfg[0], r["predicted_s"], r["measured_s"],
                      r["error_pct"], r["median_step_s"],
                      r["step_spread_pct"],
                      "; rounds " + " ".join("%+.0f" % e for e in
                                             r["round_errors_pct"])
                      if len(rounds) > 1 else ""),
                  flush=True)
    except RuntimeError as e:
        print("sim_calibration: " + str(e), file=sys.stderr)
        return 2
    load1 = load_average()
    errs = [abs(r["error_pct"]) for r in results]
    within = sum(1 for e in errs if e <= args.target)
    print()
    if args.markdown:
        print("| configuration | tokens/step | predicted s | measured s (%s) "
              "| error | median step s | error vs median | bottleneck |" %
              args.statistic)
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for r in results:
            print("| `%s` | %d | %.4f | %.4f | %+.1f %% | %.4f | %+.1f %% | "
                  "%s |" % (r["name"], r["tokens"], r["predicted_s"],
                            r["measured_s"], r["error_pct"],
                            r["median_step_s"], r["median_error_pct"],
                            r["bottleneck"]))
    else:
        print("%-22s %7s %11s %11s %8s %11s  %s" % (
            "configuration", "tokens", "predicted", "measured", "error",
            "median", "bottleneck"))
        for r in results:
            print("%-22s %7d %10.4fs %10.4fs %+7.1f%% %10.4fs  %s" % (
                r["name"], r["tokens"], r["predicted_s"], r["measured_s"],
                r["error_pct"], r["median_step_s"], r["bottleneck"]))
    print("\nmedian |error|: %.1f %%, max |error|: %.1f %%, within %.0f %%: "
          "%d of %d" % (statistics.median(errs), max(errs), args.target,
                        within, len(results)))
    print("load average: %.1f before, %.1f after; %.0f s; profile %s" % (
        load0, load1, time.time() - started, args.profile))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "median_abs_error_pct":
                       statistics.median(errs), "max_abs_error_pct": max(errs),
                       "within": within, "target_pct": args.target,
                       "load_before": load0, "load_after": load1,
                       "profile": args.profile, "steps": args.steps,
                       "skip": args.skip, "repeat": args.repeat,
                       "statistic": args.statistic, "nice": args.nice}, f,
                      indent=2)
    return 0 if within == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
