#!/usr/bin/env python3
"""Checks the Chrome trace that `cleave-estimate --trace` writes.

usage: check-trace.py CLEAVE_ESTIMATE TRACE_PATH [ESTIMATE OPTIONS...]

Runs cleave-estimate with the given options plus `--trace TRACE_PATH
--json`, then checks the trace against the estimate it came with:

- the Trace Event Format: metadata events name every process (one per
  pipeline stage, "stage S (xN ranks)") and every stream that has events;
  complete events ("ph": "X") carry a name, a category, a non-negative
  start and duration and their standalone duration;
- event names: F/B/W passes per micro-batch, optimizer, pipeline sends and
  data-parallel collectives;
- the schedule: every stage runs the forward and the backward pass of every
  micro-batch (of every model chunk), each backward after its forward, and
  one optimizer step after all of them;
- time: a stream runs one task at a time; the last event ends at the step
  time of the estimate (also recorded in the trace), and the time
  breakdown of the estimate adds up to that step time, within rounding.

Exits 1 with one line per failed check.
"""

import collections
import json
import re
import subprocess
import sys

# Microseconds in the trace, seconds in the estimate: "within rounding" is
# relative 1e-9 plus a nanosecond.
REL, ABS_US = 1e-9, 1e-3

NAME = re.compile(
    r"^(?:(?P<pass>[FBW]) mb(?P<mb>\d+)(?: c(?P<chunk>\d+))?(?: L\d+)?"
    r"|optimizer"
    r"|send mb\d+(?: c\d+)?"
    r"|(?:reduce-scatter|embedding all-reduce|dp collective)(?: mb\d+)?(?: c\d+)?(?: L\d+)?)$")
PROCESS = re.compile(r"^stage (\d+) \(x(\d+) ranks\)$")

errors = []


def check(cond, message):
    if not cond:
        errors.append(message)
    return bool(cond)


def close(a, b):
    return abs(a - b) <= ABS_US + REL * max(abs(a), abs(b))


def option(args, name, default):
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return int(args[i + 1])
        if a.startswith(name + "="):
            return int(a.split("=", 1)[1])
    return default


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    tool, path, options = sys.argv[1], sys.argv[2], sys.argv[3:]
    run = subprocess.run([tool, *options, "--trace", path, "--json"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"cleave-estimate failed ({run.returncode}): {run.stderr}")
    estimate = json.loads(run.stdout)
    with open(path) as f:
        trace = json.load(f)

    step_us = estimate["step_time_s"] * 1e6
    check(close(trace["otherData"]["step_time_s"] * 1e6, step_us),
          f"trace step time {trace['otherData']['step_time_s']} s != "
          f"estimate {estimate['step_time_s']} s")
    check(trace.get("displayTimeUnit") == "ms", "displayTimeUnit is not ms")
    breakdown = sum(estimate["time_s"].values()) * 1e6
    check(close(breakdown, step_us),
          f"the time breakdown adds up to {breakdown} us, not the step time "
          f"{step_us} us")

    pp, tp = option(options, "--pp", 1), option(options, "--tp", 1)
    dp, cp = option(options, "--dp", 1), option(options, "--cp", 1)
    micro = option(options, "--micro-batches", None)

    processes, threads = {}, set()
    events = collections.defaultdict(list)  # (pid, tid) -> [event]
    for e in trace["traceEvents"]:
        if e["ph"] == "M":
            if e["name"] == "process_name":
                processes[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                threads.add((e["pid"], e["tid"]))
            continue
        if not check(e["ph"] == "X", f"unexpected phase {e['ph']!r}: {e}"):
            continue
        ok = check(NAME.match(e["name"]), f"unexpected event name {e['name']!r}")
        ok &= check(e["ts"] >= 0 and e["dur"] >= 0, f"negative time: {e}")
        ok &= check(e["args"]["standalone_us"] >= 0 and e.get("cat"),
                    f"missing category or standalone time: {e}")
        if ok:
            events[(e["pid"], e["tid"])].append(e)

    # One process per stage, each standing for the tp x dp x cp ranks of
    # that stage.
    stages = {}
    for pid, name in processes.items():
        m = PROCESS.match(name)
        if check(m, f"process {pid} is named {name!r}"):
            stages[pid] = int(m.group(1))
            check(int(m.group(2)) == tp * dp * cp,
                  f"{name!r}: expected x{tp * dp * cp} ranks")
    check(sorted(stages.values()) == list(range(pp)),
          f"stages {sorted(stages.values())}, expected 0..{pp - 1}")
    for key in events:
        check(key in threads, f"events on unnamed stream {key}")

    end = 0.0
    for (pid, tid), evs in events.items():
        evs.sort(key=lambda e: e["ts"])
        for a, b in zip(evs, evs[1:]):
            check(b["ts"] >= a["ts"] + a["dur"] - ABS_US,
                  f"stage {stages.get(pid)} stream {tid}: {b['name']!r} "
                  f"starts before {a['name']!r} ends")
        end = max(end, max(e["ts"] + e["dur"] for e in evs))
    check(close(end, step_us),
          f"the last event ends at {end} us, the step time is {step_us} us")

    # Compute passes per stage: F and B for every micro-batch and chunk,
    # backward after forward; the optimizer step last. The micro-batch count
    # is --micro-batches when given, else what the stages agree on.
    seen_mb = {int(m.group("mb")) for evs in events.values() for e in evs
               for m in [NAME.match(e["name"])] if m and m.group("pass")}
    if micro is None:
        micro = max(seen_mb, default=-1) + 1
    check(micro >= 1, "no forward or backward passes")
    for pid, stage in stages.items():
        seen = collections.Counter()
        start = {}
        optimizer = [e for evs in (events[k] for k in events if k[0] == pid)
                     for e in evs if e["name"] == "optimizer"]
        for evs in (events[k] for k in events if k[0] == pid):
            for e in evs:
                m = NAME.match(e["name"])
                if not m or not m.group("pass"):
                    continue
                key = (m.group("pass"), int(m.group("mb")), m.group("chunk"))
                seen[key] += 1
                start.setdefault(key, e["ts"])
                start[key] = min(start[key], e["ts"])
        chunks = sorted({k[2] for k in seen}, key=lambda c: c or "")
        for mb in range(micro):
            for chunk in chunks:
                f, b = ("F", mb, chunk), ("B", mb, chunk)
                if check(seen[f] >= 1 and seen[b] >= 1,
                         f"stage {stage}: no forward or backward pass of "
                         f"micro-batch {mb} chunk {chunk}"):
                    check(start[f] < start[b],
                          f"stage {stage}: backward of micro-batch {mb} "
                          f"before its forward")
        extra = sorted({k[1] for k in seen if k[1] >= micro})
        check(not extra, f"stage {stage}: passes of micro-batches {extra[:5]} "
                         f"beyond the {micro} of the step")
        if check(len(optimizer) == 1,
                 f"stage {stage}: {len(optimizer)} optimizer steps"):
            last_pass = max(start[k] for k in seen if k[0] == "B")
            check(optimizer[0]["ts"] > last_pass,
                  f"stage {stage}: the optimizer step runs before the last "
                  f"backward pass")

    for e in errors:
        print("check-trace:", e)
    if errors:
        return 1
    print(f"check-trace: {sum(len(v) for v in events.values())} events on "
          f"{len(stages)} stages, step {step_us:.1f} us: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
