"""Starts `mtc train ARGS...` with --metrics M, waits until M holds at least
three steps, sends SIGNAL (INT, TERM or USR1) once, and prints the exit code, the
last line of stderr and the last step in M.

usage: interrupt.py SIGNAL METRICS MTC ARGS..."""
import json
import os
import signal
import subprocess
import sys
import time

sig = getattr(signal, "SIG" + sys.argv[1])
metrics = sys.argv[2]
cmd = sys.argv[3:] + ["--metrics", metrics]
run = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)


def steps():
    if not os.path.exists(metrics):
        return []
    with open(metrics) as f:
        return [json.loads(l)["step"] for l in f if l.endswith("\n")]


deadline = time.time() + 120
while len(steps()) < 3:
    if run.poll() is not None or time.time() > deadline:
        sys.exit("the run ended or stalled: " + run.stderr.read())
    time.sleep(0.02)
run.send_signal(sig)
err = run.stderr.read()
code = run.wait()
print("exit", code)
print(err.strip().splitlines()[-1])
print("last logged step", steps()[-1])
