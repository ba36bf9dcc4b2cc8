"""Edits of a compiled bundle's step plan ("step": its program and buffers,
docs/bundle.md) and CUDA launch rules, as a person editing the JSON by hand
could make them. test/sanitize/*.test trains on the results: whatever the
runtime decides (refuse at load, or run), it must not crash, and under the
sanitizers (make check-sanitize) it must not touch memory it does not own.

usage: tamper-step.py EDIT IN.mtb OUT.mtb
Standard library only.
"""
import json
import sys


def bodies(b):
    """Every command list of the program: the top level and each loop's."""
    out = [b["step"]["program"]]
    for c in b["step"]["program"]:
        if "body" in c:
            out.append(c["body"])
    return out


def drop(b, op, nth=0, pred=lambda c: True):
    seen = 0
    for body in bodies(b):
        for i, c in enumerate(body):
            if c["op"] == op and pred(c):
                if seen == nth:
                    del body[i]
                    return
                seen += 1
    raise SystemExit("no '%s' command to drop" % op)


def first(b, op):
    for body in bodies(b):
        for c in body:
            if c["op"] == op:
                return c
    raise SystemExit("no '%s' command" % op)


def buffer(b, name):
    return next(x for x in b["step"]["buffers"] if x["name"] == name)


def every_launch(b, edit):
    """`edit` applied to every entry of every CUDA kernel's launch rule."""
    for k in b["cuda_kernels"]["kernels"]:
        for e in k["entries"]:
            edit(e)


def swap_offsets(b, x, y):
    """Buffers x and y trade places (of different sizes: one overruns)."""
    bx, by = buffer(b, x), buffer(b, y)
    bx["offset"], by["offset"] = by["offset"], bx["offset"]


EDITS = {
    # A command left out of the program.
    "no-forward-wait": lambda b: drop(b, "wait_weights"),
    "no-backward-wait": lambda b: drop(b, "wait_weights", 1),
    "no-forward-prefetch": lambda b: drop(b, "prefetch"),
    "no-optimizer": lambda b: drop(b, "optimizer_update"),
    "no-grad-return": lambda b: drop(b, "grad_return"),
    "no-save": lambda b: drop(b, "save"),
    "no-restore": lambda b: drop(b, "restore"),
    "no-backward": lambda b: drop(b, "compute", pred=lambda c: c["fn"] == "backward"),
    "no-model-load": lambda b: drop(b, "load_model_weights"),
    "no-model-return": lambda b: drop(b, "return_model_grads"),
    # Numbers changed.
    "prefetch-far-ahead": lambda b: first(b, "prefetch").update(ahead=1000),
    "layers-shifted": lambda b: first(b, "layers").update(first=1),
    "stage-past-end": lambda b: first(b, "stage").update(end=1 << 40),
    "stage-reversed": lambda b: first(b, "stage").update(begin=5, end=2),
    # Buffers moved: out of the arena, onto each other, shrunk.
    "buffer-past-peak": lambda b: buffer(b, "weights.1").update(
        offset=b["step"]["device_peak"] // 256 * 256 - 256),
    "buffer-negative": lambda b: buffer(b, "grads.0").update(offset=-4096),
    "buffers-overlap": lambda b: buffer(b, "weights.1").update(
        offset=buffer(b, "weights.0")["offset"] + 256),
    "buffers-swapped": lambda b: swap_offsets(b, "weights.0", "activations"),
    "workspace-tiny": lambda b: buffer(b, "workspace").update(bytes=64),
    "checkpoints-tiny": lambda b: buffer(b, "checkpoints").update(bytes=64),
    "peak-tiny": lambda b: b["step"].update(device_peak=1024),
    # CUDA launch rules (a bundle compiled with --device cuda or cuda-emu):
    # smaller blocks, each covering twice its elements.
    "launch-block-32": lambda b: every_launch(b, lambda e: e.update(block=32)),
    "launch-per-block-x2": lambda b: every_launch(
        b, lambda e: e.update(per_block=e["per_block"] * 2)),
}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in EDITS:
        raise SystemExit("usage: tamper-step.py {%s} IN.mtb OUT.mtb"
                         % ",".join(EDITS))
    with open(sys.argv[2]) as f:
        b = json.load(f)
    EDITS[sys.argv[1]](b)
    with open(sys.argv[3], "w") as f:
        json.dump(b, f)


if __name__ == "__main__":
    main()
