"""Checks of test/tools/simulate.test on `mtc simulate` output.

  simulate.test.py SIM TOKENS PARAMS PEAK   the figures agree with each other
  simulate.test.py --trace FILE N           the timeline is a Chrome trace of
                                            N spans on the runtime's tracks
  simulate.test.py --more A B KEY           A's KEY is larger than B's
"""
import json
import sys


def fail(msg):
    print("error: " + msg)
    sys.exit(1)


if sys.argv[1] == "--more":
    # simulate.test.py --more A B KEY: A's KEY is larger than B's.
    def value(path):
        for line in open(path):
            if line.startswith(sys.argv[4] + ": "):
                return float(line.split(": ", 1)[1])
        fail("%s: no %s" % (path, sys.argv[4]))
    a, b = value(sys.argv[2]), value(sys.argv[3])
    if not a > b:
        fail("%s %g is not larger than %g" % (sys.argv[4], a, b))
    sys.exit(0)

if sys.argv[1] == "--trace":
    trace = json.load(open(sys.argv[2]))
    events = trace["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    want = {"compute", "h2d", "d2h", "optimizer", "h2d.act", "d2h.act", "host"}
    if tracks != want:
        fail("tracks %s, expected %s" % (sorted(tracks), sorted(want)))
    if len(spans) != int(sys.argv[3]):  # one per simulated command
        fail("%d spans" % len(spans))
    if any(s["cat"] not in ("compute", "copy") or s["dur"] < 0 for s in spans):
        fail("a span has a bad category or duration")
    sys.exit(0)

lines = {}
for line in open(sys.argv[1]):
    if ": " in line:
        k, v = line.rstrip("\n").split(": ", 1)
        lines[k] = v
tokens, params, peak = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
t = float(lines["step_time_s"])
tps = float(lines["tokens_per_s"])
if abs(tps - tokens / t) > 1e-3 * tps + 0.1:
    fail("tokens_per_s %g, expected %g" % (tps, tokens / t))
model = 6 * params * tokens / t
if abs(float(lines["model_tflops"]) - model / 1e12) > 0.051:
    fail("model_tflops %s, expected %g" % (lines["model_tflops"], model / 1e12))
if abs(float(lines["mfu"]) - model / peak) > 0.0006:
    fail("mfu %s, expected %g" % (lines["mfu"], model / peak))
if float(lines["compute_s"]) > t * (1 + 1e-3):
    fail("compute_s above the step time")
if float(lines["optimizer_hidden_s"]) > float(lines["optimizer_s"]) * (1 + 1e-3):
    fail("more optimizer hidden than run")
