"""machine_idle.py - How idle this machine is, for the benches' --wait-quiet.

Imported by bench/sim_calibration.py and bench/train_vs_pytorch.py (run as
`python3 bench/NAME.py`, so this directory is on the import path).
Standard library only.
"""

import time


def cpu_idle_fraction(seconds):
    """The machine's idle fraction over `seconds` (/proc/stat), or None."""
    def sample():
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
            return sum(v), v[3] + (v[4] if len(v) > 4 else 0)
        except (OSError, ValueError, IndexError):
            return None
    a = sample()
    time.sleep(seconds)
    b = sample()
    if a is None or b is None or b[0] == a[0]:
        return None
    return (b[1] - a[1]) / float(b[0] - a[0])


def wait_quiet(max_wait, threshold=0.9):
    """Waits (at most max_wait seconds) until the machine was at least
    `threshold` idle over 2 s; returns the idle fraction last seen."""
    end = time.time() + max_wait
    while True:
        idle = cpu_idle_fraction(2.0)
        if idle is None or idle >= threshold or time.time() >= end:
            return idle
