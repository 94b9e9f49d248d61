"""Starts `cleave-run -n 2 ...` (argv[1:]), sends SIGTERM to it once the
first step is logged, and prints its exit status and whether any rank
process outlived it."""
import os
import signal
import subprocess
import sys
import time

proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True)
for line in proc.stdout:
    if "step" in line and "loss" in line:
        break
else:
    sys.exit("the run ended before its first step: rc %s" % proc.wait())
proc.send_signal(signal.SIGTERM)
deadline = time.time() + 30
rest = proc.stdout.read()
rc = proc.wait(timeout=max(1, deadline - time.time()))
print("exit status", rc)
print("interrupted message", "interrupted by SIGTERM" in rest)
