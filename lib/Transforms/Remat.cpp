//===- Remat.cpp - Recompute activations in the backward pass -------------===//
//
// Implements -cleave-remat. See Passes.td for the contract. The training
// step is one block: the forward ops (the ancestors of the loss), then the
// backward ops and the optimizer. For each layer the pass picks the forward
// values that backward ops read and that the layer may drop, clones the ops
// computing them right before their first backward reader (reading the
// layer's inputs through cleave.optimization_barrier), and points the
// backward readers at the clones.
//
//===----------------------------------------------------------------------===//

#include "LayerNames.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <map>

#define DEBUG_TYPE "cleave-remat"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEREMATPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

enum class Kind { None, Selective, Full };

std::optional<Kind> parseKind(StringRef name) {
  if (name == "none")
    return Kind::None;
  if (name == "selective")
    return Kind::Selective;
  if (name == "full")
    return Kind::Full;
  return std::nullopt;
}

StringRef nameOf(Kind kind) {
  return kind == Kind::Full        ? "full"
         : kind == Kind::Selective ? "selective"
                                   : "none";
}

/// What a value depends on, for values computed from parameters and
/// constants alone (invariants: the same in every micro-batch).
constexpr int64_t kNoParam = -2;    ///< constants only
constexpr int64_t kOtherParam = -1; ///< a parameter of no layer, or several

/// The forward ops of the training step and the layer each belongs to.
class LayerAnalysis {
public:
  /// Fails (with a diagnostic) if the function has no loss output.
  LogicalResult run(func::FuncOp func);

  bool isForward(Operation *op) const { return forward.contains(op); }
  bool isInvariant(Value v) const { return invariant.contains(v); }
  /// Layer number -> its forward ops in program order.
  const std::map<int64_t, SmallVector<Operation *>> &getLayers() const {
    return layers;
  }
  /// Whether some parameter names a layer.
  bool hasLayerParams() const { return anyLayerParam; }
  /// The layer of a forward op, if it belongs to one.
  std::optional<int64_t> layerOf(Operation *op) const {
    auto it = opLayer.find(op);
    if (it == opLayer.end())
      return std::nullopt;
    return it->second;
  }

private:
  void classify(Block &body);
  /// The largest layer a non-invariant value depends on (-1: none; data
  /// inputs depend on none).
  int64_t tagOf(Value v) const {
    auto it = tag.find(v);
    return it == tag.end() ? -1 : it->second;
  }

  DenseSet<Operation *> forward;
  /// Invariant values -> kNoParam, kOtherParam or their layer.
  DenseMap<Value, int64_t> invariant;
  /// Other values -> the largest layer they depend on (-1: none).
  DenseMap<Value, int64_t> tag;
  DenseMap<Operation *, int64_t> opLayer;
  std::map<int64_t, SmallVector<Operation *>> layers;
  bool anyLayerParam = false;
};

LogicalResult LayerAnalysis::run(func::FuncOp func) {
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  Value loss;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (auto name = func.getResultAttrOfType<StringAttr>(
            i, CleaveDialect::kOutputAttrName))
      if (name.getValue() == "loss")
        loss = ret->getOperand(i);
  if (!loss)
    return func.emitError() << "cleave-remat: @" << func.getSymName()
                            << " has no result named \"loss\" "
                               "(cleave.output); it is not a training step";
  // Forward ops: the ancestors of the loss.
  SmallVector<Operation *> work;
  if (Operation *def = loss.getDefiningOp())
    work.push_back(def);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
  }
  for (BlockArgument arg : body.getArguments()) {
    auto name = func.getArgAttrOfType<StringAttr>(
        arg.getArgNumber(), CleaveDialect::kParamAttrName);
    if (!name)
      continue;
    std::optional<int64_t> layer = layerOfParamName(name.getValue());
    invariant[arg] = layer.value_or(kOtherParam);
    anyLayerParam |= layer.has_value();
  }
  classify(body);
  return success();
}

void LayerAnalysis::classify(Block &body) {
  for (Operation &op : body.without_terminator()) {
    // Invariant: every operand is (the op reads only parameters and
    // constants, or nothing).
    bool allInvariant = llvm::all_of(
        op.getOperands(), [&](Value v) { return invariant.contains(v); });
    if (allInvariant) {
      int64_t dep = kNoParam;
      for (Value v : op.getOperands()) {
        int64_t d = invariant.lookup(v);
        if (d == kNoParam)
          continue;
        dep = dep == kNoParam || dep == d ? d : kOtherParam;
      }
      for (Value r : op.getResults())
        invariant[r] = dep;
      continue;
    }
    int64_t layer = -1;
    for (Value v : op.getOperands())
      layer = std::max(layer,
                       invariant.contains(v) ? invariant.lookup(v) : tagOf(v));
    for (Value r : op.getResults())
      tag[r] = layer;
    if (layer < 0 || !forward.contains(&op) || !isMemoryEffectFree(&op) ||
        op.getNumRegions() != 0)
      continue;
    // A member of `layer` reads only the layer's own values, its parameters,
    // constants and values of earlier layers (its inputs): not the final
    // norm's weights or the head, which run after the last layer.
    bool member = llvm::all_of(op.getOperands(), [&](Value v) {
      if (auto it = invariant.find(v); it != invariant.end())
        return it->second == layer || it->second == kNoParam;
      Operation *def = v.getDefiningOp();
      auto it = def ? opLayer.find(def) : opLayer.end();
      if (it != opLayer.end() && it->second == layer)
        return true;
      return tagOf(v) < layer;
    });
    if (!member)
      continue;
    opLayer[&op] = layer;
    layers[layer].push_back(&op);
  }
}

