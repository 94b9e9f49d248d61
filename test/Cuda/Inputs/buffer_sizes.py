#!/usr/bin/env python3
"""Sizes of the buffers that a lowered program allocates.

Reads MLIR (e.g. the IR printed after cleave-cuda-map-to-gpu) and prints,
for its allocations (memref.alloc / memref.alloca):

    <label>: N buffers, largest SHAPE (E elements, B bytes), peak B bytes

The peak is the most bytes live at once in one function, in program order (memref.alloc
adds a buffer, memref.dealloc of its name removes it), every loop body
counted once: the tile loops free their temporaries before the next
iteration. Function arguments (parameters, inputs, results) are not
counted. With --max-elements, a buffer with more elements is an error
naming it, and with --max-peak-bytes a higher peak (exit status 1).
"""
import argparse
import re
import sys

ALLOC = re.compile(r"(%[\w.$-]+) = memref\.alloca?\(\)[^\n]*?:\s*"
                   r"memref<([0-9x]+)x([a-z]+[0-9]*)")
DEALLOC = re.compile(r"memref\.dealloc (%[\w.$-]+)")
BITS = {"f64": 64, "f32": 32, "f16": 16, "bf16": 16, "i64": 64, "i32": 32,
        "i16": 16, "i8": 8, "i1": 8, "index": 64}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("ir")
    parser.add_argument("--label", default="buffers")
    parser.add_argument("--max-elements", type=int, default=0)
    parser.add_argument("--max-peak-bytes", type=int, default=0)
    args = parser.parse_args()
    text = open(args.ir).read()
    buffers = []
    live, now, peak = {}, 0, 0
    for line in text.splitlines():
        if line.lstrip().startswith("func.func"):
            live, now = {}, 0
        m = ALLOC.search(line)
        if m:
            name, shape, elem = m.groups()
            elements = 1
            for d in shape.split("x"):
                elements *= int(d)
            size = elements * BITS.get(elem, 32) // 8
            buffers.append((elements, shape, elem, size))
            live[name] = size
            now += size
            peak = max(peak, now)
        m = DEALLOC.search(line)
        if m and m.group(1) in live:
            now -= live.pop(m.group(1))
    if not buffers:
        print(f"{args.label}: no buffers", file=sys.stderr)
        return 1
    largest = max(buffers)
    print(f"{args.label}: {len(buffers)} buffers, largest {largest[1]}x"
          f"{largest[2]} ({largest[0]} elements, {largest[3]} bytes), "
          f"peak {peak} bytes")
    if args.max_elements and largest[0] > args.max_elements:
        big = sorted({f"{b[1]}x{b[2]}" for b in buffers
                      if b[0] > args.max_elements})
        print(f"{args.label}: buffers over {args.max_elements} elements: "
              + ", ".join(big), file=sys.stderr)
        return 1
    if args.max_peak_bytes and peak > args.max_peak_bytes:
        print(f"{args.label}: peak {peak} bytes, over "
              f"{args.max_peak_bytes}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
