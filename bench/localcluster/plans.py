"""The cost model against Cleave's own runs: one model, many plans, 4 local
ranks; predicted step time and memory per rank beside the measured ones.

    python3 bench/localcluster/plans.py [--build build] [--spec DIR]
                                        [--ranks 4] [--steps 8] [--cpu]
                                        [--reps N]

--spec is a folder written by cleave-measure-local-cpu (measured if
missing: GEMM rate by shape, memory bandwidth, the runtime's collectives).
For every plan it runs `cleave-run -n RANKS --plan PLAN --predict` with
CLEAVE_LOCAL_CPU_SPEC=DIR: the measured median step time after the first
step and peak memory per rank that training adds ("peak memory"), and the
cost model's prediction for the same plan on the measured
local-cpu-RANKS.json cluster, priced from the program's ops as the planner
prices its candidates (activations: the values the step keeps). `auto` is
the planner's choice.

With --reps N every plan runs N times, in turns (all the plans once, then
again), and each row shows the median and every turn's step time: the
machine's speed drifts by 10-15% between runs a minute apart, more than
many plans here differ.

With --cpu, each row also shows the CPU seconds per step of all ranks
together (user + system: compute, and the communication's system time and
wake-ups), that over the machine's cores (the step time if the ranks were
bound by the cores alone), and the cost model's prediction of the same CPU
and of its collectives' part (from the spec's CPU per call;
docs/planner.md).

Prints one row per plan, then Spearman's rank correlation of step times,
the median absolute step-time error and the memory errors, against the
targets of issue 14 (>= 0.9, <= 15 %, within 20 %). Numbers; with
--max-memory-error it is the ctest localcluster.memory (3 plans, memory
only: the step times of a shared machine are not a test).
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# (name, cleave-run plan). Batch 8 over the data-parallel replicas; `micro`
# only with pipelines; context parallelism in the default load-balanced
# layout.
PLANS = [
    "dp=4",
    "dp=4,zero=1",
    "dp=4,zero=2",
    "dp=4,zero=3",
    "dp=2,tp=2",
    "dp=2,tp=2,sp",
    "dp=2,tp=2,zero=1",
    "tp=4",
    "tp=4,sp",
    "pp=2,dp=2,micro=2",
    "pp=2,dp=2,micro=4,schedule=gpipe",
    "pp=2,tp=2,micro=4",
    "pp=4,micro=4",
    "pp=4,micro=8,schedule=gpipe",
    "dp=4,recompute=full",
    "dp=2,tp=2,recompute=selective",
    "dp=2,cp=2",
    "cp=2,tp=2",
    "cp=4",
    "auto",
]


def children_cpu():
    """CPU seconds (user + system) of the finished child processes so far:
    cleave-run and, through it, its ranks."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def one_step_cpu(args, plan):
    """CPU seconds of a run of one step (start-up, the first step) that
    loaded the step from the compile cache (run again if it compiled it);
    it runs before the measured run, which then loads it too. None if it
    failed."""
    for _ in range(2):
        before = children_cpu()
        out = subprocess.run(command(args, plan, 1), capture_output=True,
                             text=True, env=environment(args))
        if out.returncode != 0:
            return None
        if "from the compile cache" in out.stdout + out.stderr:
            return children_cpu() - before
    return None


def command(args, plan, steps):
    return [os.path.join(args.build, "bin", "cleave-run"), "-n", str(args.ranks),
            "--plan", plan, "--model", "tiny-gpt", "--layers", str(args.layers),
            "--hidden", str(args.hidden), "--heads", str(args.heads),
            "--seq", str(args.seq), "--batch", str(args.batch),
            "--steps", str(steps), "--log-every", str(steps), "--predict"]


def environment(args):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    env.pop("CLEAVE_LOCAL_CPU_SPEC", None)
    if args.spec != "none":
        env["CLEAVE_LOCAL_CPU_SPEC"] = os.path.abspath(args.spec)
    return env


def run(args, plan):
    """Measured and predicted step time and memory of `plan` (cleave-run
    --predict: the cost model prices the plan from the program's ops on the
    local-cpu cluster of CLEAVE_LOCAL_CPU_SPEC, as the planner does). With
    --cpu, the CPU seconds per step of all ranks together: the measured
    run's less a one-step run's, over the steps between."""
    first = one_step_cpu(args, plan) if args.cpu and args.steps > 1 else None
    before = children_cpu()
    out = subprocess.run(command(args, plan, args.steps), capture_output=True,
                         text=True, env=environment(args))
    cpu = children_cpu() - before
    text = out.stdout + out.stderr
    if out.returncode != 0:
        return None, text.strip().splitlines()[-1] if text.strip() else "failed"
    step = re.search(r"then median ([0-9.]+) ms/step", text)
    mem = re.search(r"peak memory: ([0-9.]+) MiB", text)
    pred = re.search(r"predicted by the cost model: ([0-9.]+) ms/step, "
                     r"peak memory ([0-9.]+) MiB per rank", text)
    chosen = re.search(r"plan \(planner[^)]*\): (.*?);", text)
    host = re.search(r"host CPU ([0-9.]+) ms per step \(collectives ([0-9.]+)\)",
                     text)
    if not step or not mem or not pred:
        return None, "no step time, peak memory or prediction in cleave-run's output"
    row = {"step_s": float(step.group(1)) / 1e3,
           "mem": float(mem.group(1)) * 2**20,
           "pred_step_s": float(pred.group(1)) / 1e3,
           "pred_mem": float(pred.group(2)) * 2**20,
           "chosen": chosen.group(1) if chosen else None,
           "cpu_step_s": (cpu - first) / (args.steps - 1)
                         if first is not None else None,
           "pred_cpu_s": float(host.group(1)) / 1e3 if host else None,
           "pred_comm_cpu_s": float(host.group(2)) / 1e3 if host else None}
    return row, None


