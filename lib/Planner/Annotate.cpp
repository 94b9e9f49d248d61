//===- Annotate.cpp - The plan as IR (docs/plans.md) ----------------------===//

#include "Annotate.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::planner::detail {

namespace {

constexpr StringLiteral kMesh = "cluster";

class Annotator {
public:
  Annotator(ModuleOp module, const PlanAnnotation &a)
      : module(module), a(a), g(*a.graph), v(a.graph->view),
        builder(module.getContext()) {}

  LogicalResult run(std::string &error) {
    if (module->hasAttr(CleaveDialect::kPlanAttrName)) {
      error = "the module already carries a plan (cleave.plan); "
              "cleave-auto-shard plans modules without one";
      return failure();
    }
    if (SymbolTable::lookupSymbolIn(module, kMesh)) {
      error = "the module already defines the symbol @cluster";
      return failure();
    }
    addMesh();
    addConstraints();
    annotateArguments();
    annotateResults();
    applyZero();
    assignStages();
    addPlanAttribute();
    return success();
  }

private:
  int lastChunk() const { return a.plan.pp * a.plan.chunks() - 1; }
  int chunkOf(int i) const {
    int t = v.instanceOf(i);
    if (t >= 0)
      return a.chunkOfInstance[size_t(t)];
    return v.count && i >= v.start ? lastChunk() : 0;
  }
  const std::vector<int> &choiceAt(int chunk) const {
    return a.choice[size_t(chunk % a.plan.pp)];
  }

  ShardingAttr attrOf(const Layout &l) {
    SmallVector<SmallVector<StringRef>> dims;
    for (uint8_t mask : l.dims) {
      dims.emplace_back();
      for (size_t x = 0; x < g.axes.size(); ++x)
        if (mask >> x & 1)
          dims.back().push_back(g.axes[x].name);
    }
    SmallVector<StringRef> partial;
    for (size_t x = 0; x < g.axes.size(); ++x)
      if (l.partial >> x & 1)
        partial.push_back(g.axes[x].name);
    return ShardingAttr::get(module.getContext(), kMesh, dims, partial);
  }

  void addMesh() {
    builder.setInsertionPointToStart(module.getBody());
    const cost::ParallelPlan &p = a.plan;
    SmallVector<StringRef> names = {"pp", "dp", "cp", "tp"};
    SmallVector<int64_t> shape = {p.pp, p.dp, p.cp, p.tp};
    builder.create<MeshOp>(module.getLoc(), kMesh, names, shape,
                           ArrayRef<LinkKind>(a.links));
  }

  /// The chunk whose choice decides the layout of `x`.
  int producerChunk(Value x) {
    if (auto arg = dyn_cast<BlockArgument>(x))
      return argChunk.lookup(arg);
    return chunkOf(v.position.lookup(x.getDefiningOp()));
  }

  /// Whether op `i` has a node of its own (is not a merged follower).
  bool isRoot(int i) const {
    Operation *op = v.ops[size_t(i)];
    int t = v.instanceOf(i);
    Operation *rep = t > 0 ? v.at(0, v.slotOf(i)) : op;
    return g.nodes[size_t(g.nodeOfOp.lookup(rep))].op == rep;
  }

  void recordArgChunks() {
    for (size_t i = 0; i < v.ops.size(); ++i)
      for (Value x : v.ops[i]->getOperands())
        if (auto arg = dyn_cast<BlockArgument>(x))
          if (!argChunk.count(arg))
            argChunk[arg] = chunkOf(int(i));
  }

