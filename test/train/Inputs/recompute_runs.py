"""What the recompute-policy scripts share: their 5-layer models, a runner of
`mtc train` that returns the metrics of every step, and the reference run.

Imported by segment-checkpoints.py and mixed-recompute.py (same directory).
Standard library only.
"""
import json
import os
import subprocess
import sys

N = 5
TINY = ["tiny-llama.mt", "--set", f"n_layers={N}", "--set", "dim=32",
        "--set", "n_heads=4", "--set", "n_kv=2", "--set", "ffn=64"]
TINY_EMU = ["tiny-llama.mt", "--set", f"n_layers={N}", "--set", "dim=128",
            "--set", "n_heads=2", "--set", "n_kv=1", "--set", "ffn=128"]
MIXTRAL = ["mixtral-small.mt", "--set", f"n_layers={N}", "--set", "dim=128",
           "--set", "n_heads=2", "--set", "n_kv=1", "--set", "ffn=64"]


class Runner:
    """`mtc train` of a model spec for 3 steps of 2 x 16 tokens, one thread."""

    def __init__(self, mtc, examples, data, work):
        self.mtc, self.examples, self.data, self.work = (mtc, examples, data,
                                                         work)

    def model(self, spec):
        return [os.path.join(self.examples, spec[0])] + spec[1:]

    def train(self, tag, spec, extra):
        metrics = os.path.join(self.work, tag + ".jsonl")
        cmd = [self.mtc, "train"] + self.model(spec) + [
            "--data", self.data, "--steps", "3", "--batch", "2", "--seq", "16",
            "--eval-every", "0", "--eval-batches", "1", "--threads", "1",
            "--metrics", metrics] + extra
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{tag}: mtc train failed:\n{r.stderr}")
            sys.exit(1)
        return [json.loads(l) for l in open(metrics)]

    def reference(self, tag, spec, device, extra):
        """The per-step (loss, grad_norm) every plan must reproduce: the plain
        executor on the CPU device, else a resident plan (1 GiB, full
        recomputation, checkpoints on the device) on that device."""
        if device == "cpu":
            recs = self.train(tag, spec, extra)
        else:
            recs = self.train(tag, spec, extra + [
                "--device", device, "--device-memory", "1GiB",
                "--recompute", "full", "--checkpoints", "device"])
        return [(r["loss"], r["grad_norm"]) for r in recs]
