//===- FactorAssignment.cpp - Mesh axes for the factors of an op ----------===//

#include "cleave/Sharding/FactorAssignment.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {
/// A factor and the axes a tensor puts on it.
struct Proposal {
  int64_t factor;
  SmallVector<StringRef, 2> axes;
};
} // namespace

/// Lays the axes of each split dimension of `sharding` over the dimension's
/// factors, major first: a factor takes axes until it is split completely,
/// then the next one continues. A dimension whose axes do not divide its
/// factors that way proposes nothing.
static SmallVector<Proposal> propose(const ShardingRule &rule,
                                     const TensorFactors &tensor,
                                     ShardingAttr sharding, MeshOp mesh) {
  SmallVector<Proposal> out;
  for (unsigned d = 0, e = tensor.size(); d < e; ++d) {
    SmallVector<StringRef> axes = sharding.getDimAxes(d);
    ArrayRef<int64_t> factors = tensor[d];
    if (axes.empty() || factors.empty())
      continue;
    SmallVector<Proposal> dim;
    size_t next = 0;
    int64_t left = 1; // what remains unsplit of the current factor
    bool ok = true;
    for (StringRef axis : axes) {
      int64_t size = mesh.getAxisSize(axis);
      while (left == 1 && next < factors.size()) {
        dim.push_back({factors[next], {}});
        left = rule.getFactorSize(factors[next++]);
      }
      if (left % size != 0 || (left == 1 && size != 1)) {
        ok = false;
        break;
      }
      dim.back().axes.push_back(axis);
      left /= size;
    }
    if (!ok)
      continue;
    for (Proposal &p : dim)
      if (!p.axes.empty())
        out.push_back(std::move(p));
  }
  return out;
}

static std::string describe(const KnownSharding &k) {
  return (k.isResult ? "result #" : "operand #") + std::to_string(k.index);
}

static std::string formatAxes(ArrayRef<StringRef> axes) {
  return "[" + llvm::join(axes, ", ") + "]";
}

/// The partial axes of the known sharding of result `index`, if any.
static std::optional<SmallVector<StringRef>>
knownPartials(ArrayRef<KnownSharding> known, unsigned index) {
  for (const KnownSharding &k : known)
    if (k.isResult && k.index == index)
      return k.sharding.getPartialAxes();
  return std::nullopt;
}

/// True if every result lacking reduction factor `f` is known to be partial
/// over all of `axes`.
static bool matchesResultPartials(const ShardingRule &rule, int64_t f,
                                  ArrayRef<StringRef> axes,
                                  ArrayRef<KnownSharding> known) {
  for (auto [r, result] : llvm::enumerate(rule.getResultFactors())) {
    bool has = llvm::any_of(
        result, [&](const auto &dim) { return llvm::is_contained(dim, f); });
    if (has)
      continue;
    auto partial = knownPartials(known, r);
    if (!partial || !llvm::all_of(axes, [&](StringRef a) {
          return llvm::is_contained(*partial, a);
        }))
      return false;
  }
  return true;
}

/// A dimension made of several factors is split as one block per device only
/// when every factor before a split one is split completely (the axes of a
/// minor factor alone would give each device a strided set of rows). Drops
/// the axes of such minor factors until every tensor of the rule is
/// expressible as a dimension sharding.
static void keepBlockLayouts(const ShardingRule &rule, MeshOp mesh,
                             FactorAxes &assigned) {
  bool changed = true;
  while (changed) {
    changed = false;
    auto visit = [&](ArrayRef<TensorFactors> tensors) {
      for (const TensorFactors &tensor : tensors)
        for (const auto &factors : tensor) {
          bool complete = true;
          for (int64_t f : factors) {
            if (!complete && !assigned[f].empty()) {
              assigned[f].clear();
              changed = true;
            }
            complete &= assigned[f].empty() ? rule.getFactorSize(f) == 1
                                            : mesh.getGroupSize(assigned[f]) ==
                                                  rule.getFactorSize(f);
          }
        }
    };
    visit(rule.getOperandFactors());
    visit(rule.getResultFactors());
  }
}