  void addConstraints() {
    recordArgChunks();
    std::map<std::pair<void *, std::string>, Value> made;
    for (size_t i = 0; i < v.ops.size(); ++i) {
      if (!isRoot(int(i)))
        continue;
      Operation *op = v.ops[i];
      int chunk = chunkOf(int(i));
      const Node &node = g.nodes[size_t(g.nodeOfOp.lookup(op))];
      const Strategy &s = node.strategies[size_t(
          choiceAt(chunk)[size_t(g.nodeOfOp.lookup(op))])];
      for (unsigned k = 0; k < op->getNumOperands(); ++k) {
        Value x = op->getOperand(k);
        const Layout &want = s.operands[k];
        if (g.layoutOf(x, choiceAt(producerChunk(x))) == want)
          continue;
        ShardingAttr attr = attrOf(want);
        auto key = std::make_pair(x.getAsOpaquePointer(), attrString(attr));
        Value &c = made[key];
        if (!c) {
          if (Operation *def = x.getDefiningOp())
            builder.setInsertionPointAfter(def);
          else
            builder.setInsertionPointToStart(cast<BlockArgument>(x).getOwner());
          auto constraint =
              builder.create<ShardingConstraintOp>(op->getLoc(), x, attr);
          constraint->setAttr(CleaveDialect::kStageAttrName,
                              builder.getI64IntegerAttr(chunk));
          c = constraint.getResult();
        }
        op->setOperand(k, c);
      }
    }
  }

  static std::string attrString(Attribute attr) {
    std::string s;
    llvm::raw_string_ostream os(s);
    attr.print(os);
    return os.str();
  }

  /// The name of the parameter a `cleave.state` or `cleave.output` name
  /// belongs to ("w.exp_avg" -> "w", "grad:w" -> "w").
  std::optional<ShardingAttr> paramSharding(StringRef name) {
    name.consume_front("grad:");
    StringRef best;
    for (const auto &entry : paramShardings) {
      StringRef param = entry.getKey();
      bool owns = name == param ||
                  (name.starts_with(param) && name.size() > param.size() &&
                   name[param.size()] == '.');
      if (owns && param.size() > best.size())
        best = param;
    }
    if (best.empty())
      return std::nullopt;
    return paramShardings.lookup(best);
  }

