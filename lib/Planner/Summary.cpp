//===- Summary.cpp - The intra-op part of the planner's report ------------===//

#include "cleave/CostModel/Report.h"
#include "cleave/Planner/AutoShard.h"
#include "cleave/Planner/Explain.h"

#include "Strategies.h"

#include <iomanip>
#include <sstream>

using namespace mlir;

namespace cleave::planner {

namespace {

/// "h.0.attn" and "h.1.attn" -> "h.*.attn".
std::string pattern(const std::string &a, const std::string &b) {
  if (a == b || b.empty())
    return a;
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre])
    ++pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre &&
         a[a.size() - 1 - suf] == b[b.size() - 1 - suf])
    ++suf;
  return a.substr(0, pre) + "*" + a.substr(a.size() - suf);
}

std::string locName(Operation *op) {
  if (auto n = dyn_cast<NameLoc>(op->getLoc()))
    return n.getName().str();
  return "";
}

std::string shapeOf(Type t) {
  std::ostringstream os;
  os << "[";
  if (auto r = dyn_cast<RankedTensorType>(t))
    for (int64_t i = 0; i < r.getRank(); ++i)
      os << (i ? ", " : "") << r.getDimSize(i);
  os << "]";
  return os.str();
}

/// The solution deciding node `n`: the first stage for nodes before the
/// block, the last for nodes after it, the stage with the most layers for
/// the block.
const std::vector<int> &choiceFor(const Node &n,
                                  const std::vector<StageSolution> &stages) {
  const StageSolution *pick = &stages.front();
  for (const StageSolution &s : stages) {
    if (n.region == Region::Before && s.first)
      return s.ilp.choice;
    if (n.region == Region::After && s.last)
      pick = &s;
    if (n.region == Region::Block && s.layers > pick->layers)
      pick = &s;
  }
  return pick->ilp.choice;
}

std::string paramName(const ShardingGraph &g, int node) {
  const Node &n = g.nodes[size_t(node)];
  func::FuncOp f = g.view.func;
  auto nameOf = [&](BlockArgument a) {
    auto s = f.getArgAttrOfType<StringAttr>(
        a.getArgNumber(), mlir::cleave::CleaveDialect::kParamAttrName);
    return s ? s.getValue().str() : "%arg" + std::to_string(a.getArgNumber());
  };
  return pattern(nameOf(n.arg), n.secondArg ? nameOf(n.secondArg) : "");
}

std::string opName(const ShardingGraph &g, const Node &n) {
  std::string name = locName(n.op), other;
  if (n.region == Region::Block && g.view.count > 1) {
    int slot = g.view.slotOf(g.view.position.lookup(n.op));
    other = locName(g.view.at(1, slot));
  }
  std::string where = pattern(name, other);
  return (where.empty() ? "" : where + " ") +
         n.op->getName().getStringRef().str();
}

/// How many layers node `n` stands for (1 outside the repeated block).
int64_t count(const Node &n, const ShardingGraph &g) {
  return n.region == Region::Block && g.view.count > 1 ? g.view.count : 1;
}

std::string times(const Node &n, const ShardingGraph &g) {
  return count(n, g) > 1 ? " x" + std::to_string(count(n, g)) : "";
}

} // namespace

