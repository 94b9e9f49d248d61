//===- Html.h - Reports as one self-contained web page ----------*- C++ -*-===//
//
// The pictures of cleave-plan and cleave-estimate: one HTML file with inline
// CSS, SVG and JavaScript (no network, no external fonts) that embeds the
// report's JSON once, in a <script type="application/json"> element, and
// draws it in the browser. The page is a template compiled into this
// library (lib/Report/report.html); the tools write the same JSON with
// --json, so text, JSON and pictures cannot disagree.
//
// The JSON the page draws is the tool's report plus what only pictures need,
// built here: the mesh over the cluster's nodes (which axis runs over NVLink,
// which over InfiniBand, the rank numbering), the pipeline's chunks and
// layers per stage, and the simulated timeline of one step.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_REPORT_HTML_H
#define CLEAVE_REPORT_HTML_H

#include "cleave/CostModel/Estimate.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace cleave::report {

/// The page template compiled into the library.
std::string_view htmlTemplate();

/// `json` made safe inside a <script> element: every '<', '>' and '&' (and
/// U+2028, U+2029) is written as a \u escape, which JSON.parse reads back
/// unchanged; nothing can close the element or open a comment.
std::string escapeForScript(std::string_view json);

/// The page: the template with `data` embedded once and `title` (HTML-
/// escaped) as its title.
std::string renderHtml(const nlohmann::json &data, const std::string &title);

/// The mesh of `plan` over `cluster`'s nodes: the axes in rank order
/// (rank = ((pp_i * dp + dp_i) * cp + cp_i) * tp + tp_i), each with its
/// size, stride in ranks, and link ("nvlink", "infiniband", or "nvlink+
/// infiniband" for an axis whose groups span nodes but share some), and the
/// node size and count.
nlohmann::json meshToJson(const cost::ParallelPlan &plan,
                          const cost::ClusterSpec &cluster);

/// The pipeline of `plan`: for each stage, its model chunks in model order
/// with their transformer layers ([first, last], model-wide indices), and
/// which stage holds the embedding and the output layer.
nlohmann::json pipelineToJson(const ModelConfig &model,
                              const cost::ParallelPlan &plan);

/// The simulated timeline of one step: the rank classes (stage, how many
/// ranks each stands for), the stream names, and every task as
/// [rank, stream, start_s, end_s, label, category, micro-batch].
nlohmann::json timelineToJson(const cost::Program &program,
                              const cost::SimulationResult &result);

/// What the pictures need beyond a report for `plan` estimated as `e`:
/// "mesh", "pipeline" and (when `e` kept its timeline) "timeline".
nlohmann::json picturesToJson(const ModelConfig &model,
                              const cost::ClusterSpec &cluster,
                              const cost::ParallelPlan &plan,
                              const cost::Estimate &e);

/// Writes `html` to `path`; an error names the path.
cost::Result<bool> writeFile(const std::string &path, const std::string &text);

} // namespace cleave::report

#endif // CLEAVE_REPORT_HTML_H