  void annotateArguments() {
    func::FuncOp f = func::FuncOp(v.func);
    for (BlockArgument arg : f.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type)
        continue;
      ShardingAttr attr;
      if (g.nodeOfArg.count(arg))
        attr = attrOf(g.layoutOf(arg, choiceAt(argChunk.lookup(arg))));
      else if (!f.getArgAttr(arg.getArgNumber(), CleaveDialect::kStateAttrName))
        attr = ShardingAttr::getReplicated(module.getContext(), kMesh,
                                           unsigned(type.getRank()));
      if (!attr)
        continue;
      f.setArgAttr(arg.getArgNumber(), CleaveDialect::kShardingAttrName, attr);
      if (auto name = f.getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), CleaveDialect::kParamAttrName))
        paramShardings[name.getValue()] = attr;
    }
    // Optimizer state follows its parameter.
    for (BlockArgument arg : f.getArguments())
      if (auto name = f.getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), CleaveDialect::kStateAttrName)) {
        std::optional<ShardingAttr> attr = paramSharding(name.getValue());
        auto type = cast<RankedTensorType>(arg.getType());
        f.setArgAttr(
            arg.getArgNumber(), CleaveDialect::kShardingAttrName,
            attr ? *attr
                 : ShardingAttr::getReplicated(module.getContext(), kMesh,
                                               unsigned(type.getRank())));
      }
  }

  void annotateResults() {
    func::FuncOp f = func::FuncOp(v.func);
    for (unsigned r = 0; r < f.getNumResults(); ++r) {
      auto type = dyn_cast<RankedTensorType>(f.getResultTypes()[r]);
      if (!type)
        continue;
      std::optional<ShardingAttr> attr;
      if (auto name = f.getResultAttrOfType<StringAttr>(
              r, CleaveDialect::kOutputAttrName))
        if (name.getValue() != "loss")
          attr = paramSharding(name.getValue());
      f.setResultAttr(
          r, CleaveDialect::kShardingAttrName,
          attr ? *attr
               : ShardingAttr::getReplicated(module.getContext(), kMesh,
                                             unsigned(type.getRank())));
    }
  }

  /// `attr` with dp added to the first dimension it still divides (the
  /// ZeRO shard of a parameter's state), unchanged if none does.
  ShardingAttr withDp(ShardingAttr attr, RankedTensorType type) {
    SmallVector<SmallVector<StringRef>> dims;
    for (unsigned d = 0; d < attr.getRank(); ++d)
      dims.push_back(attr.getDimAxes(d));
    for (const auto &axes : dims)
      if (llvm::is_contained(axes, StringRef("dp")))
        return attr;
    auto sizeOf = [&](StringRef name) {
      for (const MeshAxis &x : g.axes)
        if (x.name == name)
          return x.size;
      return int64_t(1);
    };
    for (auto [d, axes] : llvm::enumerate(dims)) {
      int64_t blocks = a.plan.dp;
      for (StringRef x : axes)
        blocks *= sizeOf(x);
      if (type.getDimSize(d) % blocks == 0) {
        axes.push_back("dp");
        return ShardingAttr::get(module.getContext(), kMesh, dims,
                                 attr.getPartialAxes());
      }
    }
    return attr;
  }

  /// The op computing the new value of parameter `name`, if any.
  Operation *updateOf(func::FuncOp f, StringRef name) {
    Operation *ret = f.getBody().front().getTerminator();
    for (unsigned i = 0; i < f.getNumResults(); ++i)
      if (auto out = f.getResultAttrOfType<StringAttr>(
              i, CleaveDialect::kOutputAttrName))
        if (out.getValue() == name)
          return ret->getOperand(i).getDefiningOp();
    return nullptr;
  }

  /// A constraint to `attr` on `x`, built before `at`, on `chunk`.
  Value pin(Value x, ShardingAttr attr, Operation *at, int chunk) {
    builder.setInsertionPoint(at);
    auto c = builder.create<ShardingConstraintOp>(at->getLoc(), x, attr);
    c->setAttr(CleaveDialect::kStageAttrName, builder.getI64IntegerAttr(chunk));
    return c.getResult();
  }

  /// ZeRO in a training step, as cleave-apply-plan writes it: optimizer
  /// state split over dp (1-3); stage 1 reduces gradients whole, then
  /// updates a slice; stage 3 keeps parameters split over dp and gathers
  /// them before every use but the update. A forward function has no state:
  /// there the stage is only recorded in cleave.plan.
  void applyZero() {
    if (a.plan.zeroStage == 0 || a.plan.dp == 1)
      return;
    splitState();
    func::FuncOp f = func::FuncOp(v.func);
    for (BlockArgument arg : f.getArguments()) {
      auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                 CleaveDialect::kParamAttrName);
      Operation *update = name ? updateOf(f, name.getValue()) : nullptr;
      if (!update)
        continue;
      ShardingAttr layout = paramShardings.lookup(name.getValue());
      int chunk = argChunk.lookup(arg);
      if (a.plan.zeroStage == 1)
        for (OpOperand &use : update->getOpOperands())
          if (!isa<BlockArgument>(use.get()) &&
              use.get().getType() == arg.getType())
            use.set(pin(use.get(), layout, update, chunk));
      if (a.plan.zeroStage < 3)
        continue;
      ShardingAttr split =
          withDp(layout, cast<RankedTensorType>(arg.getType()));
      f.setArgAttr(arg.getArgNumber(), CleaveDialect::kShardingAttrName, split);
      for (unsigned r = 0; r < f.getNumResults(); ++r)
        if (f.getResultAttr(r, CleaveDialect::kOutputAttrName) == name)
          f.setResultAttr(r, CleaveDialect::kShardingAttrName, split);
      Value gathered = pin(arg, layout, &f.getBody().front().front(), chunk);
      llvm::SmallPtrSet<Operation *, 2> keep;
      keep.insert(update);
      keep.insert(gathered.getDefiningOp());
      arg.replaceAllUsesExcept(gathered, keep);
    }
  }

  /// Optimizer state (arguments and results) split over dp.
  void splitState() {
    func::FuncOp f = func::FuncOp(v.func);
    for (BlockArgument arg : f.getArguments()) {
      auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                 CleaveDialect::kStateAttrName);
      if (std::optional<ShardingAttr> param =
              name ? paramSharding(name.getValue()) : std::nullopt)
        f.setArgAttr(arg.getArgNumber(), CleaveDialect::kShardingAttrName,
                     withDp(*param, cast<RankedTensorType>(arg.getType())));
    }
    for (unsigned r = 0; r < f.getNumResults(); ++r) {
      auto name =
          f.getResultAttrOfType<StringAttr>(r, CleaveDialect::kOutputAttrName);
      if (!name || paramShardings.count(name.getValue()) ||
          name.getValue().starts_with("grad:"))
        continue;
      if (std::optional<ShardingAttr> param = paramSharding(name.getValue()))
        f.setResultAttr(
            r, CleaveDialect::kShardingAttrName,
            withDp(*param, cast<RankedTensorType>(f.getResultTypes()[r])));
    }
  }

  /// Forward ops run on their chunk; other ops (backward, optimizer) on the
  /// smallest chunk of what they read, else of what reads them.
  void assignStages() {
    Block &body = func::FuncOp(v.func).getBody().front();
    llvm::DenseMap<Value, int> chunkOfValue;
    for (auto [arg, chunk] : argChunk)
      chunkOfValue[arg] = chunk;
    auto set = [&](Operation *op, int chunk) {
      op->setAttr(CleaveDialect::kStageAttrName,
                  builder.getI64IntegerAttr(chunk));
      for (Value r : op->getResults())
        chunkOfValue[r] = chunk;
    };
    std::vector<Operation *> unknown;
    for (Operation &op : body.without_terminator()) {
      if (auto it = v.position.find(&op); it != v.position.end()) {
        set(&op, chunkOf(it->second));
        continue;
      }
      if (auto c =
              op.getAttrOfType<IntegerAttr>(CleaveDialect::kStageAttrName)) {
        set(&op, int(c.getInt()));
        continue;
      }
      int chunk = -1;
      for (Value x : op.getOperands())
        if (auto it = chunkOfValue.find(x); it != chunkOfValue.end())
          chunk = chunk < 0 ? it->second : std::min(chunk, it->second);
      if (chunk >= 0)
        set(&op, chunk);
      else
        unknown.push_back(&op);
    }
    for (Operation *op : llvm::reverse(unknown)) {
      int chunk = -1;
      for (Operation *user : op->getUsers())
        if (auto c =
                user->getAttrOfType<IntegerAttr>(CleaveDialect::kStageAttrName))
          chunk =
              chunk < 0 ? int(c.getInt()) : std::min(chunk, int(c.getInt()));
      set(op, std::max(chunk, 0));
    }
  }

  void addPlanAttribute() {
    const cost::ParallelPlan &p = a.plan;
    // `recompute` is the heaviest kind (it fits wherever the per-stage
    // choices fit); `recompute_per_stage` has the kind of each pipeline rank,
    // which cleave-remat carries out (docs/plans.md).
    cost::Recompute heaviest = p.recompute;
    if (!p.recomputePerStage.empty())
      heaviest = *std::max_element(p.recomputePerStage.begin(),
                                   p.recomputePerStage.end());
    SmallVector<NamedAttribute> fields = {
        builder.getNamedAttr("zero", builder.getI64IntegerAttr(p.zeroStage)),
        builder.getNamedAttr("recompute",
                             builder.getStringAttr(cost::toString(heaviest))),
        builder.getNamedAttr("micro_batch",
                             builder.getI64IntegerAttr(p.microBatchSize)),
        builder.getNamedAttr("num_micro_batches",
                             builder.getI64IntegerAttr(p.numMicroBatches)),
        builder.getNamedAttr("schedule",
                             builder.getStringAttr(cost::toString(p.schedule))),
        builder.getNamedAttr("virtual_stages",
                             builder.getI64IntegerAttr(p.chunks()))};
    if (!p.recomputePerStage.empty()) {
      SmallVector<Attribute> kinds;
      for (cost::Recompute r : p.recomputePerStage)
        kinds.push_back(builder.getStringAttr(cost::toString(r)));
      fields.push_back(builder.getNamedAttr("recompute_per_stage",
                                            builder.getArrayAttr(kinds)));
    }
    module->setAttr(CleaveDialect::kPlanAttrName,
                    builder.getDictionaryAttr(fields));
  }

  ModuleOp module;
  const PlanAnnotation &a;
  const ShardingGraph &g;
  const ForwardView &v;
  OpBuilder builder;
  llvm::DenseMap<Value, int> argChunk;
  llvm::StringMap<ShardingAttr> paramShardings;
};

} // namespace

LogicalResult annotateModule(ModuleOp module, const PlanAnnotation &a,
                             std::string &error) {
  return Annotator(module, a).run(error);
}

} // namespace cleave::planner::detail
