#!/usr/bin/env python3
"""Training throughput: `mtc train` against PyTorch eager (CPU, fp32).

Both sides train examples/tiny-llama.mt (its config block, plus any --set
overrides, which are passed to `mtc train --set` as well) on the byte tokens of
data/corpus.txt (random windows from the first 90 %, as mtc's sampler does),
with the same batch, sequence length, thread count (torch.set_num_threads(T)
and `--threads T`) and optimizer: AdamW lr 1e-3 (warmup 20, cosine to 0.1x),
betas 0.9/0.95, eps 1e-8, weight decay 0.1 on tensors of rank >= 2 only,
global gradient-norm clipping at 1.0.

A step is timed the same way on both sides: data sampling, zero grads,
forward, backward, gradient norm and clipping, AdamW. mtc's own per-step
`step_time_s` is read from its --metrics JSONL. The first --warmup steps of
every run are dropped; each run gives a median step time; --repeats runs per
side alternate (torch, mtc, torch, mtc, ...) so that load from other users of
the machine hits both; the summary is the median over the runs, and the ratio
is median(torch step time) / median(mtc step time), i.e. mtc tokens/s divided
by PyTorch tokens/s (> 1: mtc is faster). The best run of each side and the
per-run ratios are printed too: on a shared 2-core machine a run that
coincides with someone else's job can be several times slower (OpenMP's
spinning barriers suffer most when a core is taken away).

The PyTorch model follows test/fixtures/gen_parity.py (the parity fixtures'
reference), written for speed rather than float64 exactness: F.rms_norm,
rotate-half RoPE with precomputed tables, F.scaled_dot_product_attention
(causal, enable_gqa), F.silu, F.cross_entropy; matrices are [K, N] and used as
x @ W, like mtc's parameters.

Usage (from the repository root):
  /tmp/parity-venv/bin/python bench/train_vs_pytorch.py --threads 2
  /tmp/parity-venv/bin/python bench/train_vs_pytorch.py --threads 1 --repeats 3
  /tmp/parity-venv/bin/python bench/train_vs_pytorch.py --set dim=512 --set ffn=1376
  /tmp/parity-venv/bin/python bench/train_vs_pytorch.py --compile   # + torch.compile
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

from machine_idle import wait_quiet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- the model's config, read from the .mt source ----------------------------


def read_config(path, overrides):
    """The `config { name = expr ... }` block of a .mt model, evaluated in
    order (expressions may use earlier names), with --set overrides applied
    where the name is defined (so derived entries such as head_dim follow)."""
    src = open(path).read()
    m = re.search(r"config\s*\{(.*?)\}", src, re.S)
    if not m:
        sys.exit(f"no config block in {path}")
    cfg = {}
    for line in m.group(1).splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        name, expr = (s.strip() for s in line.split("=", 1))
        if name in overrides:
            cfg[name] = overrides[name]
        else:
            # .mt integer division of integers stays an integer.
            val = eval(expr.replace("/", "//") if "." not in expr else expr,
                       {"__builtins__": {}}, dict(cfg))
            cfg[name] = val
    for k in overrides:
        if k not in cfg:
            sys.exit(f"unknown --set name '{k}'")
    return cfg


def parse_sets(sets):
    out = {}
    for s in sets:
        k, v = s.split("=", 1)
        out[k.strip()] = float(v) if ("." in v or "e" in v.lower()) else int(v)
    return out


# --- PyTorch side -------------------------------------------------------------


def build_torch_model(torch, cfg, seq):
    nn, F = torch.nn, torch.nn.functional
    d, V, L = cfg["dim"], cfg["vocab"], cfg["n_layers"]
    Hq, Hkv, hd, ffn = cfg["n_heads"], cfg["n_kv"], cfg["head_dim"], cfg["ffn"]
    eps, theta = float(cfg["eps"]), float(cfg["theta"])
    std, sstd = 0.02, 0.02 / math.sqrt(2 * L)  # normal / scaled_normal

    def P(*shape, s=None, ones=False):
        t = torch.ones(shape) if ones else torch.randn(shape) * s
        return nn.Parameter(t)

    half = hd // 2
    inv = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / hd)
    ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cos(ang).float()[None, :, None, :]  # [1, S, 1, half]
    sin = torch.sin(ang).float()[None, :, None, :]

    def rope(x):  # [B, S, H, hd], rotate-half
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm = P(d, ones=True)
            self.wq = P(d, Hq * hd, s=std)
            self.wk = P(d, Hkv * hd, s=std)
            self.wv = P(d, Hkv * hd, s=std)
            self.wo = P(Hq * hd, d, s=sstd)
            self.mlp_norm = P(d, ones=True)
            self.w_gate = P(d, ffn, s=std)
            self.w_up = P(d, ffn, s=std)
            self.w_down = P(ffn, d, s=sstd)

        def forward(self, x):
            B, S, _ = x.shape
            h = F.rms_norm(x, (d,), self.attn_norm, eps)
            q = rope((h @ self.wq).view(B, S, Hq, hd)).transpose(1, 2)
            k = rope((h @ self.wk).view(B, S, Hkv, hd)).transpose(1, 2)
            v = (h @ self.wv).view(B, S, Hkv, hd).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(B, S, Hq * hd) @ self.wo
            m = F.rms_norm(x, (d,), self.mlp_norm, eps)
            return x + (F.silu(m @ self.w_gate) * (m @ self.w_up)) @ self.w_down

    class TinyLlama(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = P(V, d, s=std)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.final_norm = P(d, ones=True)
            self.lm_head = P(d, V, s=std)

        def forward(self, tokens, targets):
            x = F.embedding(tokens, self.tok_emb)
            for b in self.blocks:
                x = b(x)
            x = F.rms_norm(x, (d,), self.final_norm, eps)
            logits = x @ self.lm_head
            return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1),
                                   ignore_index=-1)

    return TinyLlama()


def lr_at(step, total, lr, warmup, min_ratio):
    """mtc's schedule (runtime/train/Schedule): linear warmup, cosine decay."""
    if step <= warmup:
        return lr * step / warmup
    if total <= warmup:
        return lr
    p = (step - warmup) / (total - warmup)
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p)))


