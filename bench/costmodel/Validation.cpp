//===- Validation.cpp - Out-of-sample checks of the cost model ------------===//
//
// Every row is estimated once per setting of the fitted parameters that
// affects it; every fit (all rows, or all rows but one source's) then picks
// the setting with the least mean absolute error from that table, so the
// model and the two null models are fitted by the same procedure on the
// same rows. The JSON (--validation-json) holds the table, the null
// models' per-row forms and every fit, so that
// bench/costmodel/check-validation.py can redo the fits independently.
//
//===----------------------------------------------------------------------===//

#include "Validation.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

using nlohmann::json;

namespace cleave::bench {
namespace {

using cost::ClusterSpec;
using cost::CostConstants;
using cost::Estimate;

enum Method { Model, ConstantMfu, ConstantExecuted, NumMethods };
const char *const kMethodKeys[NumMethods] = {"model", "constant_mfu",
                                             "constant_executed"};

/// A null model's prediction of a row from its one fraction f: `scale * f`
/// for a throughput (TFLOP/s, MFU), `scale / f` for a step time.
struct NullForm {
  double scale = 0;
  bool inverse = false;
  double predict(double f) const { return inverse ? scale / f : scale * f; }
};

struct RowData {
  const PublishedRun *run = nullptr;
  std::string family, quantity;
  double measured = 0;
  /// The model's prediction under every candidate setting.
  std::vector<double> predicted;
  NullForm nulls[NumMethods];
};

/// A fitted method: the model's candidate, or a null model's fraction.
struct Fit {
  size_t candidate = 0;
  double fraction = 0;
};

struct Grid {
  double min, max, step;
  size_t size() const { return size_t(std::llround((max - min) / step)) + 1; }
  double at(size_t i) const { return min + double(i) * step; }
};

double predict(Method m, const Fit &f, const RowData &r) {
  return m == Model ? r.predicted[f.candidate] : r.nulls[m].predict(f.fraction);
}

double relError(Method m, const Fit &f, const RowData &r) {
  return predict(m, f, r) / r.measured - 1;
}

double meanAbs(Method m, const Fit &f, const std::vector<RowData> &rows,
               const std::vector<size_t> &subset) {
  double sum = 0;
  for (size_t i : subset)
    sum += std::fabs(relError(m, f, rows[i]));
  return sum / double(std::max<size_t>(subset.size(), 1));
}

/// The setting with the least MAE on `subset` (the first one on ties).
Fit fitMethod(Method m, const std::vector<RowData> &rows,
              const std::vector<size_t> &subset, size_t candidates,
              const Grid &grid) {
  Fit best;
  double bestMae = INFINITY;
  size_t n = m == Model ? candidates : grid.size();
  for (size_t i = 0; i < n; ++i) {
    Fit f;
    if (m == Model)
      f.candidate = i;
    else
      f.fraction = grid.at(i);
    double mae = meanAbs(m, f, rows, subset);
    if (mae < bestMae) {
      bestMae = mae;
      best = f;
    }
  }
  return best;
}

/// Every combination of the parameters' values, the first parameter
/// slowest.
std::vector<std::vector<double>>
candidatesOf(const std::vector<FitParameter> &params) {
  std::vector<std::vector<double>> out{{}};
  for (const FitParameter &p : params) {
    std::vector<std::vector<double>> next;
    for (const std::vector<double> &c : out)
      for (double v : p.values) {
        next.push_back(c);
        next.back().push_back(v);
      }
    out = std::move(next);
  }
  return out;
}

/// The row's quantity as a null model predicts it: with a constant
/// fraction f of peak on `baseFlops` per step, step = baseFlops / (f peak
/// GPUs).
NullForm nullForm(const PublishedRun &run, const Estimate &e,
                  double baseFlops) {
  double peakAll = e.peakFlopsPerGpu * e.numGpus;
  if (run.stepTime)
    return {baseFlops / peakAll, true};
  if (run.tflopsPerGpu)
    return {rowFlopsPerStep(run, e) / baseFlops * e.peakFlopsPerGpu / 1e12,
            false};
  return {e.modelFlops / baseFlops, false};
}

/// Estimates `run` under every candidate (once per distinct setting that
/// affects it).
cost::Result<RowData>
estimateRow(const PublishedRun &run, const std::vector<FitParameter> &params,
            const std::vector<std::vector<double>> &candidates,
            const CostConstants &base, const ClusterFn &clusterFor) {
  using R = cost::Result<RowData>;
  std::string where = "row " + std::to_string(run.row) + ": ";
  cost::Result<ClusterSpec> cluster = clusterFor(run);
  if (!cluster)
    return R::failure(where + cluster.error());
  RowData d;
  d.run = &run;
  d.family = toString(run.model.arch);
  std::map<std::vector<double>, double> memo;
  for (const std::vector<double> &cand : candidates) {
    CostConstants c = base;
    ClusterSpec cl = *cluster;
    std::vector<double> key;
    for (size_t i = 0; i < params.size(); ++i)
      key.push_back(params[i].apply(cand[i], c, cl) ? cand[i] : NAN);
    auto it = memo.find(key);
    if (it != memo.end()) {
      d.predicted.push_back(it->second);
      continue;
    }
    cost::EstimateOptions eo;
    eo.constants = &c;
    cost::Result<Estimate> e = cost::estimate(run.model, cl, run.plan, eo);
    if (!e)
      return R::failure(where + e.error());
    Comparison cmp = compare(run, *e);
    d.quantity = cmp.what;
    d.measured = cmp.measured;
    d.predicted.push_back(cmp.predicted);
    memo[key] = cmp.predicted;
    if (d.predicted.size() == 1) {
      d.nulls[ConstantMfu] = nullForm(run, *e, e->modelFlops);
      d.nulls[ConstantExecuted] = nullForm(run, *e, e->hardwareFlops);
    }
  }
  return d;
}

struct Stats {
  double mae = 0, max = 0;
  size_t n = 0;
};

Stats statsOf(const std::vector<double> &errs) {
  Stats s;
  for (double e : errs) {
    s.mae += std::fabs(e);
    s.max = std::max(s.max, std::fabs(e));
  }
  s.n = errs.size();
  s.mae /= double(std::max<size_t>(s.n, 1));
  return s;
}

/// Everything the report prints and the JSON holds.
struct Validation {
  std::vector<FitParameter> params;
  std::vector<std::vector<double>> candidates;
  Grid grid{};
  std::vector<RowData> rows;
  Fit inSample[NumMethods];
  /// Held-out sources in order of first appearance, their rows, the fits
  /// on the other rows.
  std::vector<Source> sources;
  std::vector<std::vector<size_t>> sourceRows;
  std::vector<std::array<Fit, NumMethods>> folds;
  /// Per row and method: the in-sample and the LOSO prediction.
  std::vector<std::array<double, NumMethods>> inSamplePred, losoPred;
  std::vector<std::pair<size_t, size_t>> pairs;
};

std::vector<double>
rowErrors(const Validation &v,
          const std::vector<std::array<double, NumMethods>> &pred, Method m) {
  std::vector<double> errs;
  for (size_t i = 0; i < v.rows.size(); ++i)
    errs.push_back(pred[i][m] / v.rows[i].measured - 1);
  return errs;
}

std::vector<double>
ratioErrors(const Validation &v,
            const std::vector<std::array<double, NumMethods>> &pred, Method m) {
  std::vector<double> errs;
  for (auto [i, j] : v.pairs)
    errs.push_back((pred[i][m] / pred[j][m]) /
                       (v.rows[i].measured / v.rows[j].measured) -
                   1);
  return errs;
}

void computeFits(Validation &v) {
  size_t n = v.rows.size(), nc = v.candidates.size();
  std::vector<size_t> all;
  for (size_t i = 0; i < n; ++i) {
    all.push_back(i);
    Source s = v.rows[i].run->source;
    auto it = std::find(v.sources.begin(), v.sources.end(), s);
    if (it == v.sources.end()) {
      v.sources.push_back(s);
      v.sourceRows.emplace_back();
      it = v.sources.end() - 1;
    }
    v.sourceRows[size_t(it - v.sources.begin())].push_back(i);
  }
  v.inSamplePred.assign(n, {});
  v.losoPred.assign(n, {});
  for (int m = 0; m < NumMethods; ++m) {
    v.inSample[m] = fitMethod(Method(m), v.rows, all, nc, v.grid);
    for (size_t i = 0; i < n; ++i)
      v.inSamplePred[i][m] = predict(Method(m), v.inSample[m], v.rows[i]);
  }
  for (size_t s = 0; s < v.sources.size(); ++s) {
    std::vector<size_t> train;
    for (size_t i = 0; i < n; ++i)
      if (v.rows[i].run->source != v.sources[s])
        train.push_back(i);
    std::array<Fit, NumMethods> fold;
    for (int m = 0; m < NumMethods; ++m) {
      fold[m] = fitMethod(Method(m), v.rows, train, nc, v.grid);
      for (size_t i : v.sourceRows[s])
        v.losoPred[i][m] = predict(Method(m), fold[m], v.rows[i]);
    }
    v.folds.push_back(fold);
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if (v.rows[i].run->source == v.rows[j].run->source &&
          v.rows[i].family == v.rows[j].family)
        v.pairs.emplace_back(i, j);
}

std::string describeCandidate(const Validation &v, size_t c) {
  std::string s;
  for (size_t i = 0; i < v.params.size(); ++i) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s%s %g", i ? ", " : "",
                  v.params[i].name.c_str(), v.candidates[c][i]);
    s += buf;
  }
  return s;
}

void printFolds(const Validation &v) {
  std::printf("\nLeave one source out: fitted on the other sources, "
              "predicting the held-out one\n");
  std::printf("%-11s %4s  %-50s %6s %6s   %-13s %-13s %-13s\n", "held out",
              "rows", "model fit on the others", "MFU", "exec", "model MAE/max",
              "MFU MAE/max", "exec MAE/max");
  for (size_t s = 0; s < v.sources.size(); ++s) {
    const std::array<Fit, NumMethods> &f = v.folds[s];
    std::printf("%-11s %4zu  %-50s %6.3f %6.3f  ", shortName(v.sources[s]),
                v.sourceRows[s].size(),
                describeCandidate(v, f[Model].candidate).c_str(),
                f[ConstantMfu].fraction, f[ConstantExecuted].fraction);
    for (int m = 0; m < NumMethods; ++m) {
      std::vector<double> errs;
      for (size_t i : v.sourceRows[s])
        errs.push_back(v.losoPred[i][m] / v.rows[i].measured - 1);
      Stats st = statsOf(errs);
      std::printf(" %5.1f%% %5.1f%%", 100 * st.mae, 100 * st.max);
    }
    std::printf("\n");
  }
  std::printf("\nRatio MAE by source (pairs of one source and model family, "
              "LOSO predictions)\n%-11s %5s %8s %10s %11s\n",
              "source", "pairs", "model", "const MFU", "const exec");
  for (size_t s = 0; s < v.sources.size(); ++s) {
    size_t n = 0;
    double sum[NumMethods] = {0, 0, 0};
    for (auto [i, j] : v.pairs) {
      if (v.rows[i].run->source != v.sources[s])
        continue;
      ++n;
      for (int m = 0; m < NumMethods; ++m)
        sum[m] += std::fabs((v.losoPred[i][m] / v.losoPred[j][m]) /
                                (v.rows[i].measured / v.rows[j].measured) -
                            1);
    }
    std::printf("%-11s %5zu", shortName(v.sources[s]), n);
    for (int m = 0; m < NumMethods; ++m)
      std::printf(" %9.1f%%", n ? 100 * sum[m] / double(n) : 0.0);
    std::printf("\n");
  }
  std::printf("\n%-3s %-11s %-6s %-8s %9s   %-17s %-17s %-17s\n", "row",
              "source", "model", "quantity", "measured", "model (LOSO)",
              "const MFU (LOSO)", "const exec (LOSO)");
  for (size_t i = 0; i < v.rows.size(); ++i) {
    const RowData &r = v.rows[i];
    std::printf("%-3zu %-11s %-6s %-8s %9.3f  ", r.run->row,
                shortName(r.run->source), r.run->model.name.c_str(),
                r.quantity.c_str(), r.measured);
    for (int m = 0; m < NumMethods; ++m)
      std::printf(" %9.3f %+6.1f%%", v.losoPred[i][m],
                  100 * (v.losoPred[i][m] / r.measured - 1));
    std::printf("\n");
  }
}

struct Target {
  const char *key, *title;
  Stats values[NumMethods];
  double limit;
  bool halfNull;
  double bound() const {
    double b = limit;
    if (halfNull)
      b = std::min(b, 0.5 * std::min(values[ConstantMfu].mae,
                                     values[ConstantExecuted].mae));
    return b;
  }
};

std::vector<Target> targetsOf(const Validation &v) {
  auto stats = [&](const std::vector<std::array<double, NumMethods>> &pred,
                   bool ratio, bool useMax) {
    std::array<Stats, NumMethods> out;
    for (int m = 0; m < NumMethods; ++m) {
      Stats s = statsOf(ratio ? ratioErrors(v, pred, Method(m))
                              : rowErrors(v, pred, Method(m)));
      if (useMax)
        s.mae = s.max; // The target reads the largest error.
      out[m] = s;
    }
    return out;
  };
  std::vector<Target> t = {
      {"in_sample_mae", "in-sample MAE", {}, 0.06, false},
      {"loso_mae", "LOSO MAE", {}, 0.10, true},
      {"loso_max", "LOSO max", {}, 0.25, true},
      {"ratio_mae", "ratio MAE (LOSO)", {}, 0.05, true},
      {"ratio_mae_in_sample", "ratio MAE (in-sample)", {}, INFINITY, false},
  };
  auto set = [](Target &tg, std::array<Stats, NumMethods> s) {
    std::copy(s.begin(), s.end(), tg.values);
  };
  set(t[0], stats(v.inSamplePred, false, false));
  set(t[1], stats(v.losoPred, false, false));
  set(t[2], stats(v.losoPred, false, true));
  set(t[3], stats(v.losoPred, true, false));
  set(t[4], stats(v.inSamplePred, true, false));
  return t;
}

void printSummary(const Validation &v, const std::vector<Target> &targets) {
  std::printf("\nRatio pairs: %zu (rows of one source and one model family)\n",
              v.pairs.size());
  std::printf("\n%-22s %8s %10s %11s   %s\n", "summary", "model", "const MFU",
              "const exec", "target");
  for (const Target &t : targets) {
    std::printf("%-22s %7.1f%% %9.1f%% %10.1f%%   ", t.title,
                100 * t.values[Model].mae, 100 * t.values[ConstantMfu].mae,
                100 * t.values[ConstantExecuted].mae);
    if (!std::isfinite(t.limit)) {
      std::printf("(for reference)\n");
      continue;
    }
    bool met = t.values[Model].mae <= t.bound();
    std::printf("<= %.0f%%%s: %s\n", 100 * t.limit,
                t.halfNull ? " and <= half the better null" : "",
                met ? "met" : "NOT met");
  }
}

json toJson(const Validation &v, const std::vector<Target> &targets) {
  json j;
  for (const FitParameter &p : v.params)
    j["parameters"].push_back({{"name", p.name}, {"values", p.values}});
  j["candidates"] = v.candidates;
  j["null_grid"] = {{"min", v.grid.min},
                    {"max", v.grid.max},
                    {"step", v.grid.step},
                    {"size", v.grid.size()}};
  auto fitJson = [](Method m, const Fit &f) {
    return m == Model ? json{{"candidate", f.candidate}}
                      : json{{"fraction", f.fraction}};
  };
  for (size_t i = 0; i < v.rows.size(); ++i) {
    const RowData &r = v.rows[i];
    json row = {{"row", r.run->row},      {"source", shortName(r.run->source)},
                {"family", r.family},     {"quantity", r.quantity},
                {"measured", r.measured}, {"predicted", r.predicted}};
    for (int m = ConstantMfu; m < NumMethods; ++m)
      row["nulls"][kMethodKeys[m]] = {{"scale", r.nulls[m].scale},
                                      {"inverse", r.nulls[m].inverse}};
    for (int m = 0; m < NumMethods; ++m) {
      row["in_sample"][kMethodKeys[m]] = v.inSamplePred[i][m];
      row["loso"][kMethodKeys[m]] = v.losoPred[i][m];
    }
    j["rows"].push_back(row);
  }
  for (int m = 0; m < NumMethods; ++m)
    j["in_sample_fit"][kMethodKeys[m]] = fitJson(Method(m), v.inSample[m]);
  for (size_t s = 0; s < v.sources.size(); ++s) {
    json fold = {{"source", shortName(v.sources[s])},
                 {"rows", v.sourceRows[s]}};
    for (int m = 0; m < NumMethods; ++m)
      fold[kMethodKeys[m]] = fitJson(Method(m), v.folds[s][m]);
    j["folds"].push_back(fold);
  }
  j["pairs"] = v.pairs;
  for (const Target &t : targets) {
    json tj;
    for (int m = 0; m < NumMethods; ++m)
      tj[kMethodKeys[m]] = t.values[m].mae;
    if (std::isfinite(t.limit)) {
      tj["limit"] = t.limit;
      tj["half_of_better_null"] = t.halfNull;
      tj["met"] = t.values[Model].mae <= t.bound();
    }
    j["summary"][t.key] = tj;
  }
  return j;
}

} // namespace

