//===- RunTrace.cpp - cleave-run --trace: the measured timeline -----------===//

#include "cleave/Execution/Run.h"
#include "cleave/Report/Html.h"
#include "cleave/Report/MeasuredTrace.h"
#include "cleave/Runtime/Runtime.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

using llvm::Error;

namespace {

Error optionError(const char *option, const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 std::string(option) + ": " + message);
}

/// The JSON in `path`, or null when it cannot be read or parsed.
nlohmann::json readJson(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in)
    return nullptr;
  return nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

using ::cleave::report::MeasuredRank;

/// Every rank's steps and flight recorder, on rank 0 (the others get none):
/// each rank writes `path`.rank<R>, and after a barrier rank 0 reads and
/// removes them. Errors name `option`.
llvm::Expected<std::vector<MeasuredRank>>
gatherMeasured(const char *option, const std::string &path, int rank, int world,
               const std::vector<std::pair<double, double>> &steps) {
  // Every rank reaches the barrier, even when its part failed: the others
  // wait there.
  std::string part = path + ".rank" + std::to_string(rank), problem;
  nlohmann::json mine;
  if (cleave_rt_flight_recorder_dump(part.c_str()) != 0)
    problem = cleave_rt_error_message();
  else if (mine = readJson(part); mine.is_discarded() || mine.is_null())
    problem = "cannot read back " + part;
  else if (mine["steps"] = steps; !(std::ofstream(part) << mine.dump()))
    problem = "cannot write " + part;
  if (world > 1)
    cleave_rt_barrier(CLEAVE_WORLD_GROUP);
  if (!problem.empty())
    return optionError(option, "rank " + std::to_string(rank) + ": " + problem);
  if (cleave_rt_failed())
    return optionError(option, cleave_rt_error_message());
  std::vector<MeasuredRank> ranks;
  if (rank != 0)
    return ranks;
  for (int r = 0; r < world; ++r) {
    std::string file = path + ".rank" + std::to_string(r);
    nlohmann::json j = readJson(file);
    if (j.is_discarded() || j.is_null() || !j.contains("steps"))
      return optionError(option, "rank 0 cannot read " + file +
                                     " (the ranks must share a file system)");
    ranks.push_back({r, j["steps"], j});
    std::remove(file.c_str());
  }
  return ranks;
}

/// For each group of `manifest`, the lowest rank of `rank`'s instance of
/// it: the rank with `rank`'s coordinates off the group's axes and 0 on
/// them.
std::map<int64_t, int64_t> groupLeaders(const mlir::cleave::ProgramManifest &m,
                                        int rank) {
  std::map<int64_t, int64_t> out;
  if (!m.mesh)
    return out;
  for (size_t id = 0; id < m.groups.size(); ++id) {
    std::vector<int64_t> c = m.mesh->coordinates(rank);
    for (int64_t axis : m.groups[id])
      c[size_t(axis)] = 0;
    int64_t leader = 0;
    for (size_t i = 0; i < c.size(); ++i)
      leader = leader * m.mesh->shape[i] + c[i];
    out[int64_t(id)] = leader;
  }
  return out;
}

/// Steps of the run report's timeline: enough to see a step's pattern and
/// its variation, few enough for a light page.
constexpr size_t kTimelineSteps = 3;

} // namespace

Error mlir::cleave::writeMeasuredTrace(
    const std::string &path, int rank, int world,
    const std::vector<std::pair<double, double>> &steps) {
  auto ranks = gatherMeasured("--trace", path, rank, world, steps);
  if (!ranks)
    return ranks.takeError();
  if (rank != 0)
    return Error::success();
  std::ofstream out(path);
  out << ::cleave::report::measuredTrace(*ranks).dump() << "\n";
  if (!out)
    return optionError("--trace", "cannot write " + path);
  return Error::success();
}

Error mlir::cleave::writeRunReport(
    const std::string &path, int rank, int world,
    const std::vector<std::pair<double, double>> &steps,
    const RunRecord &record, const RunOptions &options,
    const ProgramManifest &manifest) {
  auto ranks = gatherMeasured("--report", path, rank, world, steps);
  if (!ranks)
    return ranks.takeError();
  if (rank != 0)
    return Error::success();
  for (MeasuredRank &r : *ranks)
    r.groupInstance = groupLeaders(manifest, r.rank);
  nlohmann::json run = {{"title", options.title},
                        {"ranks", world},
                        {"plan", options.planText},
                        {"first_step", record.firstStep},
                        {"tokens_per_step", options.tokensPerStep},
                        {"losses", record.losses},
                        {"step_seconds", record.stepSeconds},
                        {"val_losses", record.valLosses},
                        {"val_steps", record.valSteps}};
  if (options.prediction)
    run["prediction"] = {{"step_seconds", options.prediction->stepSeconds},
                         {"mfu", options.prediction->mfu},
                         {"source", options.prediction->source}};
  run["timeline"] = ::cleave::report::measuredTimeline(*ranks, kTimelineSteps);
  std::string title = "cleave-run: " + options.title;
  if (::cleave::cost::Result<bool> w = ::cleave::report::writeFile(
          path, ::cleave::report::renderHtml({{"run", run}}, title));
      !w)
    return optionError("--report", w.error());
  return Error::success();
}