def run_torch(torch, cfg, tokens, args, compiled):
    torch.manual_seed(args.seed)
    model = build_torch_model(torch, cfg, args.seq)
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    kw = {}
    if args.torch_adamw == "foreach":
        kw["foreach"] = True
    elif args.torch_adamw == "fused":
        kw["fused"] = True
    elif args.torch_adamw == "loop":
        kw["foreach"] = False
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **kw)
    fwd = model
    if compiled:
        fwd = torch.compile(model)
    n_train = int(len(tokens) * 0.9)
    g = torch.Generator().manual_seed(args.seed)
    B, S = args.batch, args.seq
    offs = torch.arange(S + 1)
    times, losses = [], []
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        starts = torch.randint(0, n_train - S - 1, (B, 1), generator=g)
        win = tokens[starts + offs]  # [B, S+1]
        x, y = win[:, :-1], win[:, 1:]
        opt.zero_grad(set_to_none=True)
        loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, args.clip)
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step, args.steps, args.lr, args.warmup, 0.1)
        opt.step()
        lv = loss.item()
        times.append(time.perf_counter() - t0)
        losses.append(lv)
    return times, losses


# --- mtc side -----------------------------------------------------------------


def run_mtc(args, sets, extra=(), binary=None):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [binary or args.mtc, "train", args.model, "--data", args.data,
               "--steps", str(args.steps), "--batch", str(args.batch),
               "--seq", str(args.seq), "--threads", str(args.threads),
               "--lr", str(args.lr), "--warmup", str(args.warmup),
               "--weight-decay", str(args.weight_decay),
               "--clip", str(args.clip), "--seed", str(args.seed),
               "--eval-every", "0", "--eval-batches", "1",
               "--metrics", metrics]
        for s in sets:
            cmd += ["--set", s]
        for a in list(args.mtc_arg) + list(extra):
            cmd += a.split()
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"mtc failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
        recs = [json.loads(l) for l in open(metrics) if l.strip()]
    return [x["step_time_s"] for x in recs], [x["loss"] for x in recs], cmd


# --- waiting for a quiet machine ---------------------------------------------


# --- reporting ----------------------------------------------------------------


