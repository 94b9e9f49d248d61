//===- ShardingGraph.cpp - Nodes, strategies and edges from IR ------------===//

#include "Strategies.h"

#include <sstream>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::planner {

using detail::StrategyCosts;

uint8_t Layout::splitAxes() const {
  uint8_t m = 0;
  for (uint8_t d : dims)
    m |= d;
  return m;
}

std::string formatLayout(const Layout &l, const std::vector<MeshAxis> &axes) {
  auto names = [&](uint8_t mask) {
    std::vector<std::string> out;
    for (size_t a = 0; a < axes.size(); ++a)
      if (mask >> a & 1)
        out.push_back(axes[a].name);
    return out;
  };
  std::ostringstream os;
  os << "[";
  for (size_t d = 0; d < l.dims.size(); ++d) {
    std::vector<std::string> n = names(l.dims[d]);
    os << (d ? ", " : "");
    if (n.empty())
      os << "_";
    else if (n.size() == 1)
      os << n[0];
    else {
      os << "(";
      for (size_t i = 0; i < n.size(); ++i)
        os << (i ? ", " : "") << n[i];
      os << ")";
    }
  }
  os << "]";
  if (l.partial) {
    os << " partial [";
    std::vector<std::string> n = names(l.partial);
    for (size_t i = 0; i < n.size(); ++i)
      os << (i ? ", " : "") << n[i];
    os << "]";
  }
  return os.str();
}

namespace {

class Builder {
public:
  Builder(ShardingGraph &g, const StrategyCosts &costs,
          const GraphOptions &options)
      : g(g), v(g.view), costs(costs), options(options) {}

  void build() {
    nodeOfIndex.assign(v.ops.size(), -1);
    for (size_t i = 0; i < v.ops.size(); ++i)
      addOp(int(i));
    for (Node &n : g.nodes)
      fillStrategies(n);
    for (size_t i = 0; i < v.ops.size(); ++i)
      if (isRoot(int(i)))
        addOperandEdges(int(i));
  }

private:
  Region regionOf(int i) const {
    if (v.instanceOf(i) >= 0)
      return Region::Block;
    return v.count && i >= v.start ? Region::After : Region::Before;
  }
  /// An op with a node of its own (not a follower, not a later instance).
  bool isRoot(int i) const {
    Operation *op = v.ops[size_t(i)];
    return g.nodes[size_t(nodeOfIndex[size_t(i)])].op == op;
  }

  /// The node of argument `a`, created on first use.
  int argNode(BlockArgument a, Region region) {
    if (auto it = g.nodeOfArg.find(a); it != g.nodeOfArg.end())
      return it->second;
    Node n;
    n.kind = v.isParam(a) ? NodeKind::Parameter : NodeKind::Input;
    n.region = region;
    n.arg = a;
    g.nodes.push_back(n);
    return g.nodeOfArg[a] = int(g.nodes.size() - 1);
  }

  /// The producer node of a follower candidate, or -1 if `i` is not one:
  /// a unary elementwise op (one non-scalar operand with the result's
  /// factors, all pass-through) whose input has no other use and can never
  /// be a partial sum.
  int followedNode(int i) {
    Operation *op = v.ops[size_t(i)];
    const ShardingRule &rule = v.rules[size_t(i)];
    if (op->getNumResults() != 1 || op->getResult(0) == v.loss ||
        op->getNumOperands() == 0 || !detail::isFloatTensor(op->getResult(0)))
      return -1;
    for (unsigned k = 1; k < op->getNumOperands(); ++k)
      if (!rule.getOperand(k).empty())
        return -1;
    if (rule.getOperand(0) != rule.getResult(0))
      return -1;
    for (int64_t f = 0; f < rule.getNumFactors(); ++f)
      if (rule.getFactorKind(f) != FactorKind::PassThrough)
        return -1;
    Value in = op->getOperand(0);
    if (!in.hasOneUse())
      return -1;
    if (auto a = dyn_cast<BlockArgument>(in))
      return v.isParam(a) ? argNode(a, regionOf(i)) : -1;
    int p = v.position.lookup(in.getDefiningOp());
    if (v.instanceOf(p) != v.instanceOf(i) || regionOf(p) != regionOf(i))
      return -1;
    int n = nodeOfIndex[size_t(p)];
    Node &producer = g.nodes[size_t(n)];
    if (producer.op && producer.op->getNumResults() != 1)
      return -1;
    if (producer.op && producer.followers.empty()) {
      const ShardingRule &pr = v.rules[size_t(v.position.lookup(producer.op))];
      for (int64_t f = 0; f < pr.getNumFactors(); ++f)
        if (pr.getFactorKind(f) == FactorKind::Reduction)
          return -1;
    }
    return n;
  }