def spearman(a, b):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return cov / var if var else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--spec", default=None,
                   help="folder of cleave-measure-local-cpu's files (default: measure into "
                        "BUILD/local-cpu); 'none': the built-in local-cpu cluster")
    p.add_argument("--max-memory-error", type=float, default=None,
                   help="exit 1 if a plan's predicted memory is further than this fraction "
                        "from the measured (the ctest localcluster.memory)")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--plans", nargs="*", default=PLANS)
    p.add_argument("--reps", type=int, default=1,
                   help="run every plan this many times, in turns (each turn runs all "
                        "the plans), and take each plan's median: the machine's speed "
                        "drifts by 10-15%% between runs of a minute apart")
    p.add_argument("--cpu", action="store_true",
                   help="also print each plan's CPU seconds per step (all ranks, user + "
                        "system; one more run per plan) over this machine's cores: the "
                        "step time if the ranks were bound by the cores' CPU time alone")
    args = p.parse_args()
    if args.spec is None:
        args.spec = os.path.join(args.build, "local-cpu")
    if args.spec != "none" and not os.path.exists(
            os.path.join(args.spec, f"local-cpu-{args.ranks}.json")):
        subprocess.run([os.path.join(args.build, "bin", "cleave-measure-local-cpu"),
                        "--ranks", f"{args.ranks}", "--out", args.spec], check=True)
    print(f"tiny-gpt shape: {args.layers} layers, hidden {args.hidden}, {args.heads} heads, "
          f"seq {args.seq}, batch {args.batch}, f32; {args.ranks} ranks; median of "
          f"{args.steps - 1} steps after the first"
          + (f", the median over {args.reps} turns" if args.reps > 1 else "")
          + f"; spec {args.spec}")
    cores = os.cpu_count() or 1
    print(f"{'plan':<34} {'measured':>9} {'predicted':>9} {'err':>6}   "
          f"{'mem MiB':>7} {'pred MiB':>8} {'err':>6}" +
          (f"   {'CPU/step':>9} {f'/ {cores} cores':>11} {'predicted':>9} "
           f"{'(comm)':>8}" if args.cpu else ""))
    if args.reps < 1:
        sys.exit("--reps must be at least 1")
    # Turns: every plan once per turn, so that a slow minute of the machine
    # falls on all plans alike rather than on one.
    turns = {text: [] for text in args.plans}
    failed = {}
    for turn in range(args.reps):
        for text in args.plans:
            if text in failed:
                continue
            measured, err = run(args, text)
            if measured is None:
                failed[text] = err
            else:
                turns[text].append(measured)
            if args.reps > 1:
                print(f"turn {turn + 1}/{args.reps}: {text}: " +
                      (f"{measured['step_s'] * 1e3:.1f} ms" if measured else "failed"),
                      file=sys.stderr, flush=True)
    rows = []
    for text in args.plans:
        if text in failed:
            print(f"{text:<34} run failed: {failed[text]}")
            continue
        runs = turns[text]
        measured = dict(runs[0])
        for key in ("step_s", "mem", "cpu_step_s"):
            values = [r[key] for r in runs if r[key] is not None]
            measured[key] = statistics.median(values) if values else None
        name = text if text != "auto" else f"auto ({measured['chosen']})"
        t_err = measured["pred_step_s"] / measured["step_s"] - 1
        m_err = measured["pred_mem"] / measured["mem"] - 1
        rows.append((measured, t_err, m_err))
        cpu = ""
        if args.cpu:
            c = measured["cpu_step_s"]
            cpu = (f"   {c * 1e3:7.1f}ms {c / cores * 1e3:9.1f}ms" if c is not None
                   else "   (failed)")
            if measured["pred_cpu_s"] is not None:
                cpu += (f" {measured['pred_cpu_s'] * 1e3:7.1f}ms "
                        f"{measured['pred_comm_cpu_s'] * 1e3:6.1f}ms")
        each = ("   turns " + " / ".join(f"{r['step_s'] * 1e3:.1f}" for r in runs)
                if args.reps > 1 else "")
        print(f"{name:<34} {measured['step_s'] * 1e3:7.1f}ms "
              f"{measured['pred_step_s'] * 1e3:7.1f}ms {t_err:+6.0%}   "
              f"{measured['mem'] / 2**20:7.1f} {measured['pred_mem'] / 2**20:8.1f} "
              f"{m_err:+6.0%}{cpu}{each}", flush=True)
    if len(rows) < 2:
        sys.exit("fewer than two plans ran")
    rho = spearman([r[0]["step_s"] for r in rows],
                   [r[0]["pred_step_s"] for r in rows])
    med = statistics.median(abs(r[1]) for r in rows)
    mem_med = statistics.median(abs(r[2]) for r in rows)
    mem_max = max(abs(r[2]) for r in rows)
    print(f"\n{len(rows)} plans: Spearman rho of step times {rho:.2f} (target >= 0.9); "
          f"median |step error| {med:.0%} (target <= 15%); "
          f"memory |error| median {mem_med:.0%}, max {mem_max:.0%} (target <= 20%)")
    if args.max_memory_error is not None:
        if len(rows) < len(args.plans):
            sys.exit("a plan failed to run")
        if mem_max > args.max_memory_error:
            sys.exit(f"memory: a prediction is {mem_max:.0%} from the measured peak "
                     f"(limit {args.max_memory_error:.0%})")


if __name__ == "__main__":
    main()
