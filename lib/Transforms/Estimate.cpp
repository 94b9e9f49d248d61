//===- Estimate.cpp - Price each function with the cost model -------------===//
//
// Implements -cleave-estimate. See Passes.td for the contract. Generic over
// ops: FLOPs from CostOpInterface, bytes from tensor types, collectives
// recognized by their mesh/axes attributes and priced by the cost model.
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Collective.h"
#include "cleave/CostModel/OpCost.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/Transforms/MeshCost.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

#define DEBUG_TYPE "cleave-estimate"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVEESTIMATEPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;
namespace cost = ::cleave::cost;

namespace {

/// Calls `fn` on the type of every operand and result of `op`.
template <typename F>
void forEachType(Operation *op, F fn) {
  for (Type t : op->getOperandTypes())
    fn(t);
  for (Type t : op->getResultTypes())
    fn(t);
}

double bytesOf(Type type) {
  // A started collective's request carries the tensor it delivers.
  if (auto request = dyn_cast<RequestType>(type))
    type = request.getValueType();
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  Type e = tensor.getElementType();
  unsigned bits = e.isIntOrFloat() ? e.getIntOrFloatBitWidth() : 64;
  return double(tensor.getNumElements()) * ((bits + 7) / 8);
}

/// The compute precision of an op: the element type of its first float
/// result or operand.
::cleave::DType dtypeOf(Operation *op) {
  std::optional<::cleave::DType> found;
  forEachType(op, [&](Type t) {
    auto tensor = dyn_cast<RankedTensorType>(t);
    if (found || !tensor || !isa<FloatType>(tensor.getElementType()))
      return;
    Type e = tensor.getElementType();
    found = e.isBF16()                       ? ::cleave::DType::BF16
            : e.isF16()                      ? ::cleave::DType::F16
            : e.getIntOrFloatBitWidth() == 8 ? ::cleave::DType::F8E4M3
                                             : ::cleave::DType::F32;
  });
  return found.value_or(::cleave::DType::F32);
}

struct Totals {
  double flops = 0, bytes = 0, compute = 0, comm = 0;
  std::map<std::string, double> commByAxes;
};

struct CleaveEstimatePass final
    : mlir::cleave::impl::CleaveEstimatePassBase<CleaveEstimatePass> {
  using Base::Base;

  void runOnOperation() override;

  /// The communicator group of a collective's axes on its mesh, or nullopt
  /// if the op is not a collective.
  std::optional<cost::GroupPlacement> groupOf(Operation *op,
                                              std::string &axesLabel) {
    auto meshName = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
    auto axes = op->getAttrOfType<ArrayAttr>("axes");
    MeshOp mesh = meshName ? lookupMesh(op, meshName) : MeshOp();
    if (!mesh || !axes)
      return std::nullopt;
    SmallVector<StringRef> names;
    for (Attribute a : axes)
      names.push_back(cast<StringAttr>(a).getValue());
    axesLabel = llvm::join(names, "+");
    return placeAxes(mesh, names);
  }

  void accumulate(Operation *op, const cost::ClusterSpec &cl, Totals &t) {
    std::string axes;
    // A start (`cleave.all_reduce_start`) is priced as its collective; its
    // wait costs nothing more.
    StringRef name = op->getName().stripDialect();
    name.consume_back("_start");
    std::optional<cost::CollectiveKind> kind =
        cost::parseCollectiveKind(name.str());
    std::optional<cost::GroupPlacement> group;
    if (kind)
      group = groupOf(op, axes);
    if (group) {
      double bytes = 0; // the full buffer: the larger of input and output
      forEachType(op, [&](Type ty) { bytes = std::max(bytes, bytesOf(ty)); });
      double time = cost::collectiveCost(*kind, bytes, *group, cl,
                                         cost::defaultConstants())
                        .time;
      t.comm += time;
      t.commByAxes[axes] += time;
      return;
    }
    auto costOp = dyn_cast<CostOpInterface>(op);
    if (!costOp)
      return;
    double flops = costOp.getFlops(), bytes = 0;
    forEachType(op, [&](Type ty) { bytes += bytesOf(ty); });
    t.flops += flops;
    t.bytes += bytes;
    if (flops > 0 || bytes > 0)
      t.compute += cost::rooflineTime(flops, bytes, dtypeOf(op), cl.gpu) +
                   cost::defaultConstants().kernelOverhead;
  }
};

void CleaveEstimatePass::runOnOperation() {
  ModuleOp module = getOperation();
  cost::Result<cost::ClusterSpec> cl =
      clusterForModule(module, cluster, clusterFile, nodes);
  if (!cl) {
    // Reported on the first function (a location in the file) if any.
    Operation *at = module;
    module.walk([&](func::FuncOp f) {
      at = f;
      return WalkResult::interrupt();
    });
    at->emitError() << "cleave-estimate: " << cl.error();
    return signalPassFailure();
  }
  module.walk([&](func::FuncOp func) {
    Totals t;
    func.walk([&](Operation *op) { accumulate(op, *cl, t); });
    std::string perAxis;
    for (const auto &[axes, time] : t.commByAxes)
      perAxis += (perAxis.empty() ? " (" : ", ") + axes + " " +
                 llvm::formatv("{0:F3} us", time * 1e6).str();
    if (!perAxis.empty())
      perAxis += ")";
    func.emitRemark() << "cleave-estimate on " << cl->name << ": "
                      << llvm::formatv("{0:F0}", t.flops) << " FLOP, "
                      << llvm::formatv("{0:F0}", t.bytes)
                      << " bytes moved by compute, compute "
                      << llvm::formatv("{0:F3}", t.compute * 1e6)
                      << " us, communication "
                      << llvm::formatv("{0:F3}", t.comm * 1e6) << " us"
                      << perAxis << ", total "
                      << llvm::formatv("{0:F3}", (t.compute + t.comm) * 1e6)
                      << " us";
  });
}

} // namespace