def mtc_version(mtc):
    info = {}
    try:
        info["commit"] = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
            text=True, check=True).stdout.strip()
        info["subject"] = subprocess.run(
            ["git", "-C", ROOT, "log", "-1", "--format=%s"],
            capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True).stdout.split("\n")
        info["modified_files"] = [l[3:] for l in dirty if l.strip()]
    except Exception as e:  # not a checkout
        info["commit"] = f"unknown ({e})"
    try:
        ct = int(subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%ct"],
                                capture_output=True, text=True).stdout.strip())
    except ValueError:
        ct = None
    st = os.stat(mtc)
    info["binary_older_than_commit"] = ct is not None and st.st_mtime < ct
    info["binary"] = os.path.abspath(mtc)
    info["binary_mtime"] = datetime.datetime.fromtimestamp(
        st.st_mtime).isoformat(timespec="seconds")
    return info


def cpu_model():
    try:
        for l in open("/proc/cpuinfo"):
            if l.startswith("model name"):
                return l.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs per side, alternating (default 3)")
    ap.add_argument("--warmup-steps", type=int, default=3,
                    help="steps dropped from the timing of every run")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="config override, for both sides (e.g. dim=512)")
    ap.add_argument("--compile", action="store_true",
                    help="also time torch.compile(model) (inductor, CPU)")
    ap.add_argument("--torch-adamw", choices=["default", "loop", "foreach", "fused"],
                    default="default",
                    help="torch.optim.AdamW implementation (default: torch's "
                         "own choice, the per-tensor loop on CPU)")
    ap.add_argument("--mtc-arg", action="append", default=[], metavar="ARGS",
                    help="extra `mtc train` arguments, split at spaces "
                         "(e.g. --mtc-arg='--recompute none')")
    ap.add_argument("--mtc-variant", action="append", default=[],
                    metavar="LABEL=ARGS",
                    help="also time `mtc train ARGS` as variant 'mtc LABEL', "
                         "in the same alternation (e.g. "
                         "--mtc-variant='none=--recompute none')")
    ap.add_argument("--mtc-baseline", metavar="PATH",
                    help="also time this mtc binary (e.g. a build of an older "
                         "commit) as variant 'mtc baseline', in the same "
                         "alternation")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="SECONDS",
                    help="before every run, wait up to SECONDS until the "
                         "machine was >= 90%% idle over 2 s (a shared machine: "
                         "other users' jobs distort single runs)")
    ap.add_argument("--no-mtc", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=20, help="LR warmup steps")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default=os.path.join(ROOT, "examples/tiny-llama.mt"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data/corpus.txt"))
    ap.add_argument("--mtc", default=os.path.join(ROOT, "build/bin/mtc"))
    ap.add_argument("--json", help="write the results here as JSON")
    args = ap.parse_args()
    if args.steps <= args.warmup_steps:
        sys.exit("--steps must exceed --warmup-steps")

    # Thread counts must be fixed before torch starts its pools.
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = str(args.threads)
    import torch
    torch.set_num_threads(args.threads)

    sets = parse_sets(args.set)
    cfg = read_config(args.model, sets)
    tokens = torch.frombuffer(bytearray(open(args.data, "rb").read()),
                              dtype=torch.uint8).long()
    with torch.no_grad():
        nparams = sum(p.numel() for p in build_torch_model(torch, cfg, args.seq).parameters())

    ver = mtc_version(args.mtc)
    print(f"torch {torch.__version__} (eager, CPU, fp32; "
          f"{torch.get_num_threads()} threads; parallel backend "
          f"{torch.__config__.parallel_info().splitlines()[-1].split(':')[-1].strip()})")
    print(f"mtc commit {ver['commit']} ({ver.get('subject', '')}) "
          f"[HEAD of {ROOT} now]")
    if ver.get("modified_files"):
        print(f"  working tree differs from that commit in: "
              f"{', '.join(ver['modified_files'])}")
    print(f"  binary {ver['binary']}, built {ver['binary_mtime']}")
    if args.mtc_baseline:
        bver = mtc_version(args.mtc_baseline)
        print(f"  baseline binary {bver['binary']}, built {bver['binary_mtime']}")
    if ver.get("binary_older_than_commit"):
        print("  WARNING: the binary is older than that commit: it was built "
              "from an earlier tree (rebuild, or quote the commit it was built at)")
    print(f"cpu {cpu_model()}, {os.cpu_count()} logical cpus")
    print(f"model {os.path.relpath(args.model, ROOT)} {cfg}, {nparams:,} parameters")
    print(f"batch {args.batch} x seq {args.seq} = {args.batch * args.seq} tokens/step, "
          f"{args.steps} steps/run ({args.warmup_steps} warm-up steps dropped), "
          f"{args.repeats} runs per side, threads {args.threads}")

    tok_per_step = args.batch * args.seq
    variants = []
    if not args.no_torch:
        variants.append("torch")
        if args.compile:
            variants.append("torch.compile")
    extra_args = {}
    if not args.no_mtc:
        if args.mtc_baseline:
            variants.append("mtc baseline")
        variants.append("mtc")
        for spec in args.mtc_variant:
            label, _, extra = spec.partition("=")
            variants.append(f"mtc {label}")
            extra_args[f"mtc {label}"] = [extra]
    runs = {v: [] for v in variants}
    failed = {}
    final_loss = {}
    for r in range(args.repeats):
        for v in variants:
            if v in failed:
                continue
            if args.wait_quiet > 0:
                idle = wait_quiet(args.wait_quiet)
                if idle is not None and idle < 0.9:
                    print(f"  (machine still busy before this run: "
                          f"{idle:.0%} idle)")
            try:
                if v.startswith("mtc"):
                    times, losses, cmd = run_mtc(
                        args, args.set, extra_args.get(v, ()),
                        args.mtc_baseline if v == "mtc baseline" else None)
                else:
                    times, losses = run_torch(torch, cfg, tokens, args,
                                              v == "torch.compile")
            except Exception as e:  # torch.compile on an unsupported box
                if v != "torch.compile":
                    raise
                failed[v] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
                print(f"  {v}: FAILED: {failed[v]}")
                continue
            med = statistics.median(times[args.warmup_steps:])
            runs[v].append(med)
            final_loss[v] = losses[-1]
            print(f"  run {r + 1} {v:14s} median step {med * 1e3:8.1f} ms  "
                  f"{tok_per_step / med:8.0f} tok/s  (loss {losses[0]:.3f} -> "
                  f"{losses[-1]:.3f})", flush=True)

    print()
    print(f"{'':16s} {'step ms':>9s} {'tok/s':>8s} {'best tok/s':>10s}   runs (ms)")
    summary = {}
    for v in variants:
        if not runs[v]:
            continue
        med = statistics.median(runs[v])
        best = min(runs[v])
        summary[v] = {"median_step_s": med, "tokens_per_s": tok_per_step / med,
                      "best_step_s": best, "best_tokens_per_s": tok_per_step / best,
                      "runs_step_s": runs[v], "final_loss": final_loss[v]}
        print(f"{v:16s} {med * 1e3:9.1f} {tok_per_step / med:8.0f} "
              f"{tok_per_step / best:10.0f}   "
              + " ".join(f"{x * 1e3:.1f}" for x in runs[v]))
    ratios = {}
    for mv in [v for v in variants if v.startswith("mtc") and v in summary]:
        for v in ("torch", "torch.compile"):
            if v in summary:
                ratio = summary[v]["median_step_s"] / summary[mv]["median_step_s"]
                ratios[f"{mv}/{v}"] = ratio
                # Per-run ratios (run i of each side ran back to back).
                pr = [t / m for t, m in zip(runs[v], runs[mv])]
                ratios[f"{mv}/{v} per run"] = pr
                print(f"ratio {mv}/{v} (tokens/s): {ratio:.2f}x   "
                      f"(best/best {min(runs[v]) / min(runs[mv]):.2f}x; per run "
                      + " ".join(f"{x:.2f}" for x in pr) + ")")
    for v, why in failed.items():
        print(f"{v}: did not run: {why}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "mtc": ver, "cpu": cpu_model(),
                       "config": cfg, "parameters": nparams,
                       "args": vars(args), "results": summary, "ratios": ratios,
                       "failed": failed}, f, indent=1)


if __name__ == "__main__":
    main()
