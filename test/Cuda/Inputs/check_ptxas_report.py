"""Summarizes a ptxas resource report of cleave-cuda-compile-ptx and checks
limits: prints "<label>: N kernels, at most R registers (kernel), S bytes
spilled, ptxas T s" and exits 1 naming each kernel over a limit."""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("report")
    p.add_argument("--label", default="program")
    p.add_argument("--max-spill-bytes", type=int, default=0,
                   help="most spill bytes (stores + loads) one kernel may have")
    p.add_argument("--max-registers", type=int, default=255)
    args = p.parse_args()
    with open(args.report) as f:
        report = json.load(f)
    kernels = report["kernels"]
    if not kernels:
        print(f"{args.label}: the report lists no kernel")
        return 1
    worst = max(kernels, key=lambda k: k["registers"])
    spilled = sum(k["spill_stores"] + k["spill_loads"] for k in kernels)
    print(f"{args.label}: {len(kernels)} kernels, at most "
          f"{worst['registers']} registers ({worst['name']}), {spilled} bytes "
          f"spilled, ptxas {report['ptxas_seconds']:.1f} s")
    bad = 0
    for k in kernels:
        spill = k["spill_stores"] + k["spill_loads"]
        if spill > args.max_spill_bytes or k["registers"] > args.max_registers:
            print(f"  {k['name']}: {k['registers']} registers, {spill} bytes "
                  f"spilled (limits {args.max_registers}, "
                  f"{args.max_spill_bytes})")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