FactorAxes mlir::cleave::assignFactors(Operation *op, const ShardingRule &rule,
                                       MeshOp mesh,
                                       ArrayRef<KnownSharding> known,
                                       ReductionPolicy policy, bool warn) {
  FactorAxes assigned(rule.getNumFactors());
  SmallVector<int> owner(rule.getNumFactors(), -1);
  llvm::StringMap<int64_t> axisFactor;
  // When results are fixed, their pending-sum axes belong to reduction
  // factors: no other factor may take them.
  llvm::StringSet<> reserved;
  if (policy == ReductionPolicy::MatchResultPartials)
    for (const KnownSharding &k : known)
      if (k.isResult)
        for (StringRef axis : k.sharding.getPartialAxes())
          reserved.insert(axis);
  for (auto [k, tensor] : llvm::enumerate(known)) {
    const TensorFactors &factors = tensor.isResult
                                       ? rule.getResult(tensor.index)
                                       : rule.getOperand(tensor.index);
    if (tensor.sharding.getRank() != factors.size())
      continue;
    for (Proposal &p : propose(rule, factors, tensor.sharding, mesh)) {
      int64_t f = p.factor;
      // The earlier claim on this factor (or on one of these axes).
      int other = owner[f];
      SmallVector<StringRef, 2> otherAxes = assigned[f];
      for (StringRef axis : p.axes) {
        auto it = axisFactor.find(axis);
        if (other < 0 && it != axisFactor.end() && it->second != f) {
          other = owner[it->second];
          otherAxes = assigned[it->second];
        }
      }
      // A proposal whose minor axes another factor holds keeps its free
      // major axes (a sequence split over [cp, tp] whose tp the heads hold
      // keeps cp): the blocks of the major axes stay where they are.
      if (other >= 0 && owner[f] < 0 && assigned[f].empty()) {
        size_t free = 0;
        while (free < p.axes.size() && !axisFactor.count(p.axes[free]))
          ++free;
        if (free > 0 && free < p.axes.size()) {
          p.axes.resize(free);
          other = -1;
        }
      }
      // One split refining the other (the optimizer state of ZeRO is split
      // further than its parameter) is compatible; the finer user
      // annotation wins.
      auto isPrefix = [](ArrayRef<StringRef> a, ArrayRef<StringRef> b) {
        return a.size() <= b.size() && llvm::equal(a, b.take_front(a.size()));
      };
      bool sameFactor = other >= 0 && other == owner[f];
      bool compatible = sameFactor && (isPrefix(assigned[f], p.axes) ||
                                       isPrefix(p.axes, assigned[f]));
      // When partitioning, the results fix every pass-through factor; a
      // reduction factor may still need the finer split propagation chose.
      FactorKind kind = rule.getFactorKind(f);
      bool partitioning = policy == ReductionPolicy::MatchResultPartials;
      bool mayRefine = partitioning
                           ? kind == FactorKind::Reduction &&
                                 matchesResultPartials(rule, f, p.axes, known)
                           : tensor.isUser;
      bool refines =
          compatible && mayRefine && p.axes.size() > assigned[f].size() &&
          llvm::none_of(ArrayRef(p.axes).drop_front(assigned[f].size()),
                        [&](StringRef a) { return axisFactor.count(a) != 0; });
      if (refines && rule.getFactorSize(f) % mesh.getGroupSize(p.axes) == 0) {
        assigned[f] = p.axes;
        owner[f] = int(k);
        for (StringRef axis : p.axes)
          axisFactor[axis] = f;
        continue;
      }
      bool clash = other >= 0 && !compatible;
      if (clash && warn && tensor.isUser && known[other].isUser) {
        InFlightDiagnostic diag =
            op->emitWarning()
            << "sharding annotations disagree: " << describe(tensor)
            << " splits a dimension of size " << rule.getFactorSize(f)
            << " over " << formatAxes(p.axes) << ", but "
            << describe(known[other]) << " already splits it (or uses the "
            << "axes) as " << formatAxes(otherAxes) << "; the op follows "
            << describe(known[other]) << " and " << describe(tensor)
            << " is resharded";
        for (int who : {other, int(k)})
          if (known[who].annotatedAt)
            diag.attachNote(*known[who].annotatedAt)
                << "annotation of " << describe(known[who]) << " is here";
        warn = false;
      }
      if (other >= 0 || !assigned[f].empty())
        continue;
      if (rule.getFactorKind(f) == FactorKind::NeedReplication)
        continue;
      if (rule.getFactorKind(f) != FactorKind::Reduction &&
          llvm::any_of(p.axes,
                       [&](StringRef a) { return reserved.contains(a); }))
        continue;
      int64_t blocks = mesh.getGroupSize(p.axes);
      if (rule.getFactorSize(f) % blocks != 0)
        continue;
      if (policy == ReductionPolicy::MatchResultPartials &&
          rule.getFactorKind(f) == FactorKind::Reduction && !tensor.isResult &&
          !matchesResultPartials(rule, f, p.axes, known))
        continue;
      assigned[f] = p.axes;
      owner[f] = int(k);
      for (StringRef axis : p.axes)
        axisFactor[axis] = f;
    }
  }
  keepBlockLayouts(rule, mesh, assigned);
  return assigned;
}