  void addOp(int i) {
    Operation *op = v.ops[size_t(i)];
    int t = v.instanceOf(i);
    if (t > 0) {
      // Later instances share instance 0's nodes, parameters included.
      int slot = v.slotOf(i);
      nodeOfIndex[size_t(i)] = nodeOfIndex[size_t(v.start + slot)];
      g.nodeOfOp[op] = nodeOfIndex[size_t(i)];
      for (unsigned k = 0; k < op->getNumOperands(); ++k)
        if (auto a = dyn_cast<BlockArgument>(op->getOperand(k)))
          if (v.isParam(a)) {
            int n = g.nodeOfArg.lookup(v.at(0, slot)->getOperand(k));
            g.nodeOfArg[a] = n;
            if (t == 1)
              g.nodes[size_t(n)].secondArg = a;
          }
      return;
    }
    if (int n = followedNode(i); n >= 0) {
      g.nodes[size_t(n)].followers.push_back(op);
      nodeOfIndex[size_t(i)] = n;
      g.nodeOfOp[op] = n;
      return;
    }
    Node n;
    n.kind = NodeKind::Op;
    n.region = regionOf(i);
    n.op = op;
    g.nodes.push_back(n);
    nodeOfIndex[size_t(i)] = int(g.nodes.size() - 1);
    g.nodeOfOp[op] = nodeOfIndex[size_t(i)];
    for (Value x : op->getOperands())
      if (auto a = dyn_cast<BlockArgument>(x))
        argNode(a, n.region);
  }

  void fillStrategies(Node &n) {
    if (n.kind == NodeKind::Op) {
      n.strategies = costs.opStrategies(v, size_t(v.position.lookup(n.op)));
    } else {
      auto t = dyn_cast<RankedTensorType>(n.arg.getType());
      bool param = n.kind == NodeKind::Parameter;
      n.strategies =
          costs.argStrategies(n.arg, param, !param && t && t.getRank() >= 1);
    }
    for (Operation *f : n.followers)
      for (Strategy &s : n.strategies)
        costs.addFollower(f, s, n.kind == NodeKind::Op);
  }

  /// The node producing `x` and the index of its layout in the node's
  /// results.
  std::pair<int, unsigned> producerOf(Value x) {
    if (auto a = dyn_cast<BlockArgument>(x))
      return {g.nodeOfArg.lookup(a), 0};
    Operation *def = x.getDefiningOp();
    int n = g.nodeOfOp.lookup(def);
    bool follower = g.nodes[size_t(n)].op != def;
    return {n, follower ? 0 : cast<OpResult>(x).getResultNumber()};
  }

  void addEdge(Value x, int consumer, unsigned operand, EdgeKind kind) {
    auto [from, result] = producerOf(x);
    const Node &p = g.nodes[size_t(from)], &c = g.nodes[size_t(consumer)];
    bool gradient = detail::isFloatTensor(x) && p.kind != NodeKind::Input;
    double uses = p.kind == NodeKind::Parameter ? options.parameterUses : 1.0;
    // A parameter's gradient summed over the batch axis is the
    // data-parallel gradient reduction, which the plan prices (and ZeRO
    // shapes), not the ILP.
    uint8_t batchAxes = 0;
    if (p.kind == NodeKind::Parameter)
      for (size_t a = 0; a < g.axes.size(); ++a)
        if (g.axes[a].batch)
          batchAxes |= uint8_t(1u << a);
    double bytes = detail::bytesOf(x.getType());
    Edge e;
    e.from = from;
    e.to = consumer;
    e.result = result;
    e.operand = operand;
    e.kind = kind;
    e.gradient = gradient;
    for (const Strategy &s : p.strategies)
      for (const Strategy &t : c.strategies) {
        const Layout &from = s.results[result], &to = t.operands[operand];
        // A nanosecond per layout change, even a free local slice: among
        // equally fast plans the one with fewer constraints wins.
        double cost = costs.reshard(from, to, bytes) + (from != to ? 1e-9 : 0);
        if (gradient) {
          Layout grad = to, back = from;
          grad.partial = t.gradPartial[operand] & ~batchAxes;
          back.partial = 0;
          cost += costs.reshard(grad, back, bytes);
        }
        e.cost.push_back(uses * cost);
      }
    g.edges.push_back(std::move(e));
  }

