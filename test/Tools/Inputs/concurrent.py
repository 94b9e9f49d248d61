"""Runs one command N times at once; prints each exit status and fails if
any run failed:  concurrent.py N COMMAND [ARGS...]"""
import subprocess
import sys

n = int(sys.argv[1])
procs = [subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) for _ in range(n)]
failed = False
for i, p in enumerate(procs):
    out, _ = p.communicate()
    print(f"run {i}: exit {p.returncode}")
    if p.returncode != 0:
        failed = True
        print(out)
sys.exit(1 if failed else 0)