/// Rewrites one layer: recomputes `candidates` (a subset of the layer's ops,
/// in program order) where the backward pass reads them.
class Recomputer {
public:
  Recomputer(const LayerAnalysis &analysis, DenseSet<Operation *> &created)
      : analysis(analysis), created(created) {}

  LogicalResult run(int64_t layer, ArrayRef<Operation *> candidates);

private:
  bool isBackward(Operation *op) const {
    return !analysis.isForward(op) && !created.contains(op);
  }

  const LayerAnalysis &analysis;
  DenseSet<Operation *> &created;
};

LogicalResult Recomputer::run(int64_t layer, ArrayRef<Operation *> candidates) {
  DenseSet<Operation *> inSet(candidates.begin(), candidates.end());
  // Values to recompute: read by the backward pass, and not by forward ops
  // of other layers (those are the next layers' inputs and stay alive).
  SmallVector<Value> recompute;
  Operation *first = nullptr;
  for (Operation *op : candidates)
    for (Value r : op->getResults()) {
      bool output = false;
      Operation *reader = nullptr;
      for (Operation *user : r.getUsers()) {
        if (analysis.isForward(user))
          output |= analysis.layerOf(user) != layer;
        else if (isBackward(user) && (!reader || user->isBeforeInBlock(reader)))
          reader = user;
      }
      if (!reader || output)
        continue;
      recompute.push_back(r);
      if (!first || reader->isBeforeInBlock(first))
        first = reader;
    }
  if (recompute.empty())
    return success();
  // The ops computing them, within the candidates, in program order.
  DenseSet<Operation *> slice;
  SmallVector<Operation *> work;
  for (Value v : recompute)
    work.push_back(v.getDefiningOp());
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!slice.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && inSet.contains(def))
        work.push_back(def);
  }
  // Broadcasts of invariants (a bias over the tokens) are recomputed too:
  // shared with the forward pass, they would stay materialised from the
  // forward to the backward pass, each as large as an activation.
  SmallVector<Operation *> clones;
  DenseSet<Operation *> expanded;
  for (Operation *op : candidates)
    if (slice.contains(op))
      for (Value v : op->getOperands())
        if (auto broadcast = v.getDefiningOp<BroadcastOp>();
            broadcast && analysis.isInvariant(v) &&
            expanded.insert(broadcast).second)
          clones.push_back(broadcast);
  // Recomputed ops read the layer's inputs through barriers; parameters and
  // other invariants directly, except the operands of recomputed
  // broadcasts, which need barriers to stay apart from the forward pass.
  OpBuilder b(first);
  IRMapping mapping;
  auto stage = candidates.front()->getAttr(CleaveDialect::kStageAttrName);
  for (Operation *op : candidates)
    if (slice.contains(op))
      clones.push_back(op);
  llvm::sort(clones,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *op : clones) {
    bool isExpanded = expanded.contains(op);
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if ((def && (slice.contains(def) || expanded.contains(def))) ||
          mapping.contains(v) || (analysis.isInvariant(v) && !isExpanded))
        continue;
      if (def && !def->isBeforeInBlock(first))
        return op->emitError()
               << "cleave-remat: an input of layer " << layer
               << " is computed after the backward op that first reads the "
                  "layer's activations";
      auto barrier = b.create<OptimizationBarrierOp>(v.getLoc(), v);
      if (stage)
        barrier->setAttr(CleaveDialect::kStageAttrName, stage);
      created.insert(barrier);
      mapping.map(v, barrier.getResult());
    }
  }
  for (Operation *op : clones)
    created.insert(b.clone(*op, mapping));
  for (Value v : recompute) {
    Value copy = mapping.lookup(v);
    v.replaceUsesWithIf(
        copy, [&](OpOperand &use) { return isBackward(use.getOwner()); });
  }
  return success();
}

/// The attention core of a layer: its attention ops and the ops that only
/// reshape what they compute.
SmallVector<Operation *> attentionCore(ArrayRef<Operation *> ops) {
  SmallVector<Operation *> core;
  DenseSet<Value> values;
  for (Operation *op : ops) {
    bool view = op->getNumOperands() == 1 && values.contains(op->getOperand(0));
    if (!isa<AttentionOp>(op) && !(view && isa<ReshapeOp, TransposeOp>(op)))
      continue;
    core.push_back(op);
    values.insert(op->result_begin(), op->result_end());
  }
  return core;
}

