"""The cost model against Cleave's own runs: one model, many plans, 4 local
ranks; predicted step time and memory per rank beside the measured ones.

    python3 bench/localcluster/plans.py [--build build] [--spec DIR]
                                        [--ranks 4] [--steps 8]

--spec is a folder written by cleave-measure-local-cpu (measured if
missing: GEMM rate by shape, memory bandwidth, the runtime's collectives).
For every plan it runs `cleave-run -n RANKS --plan PLAN` (median step time
after the first step; peak memory per rank that training adds, from
cleave-run's "peak memory" line) and `cleave-estimate` with the same plan
on the measured local-cpu-RANKS.json cluster (f32, unfused attention, as
the CPU lowering runs). `auto` is the planner's choice (cleave-run --plan
auto with CLEAVE_LOCAL_CPU_SPEC=DIR), priced by the same estimate.

Prints one row per plan, then Spearman's rank correlation of step times,
the median absolute step-time error and the memory errors, against the
targets of issue 14 (>= 0.9, <= 15 %, within 20 %). Numbers, not a test.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# (name, cleave-run plan). Batch 8 over the data-parallel replicas; `micro`
# only with pipelines.
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
    "auto",
]


def parse_plan(text, ranks):
    """A cleave-run plan string as a dict of cleave-estimate's fields."""
    p = {"dp": None, "tp": 1, "pp": 1, "zero": 0, "sp": False, "micro": 1,
         "schedule": "1f1b", "cp": 1}
    for part in text.split(","):
        key, _, value = part.partition("=")
        if key == "sp":
            p["sp"] = True
        elif key == "schedule":
            p["schedule"] = value
        elif key in p:
            p[key] = int(value)
    if p["dp"] is None:
        p["dp"] = ranks // (p["tp"] * p["pp"] * p["cp"])
    return p


def estimate(args, plan):
    micro_batch = args.batch // plan["dp"] // plan["micro"]
    cmd = [os.path.join(args.build, "bin", "cleave-estimate"), "--json",
           "--model", "tiny-gpt", "--layers", str(args.layers),
           "--hidden", str(args.hidden), "--heads", str(args.heads),
           "--ffn-hidden", str(4 * args.hidden), "--seq-len", str(args.seq),
           "--vocab", str(args.vocab), "--dtype", "f32", "--attention", "unfused",
           "--cluster-file", os.path.join(args.spec, f"local-cpu-{args.ranks}.json"),
           "--dp", str(plan["dp"]), "--tp", str(plan["tp"]), "--pp", str(plan["pp"]),
           "--cp", str(plan["cp"]), "--zero", str(plan["zero"]),
           "--micro-batch", str(micro_batch), "--micro-batches", str(plan["micro"]),
           "--schedule", plan["schedule"]]
    if plan["sp"]:
        cmd.append("--sequence-parallel")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1]
    e = json.loads(out.stdout)
    mem = max(s["total"] for s in e["memory_bytes_per_stage"])
    return {"step_s": e["step_time_s"], "mem": mem}, None


def run(args, plan):
    cmd = [os.path.join(args.build, "bin", "cleave-run"), "-n", str(args.ranks),
           "--plan", plan, "--model", "tiny-gpt", "--layers", str(args.layers),
           "--hidden", str(args.hidden), "--heads", str(args.heads),
           "--seq", str(args.seq), "--batch", str(args.batch),
           "--steps", str(args.steps), "--log-every", str(args.steps)]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1",
           "CLEAVE_LOCAL_CPU_SPEC": os.path.abspath(args.spec)}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        return None, text.strip().splitlines()[-1] if text.strip() else "failed"
    step = re.search(r"then median ([0-9.]+) ms/step", text)
    mem = re.search(r"peak memory: ([0-9.]+) MiB", text)
    chosen = re.search(r"plan \(planner[^)]*\): (.*?);", text)
    if not step or not mem:
        return None, "no step time or peak memory in cleave-run's output"
    return {"step_s": float(step.group(1)) / 1e3,
            "mem": float(mem.group(1)) * 2**20,
            "chosen": chosen.group(1) if chosen else None}, None


def planner_plan(chosen, ranks):
    """cleave-run's 'tp=2 pp=1 dp=2 ... zero=1 ...' line as a plan dict."""
    fields = dict(re.findall(r"(\w+)=(\w+)", chosen))
    text = ",".join(f"{k}={fields[k]}" for k in ("dp", "tp", "pp", "zero") if k in fields)
    if "m" in fields:
        text += f",micro={fields['m']}"
    if re.search(r"\bsp\b", chosen):
        text += ",sp"
    schedule = re.search(r"\b(gpipe|1f1b|interleaved|zb-h1)\b", chosen)
    if schedule and fields.get("pp", "1") != "1":
        text += f",schedule={schedule.group(1)}"
    return parse_plan(text, ranks)


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
                   help="folder of cleave-measure-local-cpu's files (default: measure into BUILD/local-cpu)")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=76)
    p.add_argument("--plans", nargs="*", default=PLANS)
    args = p.parse_args()
    if args.spec is None:
        args.spec = os.path.join(args.build, "local-cpu")
    if not os.path.exists(os.path.join(args.spec, f"local-cpu-{args.ranks}.json")):
        subprocess.run([os.path.join(args.build, "bin", "cleave-measure-local-cpu"),
                        "--ranks", f"1,{args.ranks}", "--out", args.spec], check=True)
    print(f"tiny-gpt shape: {args.layers} layers, hidden {args.hidden}, {args.heads} heads, "
          f"seq {args.seq}, batch {args.batch}, f32; {args.ranks} ranks; median of "
          f"{args.steps - 1} steps after the first; spec {args.spec}")
    print(f"{'plan':<34} {'measured':>9} {'predicted':>9} {'err':>6}   "
          f"{'mem MiB':>7} {'pred MiB':>8} {'err':>6}")
    rows = []
    for text in args.plans:
        measured, err = run(args, text)
        if measured is None:
            print(f"{text:<34} run failed: {err}")
            continue
        plan = (planner_plan(measured["chosen"], args.ranks)
                if text == "auto" and measured["chosen"] else parse_plan(text, args.ranks))
        predicted, err = estimate(args, plan)
        if predicted is None:
            print(f"{text:<34} estimate failed: {err}")
            continue
        name = text if text != "auto" else f"auto ({measured['chosen']})"
        t_err = predicted["step_s"] / measured["step_s"] - 1
        m_err = predicted["mem"] / measured["mem"] - 1
        rows.append((measured, predicted, t_err, m_err))
        print(f"{name:<34} {measured['step_s'] * 1e3:7.1f}ms {predicted['step_s'] * 1e3:7.1f}ms "
              f"{t_err:+6.0%}   {measured['mem'] / 2**20:7.1f} {predicted['mem'] / 2**20:8.1f} "
              f"{m_err:+6.0%}", flush=True)
    if len(rows) < 2:
        sys.exit("fewer than two plans ran")
    rho = spearman([r[0]["step_s"] for r in rows], [r[1]["step_s"] for r in rows])
    med = statistics.median(abs(r[2]) for r in rows)
    mem_med = statistics.median(abs(r[3]) for r in rows)
    mem_max = max(abs(r[3]) for r in rows)
    print(f"\n{len(rows)} plans: Spearman rho of step times {rho:.2f} (target >= 0.9); "
          f"median |step error| {med:.0%} (target <= 15%); "
          f"memory |error| median {mem_med:.0%}, max {mem_max:.0%} (target <= 20%)")


if __name__ == "__main__":
    main()