  void addOperandEdges(int i) {
    Operation *op = v.ops[size_t(i)];
    int node = nodeOfIndex[size_t(i)];
    bool block = v.instanceOf(i) == 0;
    for (unsigned k = 0; k < op->getNumOperands(); ++k) {
      Value x = op->getOperand(k);
      if (!block) {
        EdgeKind kind = EdgeKind::Local;
        if (Operation *def = x.getDefiningOp())
          if (v.instanceOf(v.position.lookup(def)) >= 0)
            kind = EdgeKind::Entry;
        addEdge(x, node, k, kind);
        continue;
      }
      OperandSource src = v.sourceOf(1, v.slotOf(i), k);
      switch (src.kind) {
      case OperandSource::Same:
      case OperandSource::Param:
        addEdge(x, node, k, EdgeKind::Local);
        break;
      case OperandSource::Previous:
        addEdge(x, node, k, EdgeKind::Entry);
        addEdge(v.at(1, v.slotOf(i))->getOperand(k), node, k, EdgeKind::Wrap);
        break;
      case OperandSource::External:
        addEdge(x, node, k, EdgeKind::Shared);
        break;
      case OperandSource::Irregular:
        break; // excluded by the block analysis
      }
    }
  }

  ShardingGraph &g;
  ForwardView &v;
  const StrategyCosts &costs;
  const GraphOptions &options;
  std::vector<int> nodeOfIndex;
};

} // namespace

ShardingGraph buildShardingGraph(ForwardView view, std::vector<MeshAxis> axes,
                                 const cost::ClusterSpec &cluster,
                                 const GraphOptions &options,
                                 const cost::CostConstants &constants) {
  ShardingGraph g;
  g.view = std::move(view);
  g.axes = std::move(axes);
  StrategyCosts costs{g.axes, cluster, constants, options.dtype};
  Builder(g, costs, options).build();
  return g;
}

IlpProblem ShardingGraph::problem(int64_t layers, bool first, bool last,
                                  double memoryLimit, double activationFactor,
                                  double parameterFactor) const {
  auto multiplicity = [&](Region r) -> double {
    switch (r) {
    case Region::Before:
      return first;
    case Region::Block:
      return double(layers);
    case Region::After:
      return last;
    }
    return 0;
  };
  IlpProblem p;
  IlpProblem::MemoryRow row;
  row.name = "memory";
  row.limit = memoryLimit;
  for (const Node &n : nodes) {
    double m = multiplicity(n.region);
    std::vector<double> cost, bytes;
    for (const Strategy &s : n.strategies) {
      cost.push_back(m * s.time);
      bytes.push_back(m * (s.activationBytes * activationFactor +
                           s.parameterBytes * parameterFactor));
    }
    p.nodeCost.push_back(cost);
    row.bytes.push_back(bytes);
  }
  p.memory.push_back(row);
  for (const Edge &e : edges) {
    Region to = nodes[size_t(e.to)].region, from = nodes[size_t(e.from)].region;
    double m = multiplicity(to);
    if (e.kind == EdgeKind::Wrap)
      m = std::max(0.0, double(layers) - 1);
    if (e.kind == EdgeKind::Entry)
      m = layers > 0 && multiplicity(from) > 0 && multiplicity(to) > 0;
    if (m == 0)
      continue;
    IlpProblem::Edge pe;
    pe.from = e.from;
    pe.to = e.to;
    for (double c : e.cost)
      pe.cost.push_back(m * c);
    p.edges.push_back(std::move(pe));
  }
  return p;
}

std::pair<double, double>
ShardingGraph::memoryOf(const std::vector<int> &choice, int64_t layers,
                        bool first, bool last) const {
  double activation = 0, parameter = 0;
  for (size_t n = 0; n < nodes.size(); ++n) {
    Region r = nodes[n].region;
    double m = r == Region::Block    ? double(layers)
               : r == Region::Before ? double(first)
                                     : double(last);
    const Strategy &s = nodes[n].strategies[size_t(choice[n])];
    activation += m * s.activationBytes;
    parameter += m * s.parameterBytes;
  }
  return {activation, parameter};
}

Layout ShardingGraph::layoutOf(Value x, const std::vector<int> &choice) const {
  if (auto a = dyn_cast<BlockArgument>(x)) {
    int n = nodeOfArg.lookup(a);
    return nodes[size_t(n)].strategies[size_t(choice[size_t(n)])].results[0];
  }
  Operation *def = x.getDefiningOp();
  int n = nodeOfOp.lookup(def);
  const Node &node = nodes[size_t(n)];
  // Later instances stand for instance 0's op at the same slot.
  Operation *rep = def;
  if (int i = view.position.lookup(def); view.instanceOf(i) > 0)
    rep = view.at(0, view.slotOf(i));
  unsigned r = node.op == rep ? cast<OpResult>(x).getResultNumber() : 0;
  return node.strategies[size_t(choice[size_t(n)])].results[r];
}

} // namespace cleave::planner
