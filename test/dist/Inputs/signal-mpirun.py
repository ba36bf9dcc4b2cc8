"""Sends a signal to mpirun while a data-parallel run trains, as a user (or a
batch system) stopping the job would, and reports how the job ended.

usage: signal-mpirun.py SIGNAL CHECKPOINT_DIR MPIRUN [ARG...]

Waits until the run has saved a checkpoint (--save-every 1), sends SIGNAL to
mpirun, waits for it, and prints "exit: N", the lines the ranks printed
(progress lines dropped) and the step of the checkpoint left in
CHECKPOINT_DIR. Gives up after 120 s.
"""
import json
import os
import signal
import subprocess
import sys
import time

sig = getattr(signal, sys.argv[1])
ckpt = sys.argv[2]
p = subprocess.Popen(sys.argv[3:], stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT)
state = os.path.join(ckpt, "trainer_state.json")
deadline = time.time() + 120
while not os.path.exists(state) and p.poll() is None:
    if time.time() > deadline:
        p.kill()
        raise SystemExit("no checkpoint after 120 s")
    time.sleep(0.05)
p.send_signal(sig)
try:
    out, _ = p.communicate(timeout=120)
except subprocess.TimeoutExpired:
    p.kill()
    raise SystemExit("the run did not end within 120 s of the signal")
print("exit: %d" % p.returncode)
# mpirun forwards the ranks' stdout and stderr separately: a stderr line can
# land after a progress line's text (no newline) on the same line here.
for line in out.decode(errors="replace").replace("\r", "\n").splitlines():
    if line and (not line.startswith("step ") or "mtc: " in line):
        print(line)
with open(state) as f:
    print("checkpoint step: %d" % json.load(f)["step"])
