#!/usr/bin/python3
"""Loads a report page of cleave-plan, cleave-estimate or cleave-run in
headless Chromium.

  check-html.py --out DIR --name NAME [--json-stdout] [--self-test]
                [--run-report] -- TOOL ARGS...

Runs TOOL ARGS with --html DIR/NAME.html and its JSON (--json DIR/NAME.json, or
the --json flag's stdout with --json-stdout), or with --run-report, TOOL ARGS
--report DIR/NAME.html (cleave-run; the page's JSON is the data, checked
against the run: one loss and step time per step, every rank in the
timeline), then checks:
  - the page embeds exactly that JSON, once;
  - Chromium loads it from file:// and its script finishes with no error
    (window.onerror, and no console message at all);
  - the drawn SVG elements have the counts the JSON implies: one memory bar per
    plan, one Gantt row per rank class and stream with tasks, one strip per
    pipeline stage, one square per GPU of the mesh (up to 256 nodes), four
    points per scale-study size with a plan, one table row per sharding
    entry; for a run, one loss point and one step-time tick per step, one
    point per validation loss, one timeline row per rank and stream with
    tasks;
  - a screenshot (DIR/NAME.png) is taken.
--self-test also breaks the page (a script that throws) and expects the check
to notice. Exits 77 (skipped) when chromium is not installed.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

SKIP = 77


def fail(message):
    print("check-html: FAIL: " + message)
    sys.exit(1)


def chromium(binary, *args):
    cmd = [binary, "--headless", "--disable-gpu", "--no-sandbox",
           "--no-first-run", "--hide-scrollbars", "--enable-logging=stderr",
           "--v=0"] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def embedded(page):
    found = re.findall(
        r'<script type="application/json" id="cleave-data">(.*?)</script>',
        page, re.S)
    if len(found) != 1:
        fail("expected one embedded data element, found %d" % len(found))
    return json.loads(found[0])


def run_counts(run):
    steps = len(run["losses"])
    if len(run["step_seconds"]) != steps:
        fail("%d losses but %d step times" % (steps, len(run["step_seconds"])))
    ranks = {t[0] for t in run["timeline"]["tasks"]}
    if steps and ranks != set(range(run["ranks"])):
        fail("the timeline has ranks %s, the run %d" % (sorted(ranks),
                                                         run["ranks"]))
    return {"loss-point": steps, "step-tick": steps,
            "val-point": len(run["val_losses"]),
            "run-row": len({(t[0], t[1]) for t in run["timeline"]["tasks"]})}


def expected_counts(data):
    if "run" in data:
        return run_counts(data["run"])
    counts = {}
    if "chosen" in data:
        plans = ([data["chosen"]] if data["chosen"] else []) + \
            data["runners_up"] + data["over_memory"]
        counts["mem-bar"] = sum(1 for p in plans if "memory_bytes" in p)
    else:
        counts["mem-bar"] = 1
    if "timeline" in data:
        counts["gantt-row"] = len({(t[0], t[1])
                                   for t in data["timeline"]["tasks"]})
    if "pipeline" in data:
        counts["stage-strip"] = len(data["pipeline"]["stages"])
        plan = data.get("chosen") or {}
        if "pp" in plan and plan["pp"] != counts["stage-strip"]:
            fail("pipeline has %d stages, the plan pp=%d"
                 % (counts["stage-strip"], plan["pp"]))
    if "mesh" in data:
        m = data["mesh"]
        counts["mesh-gpu"] = min(m["gpus"], 256 * m["gpus_per_node"])
    counts["sharding-row"] = len(data.get("sharding_table", []))
    counts["scale-point"] = 4 * sum(1 for p in data.get("scale", [])
                                    if "plan" in p)
    return counts


def check_page(binary, path, data):
    """Returns a list of problems of the page at `path` in Chromium."""
    r = chromium(binary, "--dump-dom", "file://" + os.path.abspath(path))
    dom = r.stdout
    problems = []
    if r.returncode != 0:
        problems.append("chromium exited with %d: %s" % (r.returncode,
                                                         r.stderr[-2000:]))
    console = [l for l in r.stderr.splitlines() if ":CONSOLE(" in l]
    if console:
        problems.append("console messages:\n  " + "\n  ".join(console))
    if 'data-errors=' in dom:
        m = re.search(r'<div id="errors">(.*?)</div>', dom, re.S)
        problems.append("script errors: " + (m.group(1) if m else "?"))
    if 'data-rendered="yes"' not in dom:
        problems.append("the page's script did not finish (no data-rendered)")
    for cls, want in expected_counts(data).items():
        got = len(re.findall(r'class="%s"' % cls, dom))
        if got != want:
            problems.append("%d elements of class %s, expected %d"
                            % (got, cls, want))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--json-stdout", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--run-report", action="store_true")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    binary = shutil.which("chromium")
    if not binary:
        print("check-html: SKIPPED: chromium is not installed "
              "(scripts/install-deps.sh installs Debian's chromium)")
        return SKIP
    os.makedirs(a.out, exist_ok=True)
    html = os.path.join(a.out, a.name + ".html")
    js = os.path.join(a.out, a.name + ".json")
    png = os.path.join(a.out, a.name + ".png")
    for f in (html, js, png):
        if os.path.exists(f):
            os.remove(f)
    if a.run_report:
        command += ["--report", html]
    else:
        command += ["--html", html] + ([] if a.json_stdout else ["--json", js])
    r = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail("%s exited with %d: %s" % (" ".join(command), r.returncode,
                                        r.stderr))
    page = open(html, encoding="utf-8").read()
    if a.run_report:
        data = embedded(page)
        if "run" not in data:
            fail("the run report's data has no \"run\"")
    else:
        data = json.loads(r.stdout) if a.json_stdout else json.load(open(js))
        if embedded(page) != data:
            fail("the page's data differs from the --json output")
    if re.search(r'(src|href)="(https?:)?//', page):
        fail("the page loads something from the network")
    problems = check_page(binary, html, data)
    if problems:
        fail("\n".join(problems))
    r = chromium(binary, "--window-size=1280,2400", "--screenshot=" + png,
                 "file://" + os.path.abspath(html))
    if not os.path.exists(png) or open(png, "rb").read(8) != b"\x89PNG\r\n\x1a\n":
        fail("no screenshot: " + r.stderr[-2000:])
    if a.self_test:
        broken = os.path.join(a.out, a.name + "-broken.html")
        with open(broken, "w", encoding="utf-8") as f:
            f.write(page.replace('<main id="report"></main>',
                                 '<main id="report"></main><script>'
                                 'cleaveNoSuchFunction();</script>', 1))
        if not check_page(binary, broken, data):
            fail("self-test: a page whose script throws passed the check")
    print("check-html: %s: %s" % (a.name, ", ".join(
        "%d %s" % (n, c) for c, n in expected_counts(data).items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
