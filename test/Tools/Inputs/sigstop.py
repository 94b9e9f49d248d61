"""Starts `cleave-run -n 3 ...` (argv[1:]), stops its last rank (SIGSTOP) once
the first step is logged, and prints how the run ended: its exit status,
whether it ended within 7 s of the stop, and the lines that name rank 2."""
import os
import signal
import subprocess
import sys
import time


def children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(p) for p in f.read().split()]


proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True)
for line in proc.stdout:
    if "step" in line and "loss" in line:
        break
else:
    sys.exit("the run ended before its first step: rc %s" % proc.wait())
# The launcher forks the ranks in order: the newest child is the last rank.
os.kill(sorted(children(proc.pid))[-1], signal.SIGSTOP)
stopped = time.time()
rest = proc.stdout.read()
rc = proc.wait(timeout=60)
print("exit status", rc)
print("ended within 7 s" if time.time() - stopped < 7 else
      "ended %.1f s after the stop" % (time.time() - stopped))
for line in rest.splitlines():
    if "rank 2 is hung" in line or "rank 2 (pid" in line:
        print(line)
