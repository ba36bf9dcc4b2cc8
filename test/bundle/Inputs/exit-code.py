"""Runs a command, prints its output and how it ended ("exit: N" or
"signal: NAME"), and succeeds only if it exited with an expected status.

usage: exit-code.py STATUS[,STATUS...] COMMAND [ARG...]

"0,1": the command may accept or refuse its input, but must end by itself
(test/sanitize).
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
expected = [int(s) for s in sys.argv[1].split(",")]
sys.exit(0 if p.returncode in expected else 1)
