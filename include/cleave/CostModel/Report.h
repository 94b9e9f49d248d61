//===- Report.h - How every report prints and names costs -------*- C++ -*-===//
//
// cleave-estimate's report, the planner's report (cleave-plan,
// cleave-auto-shard) and their JSON forms share these: the formats of
// durations, sizes and fractions, the parts of a step's time and of a
// device's memory (one snake_case JSON key and one label each), and an
// aligned text table.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_REPORT_H
#define CLEAVE_COSTMODEL_REPORT_H

#include "cleave/CostModel/Memory.h"
#include "cleave/CostModel/Simulator.h"

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace cleave::cost {

/// "1.234 s", "12.35 ms", "80.0 us".
std::string formatSeconds(double seconds);
/// "12.3 GB" (bytes / 1e9, `digits` decimals).
std::string formatGigabytes(double bytes, int digits = 1);
/// "12.3%" of a fraction.
std::string formatPercent(double fraction, int digits = 1);

/// One part of a breakdown: its JSON key (snake_case), its words in text
/// reports, and its value (seconds or bytes).
struct ReportPart {
  std::string key;
  std::string label;
  double value = 0;
};

/// The parts of a rank's step time: forward, backward, weight gradients,
/// recompute, optimizer, exposed communication per mesh axis, pipeline
/// bubble.
std::vector<ReportPart> timeParts(const TimeBreakdown &breakdown);
/// The parts of a device's memory: parameters, gradients, optimizer states,
/// activations, transient, communication buffers, runtime reserved.
std::vector<ReportPart> memoryParts(const MemoryBreakdown &memory);
/// {key: value} of every part.
nlohmann::json partsToJson(const std::vector<ReportPart> &parts);
/// A memory breakdown as JSON: its parts, "total", "capacity",
/// "headroom", "usable" and "fits".
nlohmann::json memoryToJson(const MemoryBreakdown &memory);
/// "76.0 GB usable of 80.0 GB (5% headroom)".
std::string describeUsableMemory(double capacity, double headroom);

/// Rows of cells printed in columns padded to their widest cell.
class TextTable {
public:
  enum class Align { Left, Right };
  /// One alignment per column; `indent` spaces before each row, `gap`
  /// spaces between columns.
  explicit TextTable(std::vector<Align> columns, int indent = 2, int gap = 2);
  /// A row; cells past the last column are dropped, missing ones are empty.
  void addRow(std::vector<std::string> cells);
  void print(std::ostream &os) const;

private:
  std::vector<Align> columns;
  int indent, gap;
  std::vector<std::vector<std::string>> rows;
};

} // namespace cleave::cost

#endif // CLEAVE_COSTMODEL_REPORT_H
