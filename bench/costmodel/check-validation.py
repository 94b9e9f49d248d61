#!/usr/bin/env python3
"""Runs the calibration bench's validation in quick mode and redoes it.

Usage: check-validation.py BENCH JSON_OUT

From the JSON the bench writes (--validation-json), this script refits the
model (over the table of predictions per candidate setting) and the two
null models (over the fraction grid) on every subset the bench fits:
all rows, and all rows but one source's. It checks that each fit the bench
chose is a least-MAE one, that every row is held out exactly once with its
own source, that the predictions, ratio pairs, summary errors and target
verdicts follow from them, and that the text report prints the same
summary. It checks the structure and the arithmetic, not the numbers'
size: the targets are the bench's to report.
"""

import itertools
import json
import math
import re
import subprocess
import sys

METHODS = ["model", "constant_mfu", "constant_executed"]
TOL = 1e-9


def fail(msg):
    print("check-validation: " + msg, file=sys.stderr)
    sys.exit(1)


def close(a, b, what):
    if not math.isclose(a, b, rel_tol=TOL, abs_tol=TOL):
        fail(f"{what}: {a!r} != {b!r}")


def null_predict(form, f):
    return form["scale"] / f if form["inverse"] else form["scale"] * f


def predict(row, method, fit):
    if method == "model":
        return row["predicted"][fit["candidate"]]
    return null_predict(row["nulls"][method], fit["fraction"])


def mae(rows, subset, method, fit):
    return sum(abs(predict(rows[i], method, fit) / rows[i]["measured"] - 1)
               for i in subset) / max(len(subset), 1)


def best_mae(rows, subset, method, data):
    if method == "model":
        fits = [{"candidate": c} for c in range(len(data["candidates"]))]
    else:
        g = data["null_grid"]
        fits = [{"fraction": g["min"] + i * g["step"]}
                for i in range(g["size"])]
    return min(mae(rows, subset, method, f) for f in fits)


def check_fit(rows, subset, method, fit, data, what):
    got = mae(rows, subset, method, fit)
    best = best_mae(rows, subset, method, data)
    if got > best * (1 + TOL) + TOL:
        fail(f"{what}: the {method} fit has MAE {got} on its rows, but "
             f"{best} is reachable")


def stats(errs):
    a = [abs(e) for e in errs]
    return sum(a) / max(len(a), 1), max(a, default=0.0)


def main():
    bench, out = sys.argv[1], sys.argv[2]
    proc = subprocess.run([bench, "--quick", "--validation-json", out],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"the bench failed ({proc.returncode}): {proc.stderr}")
    with open(out) as f:
        data = json.load(f)
    rows = data["rows"]
    if len(rows) < 2:
        fail("fewer than two rows")

    # The candidates are every combination of the parameters' values.
    product = [list(c) for c in itertools.product(
        *[p["values"] for p in data["parameters"]])]
    if product != data["candidates"]:
        fail("candidates are not the product of the parameters' values")
    for r in rows:
        if not r["measured"] > 0:
            fail(f"row {r['row']}: measured {r['measured']}")
        if len(r["predicted"]) != len(product):
            fail(f"row {r['row']}: {len(r['predicted'])} predictions for "
                 f"{len(product)} candidates")
        if not all(p > 0 and math.isfinite(p) for p in r["predicted"]):
            fail(f"row {r['row']}: a prediction is not a positive number")

    # In-sample: fitted on all rows, predicting all rows.
    everything = list(range(len(rows)))
    for m in METHODS:
        fit = data["in_sample_fit"][m]
        check_fit(rows, everything, m, fit, data, "in-sample")
        for r in rows:
            close(r["in_sample"][m], predict(r, m, fit),
                  f"row {r['row']} in-sample {m}")

    # Leave one source out: every row held out once, with its own source.
    held = []
    for fold in data["folds"]:
        idx = fold["rows"]
        if any(rows[i]["source"] != fold["source"] for i in idx):
            fail(f"fold {fold['source']} holds out a row of another source")
        if len(idx) != sum(r["source"] == fold["source"] for r in rows):
            fail(f"fold {fold['source']} misses some of its source's rows")
        train = [i for i in everything if i not in idx]
        for m in METHODS:
            check_fit(rows, train, m, fold[m], data, f"fold {fold['source']}")
            for i in idx:
                close(rows[i]["loso"][m], predict(rows[i], m, fold[m]),
                      f"row {rows[i]['row']} LOSO {m}")
        held += idx
    if sorted(held) != everything:
        fail("the folds do not hold out every row exactly once")

    # Ratio pairs: every pair of rows of one source and one family.
    pairs = [[i, j] for i, j in itertools.combinations(everything, 2)
             if rows[i]["source"] == rows[j]["source"]
             and rows[i]["family"] == rows[j]["family"]]
    if pairs != data["pairs"]:
        fail("the ratio pairs are not the same-source, same-family pairs")

    def errors(which, ratio, m):
        if ratio:
            return [(rows[i][which][m] / rows[j][which][m]) /
                    (rows[i]["measured"] / rows[j]["measured"]) - 1
                    for i, j in pairs]
        return [r[which][m] / r["measured"] - 1 for r in rows]

    expect = {
        "in_sample_mae": lambda m: stats(errors("in_sample", False, m))[0],
        "loso_mae": lambda m: stats(errors("loso", False, m))[0],
        "loso_max": lambda m: stats(errors("loso", False, m))[1],
        "ratio_mae": lambda m: stats(errors("loso", True, m))[0],
        "ratio_mae_in_sample": lambda m: stats(errors("in_sample", True, m))[0],
    }
    summary = data["summary"]
    if sorted(summary) != sorted(expect):
        fail(f"summary keys {sorted(summary)}")
    for key, fn in expect.items():
        s = summary[key]
        for m in METHODS:
            close(s[m], fn(m), f"summary {key} {m}")
        if any(s[m] < 0 for m in METHODS):
            fail(f"summary {key}: a negative mean absolute error")
        if "limit" in s:
            bound = s["limit"]
            if s["half_of_better_null"]:
                bound = min(bound, 0.5 * min(s["constant_mfu"],
                                             s["constant_executed"]))
            if s["met"] != (s["model"] <= bound):
                fail(f"summary {key}: verdict {s['met']} for "
                     f"{s['model']} against {bound}")
    if summary["loso_max"]["model"] < summary["loso_mae"]["model"]:
        fail("the LOSO max is below the LOSO MAE")

    # The text report prints the same summary.
    titles = {"in_sample_mae": "in-sample MAE", "loso_mae": "LOSO MAE",
              "loso_max": "LOSO max", "ratio_mae": r"ratio MAE \(LOSO\)"}
    for key, title in titles.items():
        line = re.search(r"^" + title + r" +([0-9.]+)% +([0-9.]+)% +"
                         r"([0-9.]+)% +(.*)$", proc.stdout, re.M)
        if not line:
            fail(f"the report has no '{title}' summary line")
        for k, m in enumerate(METHODS):
            printed = float(line.group(k + 1))
            if abs(printed - 100 * summary[key][m]) > 0.051:
                fail(f"'{title}' prints {printed}% for {m}, the JSON has "
                     f"{100 * summary[key][m]:.3f}%")
        verdict = "met" if summary[key]["met"] else "NOT met"
        if not line.group(4).endswith(": " + verdict):
            fail(f"'{title}' prints '{line.group(4)}', expected {verdict}")
    print(f"validation checked: {len(rows)} rows, {len(data['folds'])} "
          f"folds, {len(pairs)} ratio pairs, {len(product)} candidates")


if __name__ == "__main__":
    main()