struct CleaveRematPass final
    : cleave::impl::CleaveRematPassBase<CleaveRematPass> {
  using Base::Base;

  void runOnOperation() override;

private:
  /// The kind for each pipeline rank (one entry without a pipeline), from
  /// the option or the module's plan; fails with a diagnostic.
  FailureOr<SmallVector<Kind>> kinds();
  /// The kind of `layer`, whose first op is `op`.
  FailureOr<Kind> kindOf(ArrayRef<Kind> perRank, Operation *op, int64_t layer);
};

FailureOr<SmallVector<Kind>> CleaveRematPass::kinds() {
  ModuleOp module = getOperation();
  auto fail = [&](const Twine &message) -> FailureOr<SmallVector<Kind>> {
    module.emitError() << "cleave-remat: " << message;
    return failure();
  };
  if (!mode.empty()) {
    std::optional<Kind> kind = parseKind(mode);
    if (!kind)
      return fail("unknown mode '" + mode +
                  "' (expected none, selective or "
                  "full)");
    return SmallVector<Kind>{*kind};
  }
  auto plan =
      module->getAttrOfType<DictionaryAttr>(CleaveDialect::kPlanAttrName);
  if (!plan)
    return SmallVector<Kind>{Kind::None};
  if (auto perStage = plan.getAs<ArrayAttr>("recompute_per_stage")) {
    SmallVector<Kind> out;
    for (Attribute a : perStage) {
      auto name = dyn_cast<StringAttr>(a);
      std::optional<Kind> kind = name ? parseKind(name) : std::nullopt;
      if (!kind)
        return fail("cleave.plan recompute_per_stage has an entry that is "
                    "not none, selective or full");
      out.push_back(*kind);
    }
    return out;
  }
  auto name = plan.getAs<StringAttr>("recompute");
  std::optional<Kind> kind = name ? parseKind(name) : Kind::None;
  if (!kind)
    return fail("cleave.plan recompute must be none, selective or full");
  return SmallVector<Kind>{*kind};
}

FailureOr<Kind> CleaveRematPass::kindOf(ArrayRef<Kind> perRank, Operation *op,
                                        int64_t layer) {
  if (perRank.size() == 1)
    return perRank.front();
  auto stage = op->getAttrOfType<IntegerAttr>(CleaveDialect::kStageAttrName);
  if (!stage) {
    op->emitError() << "cleave-remat: cleave.plan recompute_per_stage gives "
                    << perRank.size() << " pipeline ranks, but layer " << layer
                    << " has no pipeline stage (cleave.stage)";
    return failure();
  }
  return perRank[stage.getInt() % int64_t(perRank.size())];
}

void CleaveRematPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<SmallVector<Kind>> perRank = kinds();
  if (failed(perRank))
    return signalPassFailure();
  Kind heaviest = *llvm::max_element(*perRank);
  if (heaviest == Kind::None)
    return;
  std::string what = "recompute=" + nameOf(heaviest).str();
  // No training step, nothing to recompute: a plan on a forward function
  // takes effect when the training step is built from it.
  auto func = module.lookupSymbol<func::FuncOp>(entry);
  if (!func || func.isExternal())
    return;
  if (!func.getBody().hasOneBlock()) {
    func.emitError() << "cleave-remat: @" << entry.getValue()
                     << " must have one block";
    return signalPassFailure();
  }
  LayerAnalysis analysis;
  if (failed(analysis.run(func)))
    return signalPassFailure();
  if (!analysis.hasLayerParams() || analysis.getLayers().empty()) {
    func.emitError() << "cleave-remat: " << what
                     << " recomputes layers, but no parameter of @"
                     << entry.getValue()
                     << " names a layer (a numbered component, like 'h.3.' "
                        "or 'layers.3.')";
    return signalPassFailure();
  }
  DenseSet<Operation *> created;
  Recomputer recomputer(analysis, created);
  bool anyAttention = false;
  for (auto &[layer, ops] : analysis.getLayers()) {
    FailureOr<Kind> kind = kindOf(*perRank, ops.front(), layer);
    if (failed(kind))
      return signalPassFailure();
    SmallVector<Operation *> candidates;
    if (*kind == Kind::Full)
      candidates.assign(ops.begin(), ops.end());
    else if (*kind == Kind::Selective)
      candidates = attentionCore(ops);
    anyAttention |= !attentionCore(ops).empty();
    if (!candidates.empty() && failed(recomputer.run(layer, candidates)))
      return signalPassFailure();
  }
  if (llvm::is_contained(*perRank, Kind::Selective) && !anyAttention) {
    func.emitError() << "cleave-remat: recompute=selective recomputes the "
                        "attention core, but the layers of @"
                     << entry.getValue() << " have no cleave.attention";
    return signalPassFailure();
  }
}

} // namespace