std::vector<std::string> summarize(const ShardingGraph &g,
                                   const std::vector<StageSolution> &stages,
                                   nlohmann::json *table) {
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> out;
  if (stages.empty() || stages.front().ilp.choice.empty())
    return out;
  out.push_back("parameters");
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node &n = g.nodes[i];
    if (n.kind != NodeKind::Parameter)
      continue;
    const Strategy &s = n.strategies[size_t(choiceFor(n, stages)[i])];
    std::string name = paramName(g, int(i)), shape = shapeOf(n.arg.getType()),
                layout = formatLayout(s.results[0], g.axes);
    std::ostringstream os;
    os << "  " << std::left << std::setw(34) << name << " " << std::setw(14)
       << shape << " " << layout << times(n, g);
    out.push_back(os.str());
    rows.push_back({{"kind", "parameter"},
                    {"name", name},
                    {"shape", shape},
                    {"layout", layout},
                    {"layers", count(n, g)}});
  }
  out.push_back("layout changes (forward collectives; backward collectives)");
  size_t before = out.size();
  for (const Edge &e : g.edges) {
    const Node &from = g.nodes[size_t(e.from)], &to = g.nodes[size_t(e.to)];
    if (to.kind != NodeKind::Op)
      continue;
    const Strategy &p =
        from.strategies[size_t(choiceFor(from, stages)[size_t(e.from)])];
    const Strategy &c =
        to.strategies[size_t(choiceFor(to, stages)[size_t(e.to)])];
    const Layout &l = p.results[e.result], &want = c.operands[e.operand];
    Layout grad = want, back = l;
    grad.partial = c.gradPartial[e.operand];
    if (from.kind == NodeKind::Parameter)
      for (size_t a = 0; a < g.axes.size(); ++a)
        if (g.axes[a].batch)
          grad.partial &= uint8_t(~(1u << a)); // the plan's DP reduction
    back.partial = 0;
    std::string fwd = detail::describeReshard(l, want, g.axes);
    std::string bwd =
        e.gradient ? detail::describeReshard(grad, back, g.axes) : "";
    if (fwd.empty() && bwd.empty())
      continue;
    std::string src =
        from.kind == NodeKind::Op ? opName(g, from) : paramName(g, e.from);
    std::string dst = opName(g, to), had = formatLayout(l, g.axes),
                into = formatLayout(want, g.axes);
    std::ostringstream os;
    os << "  " << src << " -> " << dst << " #" << e.operand << ": " << had
       << " -> " << into << ": " << (fwd.empty() ? "-" : fwd) << "; "
       << (bwd.empty() ? "-" : bwd)
       << (e.kind == EdgeKind::Entry ? "" : times(to, g));
    out.push_back(os.str());
    rows.push_back({{"kind", "reshard"},
                    {"from", src},
                    {"to", dst},
                    {"operand", e.operand},
                    {"from_layout", had},
                    {"to_layout", into},
                    {"forward", fwd},
                    {"backward", bwd},
                    {"layers", e.kind == EdgeKind::Entry ? 1 : count(to, g)}});
  }
  if (out.size() == before)
    out.push_back("  none");
  if (table)
    *table = std::move(rows);
  return out;
}

namespace {

std::string stageLine(const StageSolution &s) {
  std::ostringstream os;
  os << "  stage" << (s.stages.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < s.stages.size(); ++i)
    os << (i ? "," : "") << s.stages[i];
  os << ": " << s.layers << " repeated layer" << (s.layers == 1 ? "" : "s")
     << (s.first ? " + first" : "") << (s.last ? " + last" : "") << ", "
     << s.ilp.variables << " variables, " << s.ilp.constraints << " rows, "
     << std::fixed << std::setprecision(3) << s.ilp.seconds << " s, "
     << (s.ilp.optimal ? "optimal" : "not proven optimal");
  if (s.memoryRelaxed)
    os << "; no sharding meets the " << cost::formatGigabytes(s.memoryLimit)
       << " budget, the fastest is used";
  return os.str();
}

} // namespace

std::string AutoShardResult::report() const {
  std::ostringstream os;
  os << formatSearch(search, model, cluster.spec, searchOptions);
  if (!transformerMode)
    os << "(graph mode: " << model.name
       << " is not a known transformer; plans priced by the intra-op ILP)\n";
  if (graphDerived)
    os << (presetMatched
               ? "(preset " + model.name + ", priced like any module: "
               : std::string("(no preset matches: "))
       << model.layers << " layers, hidden " << model.hidden << ", "
       << model.heads << " heads, vocabulary " << model.vocab
       << " read from the module; kernels priced from its "
       << "ops)\n";
  if (!search.best)
    return os.str();
  os << "\nintra-op sharding (integer program per pipeline stage, "
        "repeated layers solved once)\n";
  for (const StageSolution &s : stages)
    os << stageLine(s) << "\n";
  for (const std::string &line : shardingSummary)
    os << line << "\n";
  os << "planned in " << std::fixed << std::setprecision(2) << seconds
     << " s\n";
  return os.str();
}

nlohmann::json AutoShardResult::toJson() const {
  nlohmann::json j = searchToJson(search, model, cluster.spec, searchOptions);
  j["mode"] = transformerMode ? "transformer" : "graph";
  j["costs"] = graphDerived ? "ops" : "formulas";
  j["seconds"] = seconds;
  j["stages"] = nlohmann::json::array();
  for (const StageSolution &s : stages)
    j["stages"].push_back({{"stages", s.stages},
                           {"layers", s.layers},
                           {"variables", s.ilp.variables},
                           {"constraints", s.ilp.constraints},
                           {"objective_s", s.ilp.objective},
                           {"optimal", s.ilp.optimal},
                           {"seconds", s.ilp.seconds},
                           {"memory_limit_bytes", s.memoryLimit},
                           {"memory_relaxed", s.memoryRelaxed}});
  j["sharding"] = shardingSummary;
  j["sharding_table"] = shardingTable;
  return j;
}

} // namespace cleave::planner
