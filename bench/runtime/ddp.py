"""Data-parallel step time: cleave-run against PyTorch DDP over Gloo, in one run.

    /usr/bin/python3 bench/runtime/ddp.py [--build build] [--ranks 2 4]
        [--cleave-arg=--async-collectives=false]

The same nanoGPT-style model on both sides (the zoo GPT and its PyTorch
mirror, python/tests/models/zoo.py: 4 layers, hidden 256, 8 heads, seq 128,
vocabulary 76 as cleave-run's embedded corpus),
per-rank batch 8, one thread per rank (OPENBLAS_NUM_THREADS=1,
OMP_NUM_THREADS=1 and torch.set_num_threads(1)), AdamW. Every rank count
runs Cleave and PyTorch back to back, alternating which goes first over
--rounds rounds; each side's number is the median step time (rank 0, steps
after warm-up), and the row shows the median over rounds and the ratio
PyTorch / Cleave (above 1: Cleave is faster). Needs Debian's python3-torch
(1.13, /usr/bin/python3). A benchmark, not a test.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def torch_rank(a):
    """One DDP rank (run as a subprocess with RANK/WORLD_SIZE set)."""
    import time

    import torch
    import torch.distributed as dist

    sys.path.insert(0, os.path.join(ROOT, "python"))
    from cleave.torch.reference import pin_threads
    from tests.models.zoo import ZooGPT

    pin_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="file://" + a.store, rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    model = ZooGPT(a.layers, a.hidden, a.heads, 4 * a.hidden, a.vocab, a.seq)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(rank)
    times = []
    for step in range(a.warmup + a.steps):
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
        targets = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = ddp(tokens, targets)
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - start)
    dist.barrier()
    if rank == 0:
        print(f"median_ms {1e3 * statistics.median(times):.3f}")
    dist.destroy_process_group()


def run_torch(a, ranks):
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = []
        for rank in range(ranks):
            env = {**os.environ, **ONE_THREAD, "RANK": str(rank), "WORLD_SIZE": str(ranks)}
            args = [sys.executable, os.path.abspath(__file__), "--torch-rank", "--store", store]
            for name in ("layers", "hidden", "heads", "seq", "batch", "vocab", "steps",
                         "warmup"):
                args += ["--" + name, str(getattr(a, name))]
            procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        outs = [p.communicate() for p in procs]
        for p, (out, err) in zip(procs, outs):
            if p.returncode != 0:
                sys.exit(f"PyTorch DDP rank failed:\n{err}")
        return float(re.search(r"median_ms (\S+)", outs[0][0]).group(1))


def run_cleave(a, ranks):
    cmd = [os.path.join(a.build, "bin", "cleave-run"), "--model", "tiny-gpt",
           "--layers", str(a.layers), "--hidden", str(a.hidden), "--heads", str(a.heads),
           "--ffn", str(4 * a.hidden), "--seq", str(a.seq), "--batch", str(a.batch * ranks),
           "--steps", str(a.warmup + a.steps), "--log-every", str(a.warmup + a.steps),
           "-n", str(ranks), "--plan", f"dp={ranks}"]
    if a.bucket_mb is not None:
        cmd += ["--bucket-mb", str(a.bucket_mb)]
    cmd += a.cleave_arg
    out = subprocess.run(cmd, env={**os.environ, **ONE_THREAD}, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"cleave-run failed:\n{out.stdout}\n{out.stderr}")
    # "[rank 0] step time: first step X ms (warm-up), then median Y ms/step"
    match = re.search(r"median ([0-9.]+) ms/step", out.stdout)
    if not match:
        sys.exit(f"cannot find the step time in cleave-run's output:\n{out.stdout}")
    return float(match.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--bucket-mb", type=float, default=None,
                   help="cleave-run --bucket-mb (default: cleave-run's)")
    p.add_argument("--cleave-arg", action="append", default=[],
                   help="one more cleave-run argument, e.g. "
                        "--cleave-arg=--async-collectives=false (repeatable)")
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 8), ("seq", 128),
                          ("batch", 8), ("vocab", 76), ("steps", 30), ("warmup", 5)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--torch-rank", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.torch_rank:
        return torch_rank(a)
    print(f"nanoGPT: {a.layers} layers, hidden {a.hidden}, {a.heads} heads, seq {a.seq}, "
          f"per-rank batch {a.batch}, 1 thread per rank, AdamW; median step of rank 0 over "
          f"{a.steps} steps, median of {a.rounds} rounds")
    print(f"{'ranks':>5} {'cleave ms':>10} {'torch DDP ms':>13} {'ratio':>6}  (rounds: ratio)")
    for ranks in a.ranks:
        cleave, torch_ = [], []
        for r in range(a.rounds):
            sides = [(cleave, run_cleave), (torch_, run_torch)]
            for times, fn in sides if r % 2 == 0 else reversed(sides):
                times.append(fn(a, ranks))
        c, t = statistics.median(cleave), statistics.median(torch_)
        each = " ".join(f"{y / x:.2f}" for x, y in zip(cleave, torch_))
        print(f"{ranks:>5} {c:>10.1f} {t:>13.1f} {t / c:>6.2f}  ({each})", flush=True)


if __name__ == "__main__":
    main()
