//===- RunTrace.cpp - cleave-run --trace: the measured timeline -----------===//

#include "cleave/Execution/Run.h"
#include "cleave/Report/MeasuredTrace.h"
#include "cleave/Runtime/Runtime.h"

#include <cstdio>
#include <fstream>
#include <sstream>

using llvm::Error;

namespace {

Error traceError(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--trace: " + message);
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

} // namespace

Error mlir::cleave::writeMeasuredTrace(
    const std::string &path, int rank, int world,
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
    return traceError("rank " + std::to_string(rank) + ": " + problem);
  if (cleave_rt_failed())
    return traceError(cleave_rt_error_message());
  if (rank != 0)
    return Error::success();
  std::vector<::cleave::report::MeasuredRank> ranks;
  for (int r = 0; r < world; ++r) {
    std::string file = path + ".rank" + std::to_string(r);
    nlohmann::json j = readJson(file);
    if (j.is_discarded() || j.is_null() || !j.contains("steps"))
      return traceError("rank 0 cannot read " + file +
                        " (the ranks must share a file system)");
    ranks.push_back({r, j["steps"], j});
    std::remove(file.c_str());
  }
  std::ofstream out(path);
  out << ::cleave::report::measuredTrace(ranks).dump() << "\n";
  if (!out)
    return traceError("cannot write " + path);
  return Error::success();
}