ShardingAttr mlir::cleave::shardingFromFactors(MeshOp mesh,
                                               const ShardingRule &rule,
                                               const TensorFactors &tensor,
                                               const FactorAxes &axes,
                                               bool withPartial) {
  SmallVector<SmallVector<StringRef>> dims;
  llvm::SmallDenseSet<int64_t> present;
  for (const auto &factors : tensor) {
    SmallVector<StringRef> dim;
    for (int64_t f : factors) {
      llvm::append_range(dim, axes[f]);
      present.insert(f);
    }
    dims.push_back(std::move(dim));
  }
  SmallVector<StringRef> partial;
  if (withPartial)
    for (int64_t f = 0; f < rule.getNumFactors(); ++f)
      if (rule.getFactorKind(f) == FactorKind::Reduction && !present.count(f))
        llvm::append_range(partial, axes[f]);
  // Partial axes are a set: list them in mesh order.
  SmallVector<StringRef> ordered;
  for (Attribute name : mesh.getAxisNames())
    if (llvm::is_contained(partial, cast<StringAttr>(name).getValue()))
      ordered.push_back(cast<StringAttr>(name).getValue());
  return ShardingAttr::get(mesh.getContext(), mesh.getSymName(), dims, ordered);
}

RankedTensorType mlir::cleave::getLocalType(RankedTensorType global,
                                            ShardingAttr sharding,
                                            MeshOp mesh) {
  SmallVector<int64_t> shape(global.getShape());
  for (unsigned d = 0, e = shape.size(); d < e; ++d)
    shape[d] /= mesh.getGroupSize(sharding.getDimAxes(d));
  return RankedTensorType::get(shape, global.getElementType());
}

ShardingAttr mlir::cleave::withoutPartial(ShardingAttr sharding) {
  SmallVector<SmallVector<StringRef>> dims;
  for (unsigned d = 0, e = sharding.getRank(); d < e; ++d)
    dims.push_back(sharding.getDimAxes(d));
  return ShardingAttr::get(sharding.getContext(), sharding.getMesh().getValue(),
                           dims);
}

FailureOr<MeshOp> mlir::cleave::getModuleMesh(Operation *op) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    module = op->getParentOfType<ModuleOp>();
  SmallVector<MeshOp> meshes(module.getOps<MeshOp>());
  if (meshes.size() == 1)
    return meshes.front();
  if (meshes.empty())
    return op->emitError() << "needs a cleave.mesh in the module (the device "
                              "mesh the program is split over)";
  return op->emitError() << "has " << meshes.size()
                         << " cleave.mesh ops; partitioning needs exactly one";
}
