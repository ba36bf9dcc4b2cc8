"""Runs a command, prints its output and how it ended ("exit: N" or
"signal: NAME"), and succeeds only if it exited with the expected status.

usage: exit-code.py STATUS COMMAND [ARG...]
"""
import signal
import subprocess
import sys

p = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT)
sys.stdout.write(p.stdout.decode(errors="replace"))
if p.returncode < 0:
    print("signal: %s" % signal.Signals(-p.returncode).name)
else:
    print("exit: %d" % p.returncode)
sys.exit(0 if p.returncode == int(sys.argv[1]) else 1)