std::vector<FitParameter> fittedParameters(bool quick) {
  std::vector<double> gemm;
  for (double e = 0.60; e <= 0.8501; e += quick ? 0.1 : 0.01)
    gemm.push_back(std::round(e * 100) / 100);
  return {
      {"a100 gemm_efficiency", gemm,
       [](double v, CostConstants &, ClusterSpec &cl) {
         if (cl.gpu.name.rfind("a100", 0) != 0)
           return false;
         cl.gpu.gemmEfficiency = v;
         return true;
       }},
      {"ring_rail_aggregation",
       {0, 1},
       [](double v, CostConstants &c, ClusterSpec &) {
         c.ringRailAggregation = v != 0;
         return true;
       }},
  };
}

bool runValidation(const std::vector<PublishedRun> &runs,
                   const ValidationOptions &options) {
  Validation v;
  v.params = fittedParameters(options.quick);
  v.candidates = candidatesOf(v.params);
  v.grid = options.quick ? Grid{0.01, 1.0, 0.005} : Grid{0.005, 1.0, 0.0005};
  for (const PublishedRun &run : runs) {
    cost::Result<RowData> r =
        estimateRow(run, v.params, v.candidates, options.base,
                    options.cluster ? options.cluster : clusterOf);
    if (!r) {
      std::fprintf(stderr, "validation: %s\n", r.error().c_str());
      return false;
    }
    v.rows.push_back(std::move(*r));
  }
  computeFits(v);
  std::vector<Target> targets = targetsOf(v);
  std::printf("\n== Validation: fitted ");
  for (const FitParameter &p : v.params)
    std::printf("%s over %zu values; ", p.name.c_str(), p.values.size());
  std::printf("null models over a fraction of peak in [%g, %g] step %g\n",
              v.grid.min, v.grid.max, v.grid.step);
  std::printf("In-sample fit: %s; constant MFU %.4f; constant executed "
              "fraction %.4f\n",
              describeCandidate(v, v.inSample[Model].candidate).c_str(),
              v.inSample[ConstantMfu].fraction,
              v.inSample[ConstantExecuted].fraction);
  printFolds(v);
  printSummary(v, targets);
  if (!options.jsonPath.empty()) {
    std::ofstream out(options.jsonPath);
    out << toJson(v, targets).dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "%s: cannot write the validation JSON\n",
                   options.jsonPath.c_str());
      return false;
    }
  }
  return true;
}

} // namespace cleave::bench
