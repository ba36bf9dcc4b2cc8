"""Starts one `mtc train` writing --out DIR, waits until it holds DIR.lock,
then runs a second one with the same --out and prints its exit code and error,
and the first run's pid; then kills the first (SIGKILL, as a crash would) and
prints the lock file's state.

usage: second-writer.py MTC MODEL DATA DIR"""
import os
import signal
import subprocess
import sys
import time

mtc, model, data, out = sys.argv[1:5]
common = [mtc, "train", model, "--data", data, "--batch", "2", "--seq", "16",
          "--eval-every", "0", "--threads", "1", "--out", out,
          "--set", "dim=32", "--set", "n_layers=1", "--set", "ffn=64"]
first = subprocess.Popen(common + ["--steps", "1000000"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
lock = out + ".lock"
deadline = time.time() + 120
while time.time() < deadline:
    if os.path.exists(lock) and open(lock).read().strip() == str(first.pid):
        break
    if first.poll() is not None:
        sys.exit("the first run ended: " + first.stderr.read().decode())
    time.sleep(0.05)
else:
    sys.exit("the first run never took the lock")
second = subprocess.run(common + ["--steps", "2"], capture_output=True,
                        text=True)
print("second exit", second.returncode)
print(second.stderr.strip())
print("first pid", first.pid)
first.send_signal(signal.SIGKILL)
first.wait()
print("after kill: lock file", "present" if os.path.exists(lock) else "absent")
