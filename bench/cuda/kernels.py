#!/usr/bin/env python3
"""ptxas resource report of CUDA training steps (docs/cuda.md, "Kernels").

For each configuration: the zoo model's training step (AdamW), optionally
partitioned by a named plan (cleave-apply-plan, propagation, partitioning),
lowered by cleave-lower-to-cuda for sm_90 with the ptxas report on. Prints
one row per configuration (kernels, registers, spills, GEMM calls, compile
times) and, with --kernels, the worst kernels of each.

    bench/cuda/kernels.py --build build            # the table of docs/cuda.md
    bench/cuda/kernels.py --build build --only gpt2-small-1l --kernels 5
    bench/cuda/kernels.py --build build --only "tiny-gpt dp2xtp2+sp"
    bench/cuda/kernels.py --build build --attention-tile 0   # materialised

Any Python 3 runs it (it only drives the build's tools).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

# name: (cleave-models arguments, plan for cleave-apply-plan or None)
CONFIGS = {
    "tiny-gpt": (["--model", "tiny-gpt"], None),
    "tiny-gpt-bf16": (["--model", "tiny-gpt", "--dtype", "bf16"], None),
    "tiny-llama": (["--model", "tiny-llama"], None),
    "tiny-llama-bf16": (["--model", "tiny-llama", "--dtype", "bf16"], None),
    "gpt2-small-1l": (["--model", "gpt2-small", "--layers", "1", "--batch", "8"],
                      None),
    "gpt2-small-1l-bf16": (["--model", "gpt2-small", "--layers", "1",
                            "--batch", "8", "--dtype", "bf16"], None),
    "llama-1l": (["--model", "tiny-llama", "--hidden", "1024", "--heads", "16",
                  "--kv-heads", "4", "--ffn", "2816", "--seq", "512",
                  "--batch", "8", "--layers", "1"], None),
    "tiny-gpt dp2xtp2+sp": (["--model", "tiny-gpt"], "dp=2 tp=2 sp=true"),
    "tiny-llama dp2xtp2+sp": (["--model", "tiny-llama"], "dp=2 tp=2 sp=true"),
    "gpt2-small-1l dp2xtp4+sp": (["--model", "gpt2-small", "--layers", "1",
                                  "--batch", "8"], "dp=2 tp=4 sp=true"),
}


def run(cmd, stdin=None):
    r = subprocess.run(cmd, input=stdin, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr.decode()[-3000:]}")
    return r.stdout


def measure(build, name, models_args, plan, keep, attention_tile):
    bin_dir = os.path.join(build, "bin")
    program = run([os.path.join(bin_dir, "cleave-models")] + models_args)
    passes = ["--cleave-autodiff", "--canonicalize", "--cse"]
    if plan:
        passes += [f"--cleave-apply-plan={plan}", "--cleave-propagate-sharding",
                   "--cleave-partition"]
    step = run([os.path.join(bin_dir, "cleave-opt")] + passes, stdin=program)
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        options = f"ptxas-report={report}"
        if attention_tile is not None:
            options += f" attention-tile={attention_tile}"
        start = time.time()
        host = run([os.path.join(bin_dir, "cleave-opt"),
                    f"--cleave-lower-to-cuda={options}"], stdin=step)
        seconds = time.time() - start
        with open(report) as f:
            data = json.load(f)
    text = host.decode()
    kernels = data["kernels"]
    kinds = {}
    for k in kernels:
        kind = re.sub(r".*_k\d+_", "", k["name"])
        kinds.setdefault(kind, []).append(k)
    return {
        "name": name,
        "kernels": len(kernels),
        "kinds": {kind: len(v) for kind, v in sorted(kinds.items())},
        "max_registers": max(k["registers"] for k in kernels),
        "median_registers": sorted(k["registers"] for k in kernels)[
            len(kernels) // 2],
        "spilling": sum(1 for k in kernels
                        if k["spill_stores"] + k["spill_loads"]),
        "spill_bytes": sum(k["spill_stores"] + k["spill_loads"]
                           for k in kernels),
        "gemms": len(re.findall(r"llvm.call @cleave_rt_gemm\(", text)),
        "epilogues": len(re.findall(r"llvm.call @cleave_rt_cuda_gemm_epilogue\(",
                                    text)),
        "collectives": len(re.findall(
            r"llvm.call @cleave_rt_(all_reduce|all_gather|reduce_scatter|"
            r"all_to_all|send|recv|collective_permute)\(", text)),
        "ptxas_s": data["ptxas_seconds"],
        "compile_s": seconds,
        "worst": sorted(kernels, key=lambda k: -k["registers"])[:keep],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--only", action="append", help="configuration name(s)")
    p.add_argument("--kernels", type=int, default=0,
                   help="also list the N kernels with the most registers")
    p.add_argument("--json", help="write the rows to this file")
    p.add_argument("--attention-tile", type=int,
                   help="rows of the flash attention tiles (0: the "
                        "materialised attention; default: the pipeline's)")
    args = p.parse_args()
    names = args.only or list(CONFIGS)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        sys.exit(f"unknown configuration(s) {', '.join(map(repr, unknown))}; "
                 f"known: {', '.join(map(repr, CONFIGS))}")
    rows = []
    print(f"{'configuration':28} {'kernels':>7} {'regs max/med':>12} "
          f"{'spilling':>8} {'GEMMs':>6} {'+bias':>5} {'coll.':>5} "
          f"{'ptxas s':>7} {'total s':>7}")
    for name in names:
        models_args, plan = CONFIGS[name]
        r = measure(args.build, name, models_args, plan, args.kernels,
                    args.attention_tile)
        rows.append(r)
        spill = f"{r['spilling']} ({r['spill_bytes']} B)"
        print(f"{name:28} {r['kernels']:7d} "
              f"{r['max_registers']:6d}/{r['median_registers']:<5d} "
              f"{spill:>8} {r['gemms']:6d} {r['epilogues']:5d} "
              f"{r['collectives']:5d} {r['ptxas_s']:7.1f} {r['compile_s']:7.1f}",
              flush=True)
        kinds = ", ".join(f"{n} {k}" for k, n in r["kinds"].items())
        print(f"{'':28} kernel kinds: {kinds}")
        for k in r["worst"]:
            print(f"{'':30}{k['name']}: {k['registers']} registers, "
                  f"{k['spill_stores']}+{k['spill_loads']} B spilled, "
                  f"{k['stack']} B stack, {k['smem']} B shared")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
