//===- CudaGemmEpilogues.cpp - Bias additions fused into GEMMs ------------===//
//
// Implements -cleave-cuda-gemm-epilogues. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "cleave/Conversion/RuntimeDType.h"
#include "cleave/Runtime/CudaRuntime.h"
#include "cleave/Runtime/Runtime.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#define DEBUG_TYPE "cleave-cuda-gemm-epilogues"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVECUDAGEMMEPILOGUESPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

constexpr StringLiteral kEpilogue = "cleave_rt_cuda_gemm_epilogue";

/// A bias addition fed by a GEMM: the parts of the rewrite.
struct Match {
  linalg::LinalgOp gemm;
  bool transA = false, transB = false;
  linalg::GenericOp add;
  Value bias, out;
  /// The GEMM's output buffer and the zero fill before the GEMM (or null).
  memref::AllocOp result;
  linalg::FillOp fill;
};

/// The runtime's code of `type` when the bias epilogue takes it (f32 and
/// the 16-bit floats; not f64).
std::optional<int32_t> epilogueDTypeCode(Type type) {
  const ::cleave::rt::DTypeInfo *info = lookupRuntimeDType(type);
  if (!info || !info->isFloat || info->bits > 32)
    return std::nullopt;
  return info->code;
}

/// Whether `body` computes `in0 + in1` (widened to f32 and narrowed back
/// for 16-bit types).
bool isAddition(Block &body) {
  Value yielded = body.getTerminator()->getOperand(0);
  if (auto trunc = yielded.getDefiningOp<arith::TruncFOp>())
    yielded = trunc.getIn();
  auto add = yielded.getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  auto source = [](Value v) -> Value {
    if (auto ext = v.getDefiningOp<arith::ExtFOp>())
      return ext.getIn();
    return v;
  };
  Value a = source(add.getLhs()), b = source(add.getRhs());
  Value x = body.getArgument(0), y = body.getArgument(1);
  size_t expected = 2 + (yielded != body.getTerminator()->getOperand(0)) +
                    (a != add.getLhs()) + (b != add.getRhs());
  return ((a == x && b == y) || (a == y && b == x)) &&
         body.getOperations().size() == expected;
}

/// The buffer behind a chain of views.
Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

bool hasIdentityLayout(Value v) {
  return cast<MemRefType>(v.getType()).getLayout().isIdentity();
}

/// Whether `view` (a reshape of a buffer) is used only by `reader`, maybe
/// through further reshapes.
bool onlyReadThroughReshapes(Value view, Operation *reader) {
  for (Operation *user : view.getUsers()) {
    if (user == reader)
      continue;
    if (!isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(user) ||
        !onlyReadThroughReshapes(user->getResult(0), reader))
      return false;
  }
  return true;
}

/// A contiguous buffer of `rows` x `cols` elements, rows innermost-last.
bool isMatrixOf(Value v, int64_t rows, int64_t cols) {
  auto type = cast<MemRefType>(v.getType());
  return type.getLayout().isIdentity() && type.hasStaticShape() &&
         type.getRank() >= 1 && type.getShape().back() == cols &&
         type.getNumElements() == rows * cols;
}

/// The generic, if it is a bias addition over the GEMM output `input`.
std::optional<Match> matchAddition(linalg::GenericOp add) {
  if (add.getNumDpsInputs() != 2 || add.getNumDpsInits() != 1 ||
      add.getNumReductionLoops() != 0 || add.getNumLoops() < 2 ||
      !isAddition(add.getRegion().front()))
    return std::nullopt;
  unsigned rank = add.getNumLoops();
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, add.getContext());
  AffineMap last = AffineMap::get(
      rank, 0, getAffineDimExpr(rank - 1, add.getContext()), add.getContext());
  auto maps = add.getIndexingMapsArray();
  if (maps[0] != id || maps[1] != last || maps[2] != id)
    return std::nullopt;
  Match m;
  m.add = add;
  Value c = add.getDpsInputOperand(0)->get();
  m.bias = add.getDpsInputOperand(1)->get();
  m.out = add.getDpsInitOperand(0)->get();
  Type element = getElementTypeOrSelf(c.getType());
  if (!epilogueDTypeCode(element) ||
      getElementTypeOrSelf(m.bias.getType()) != element ||
      getElementTypeOrSelf(m.out.getType()) != element ||
      !hasIdentityLayout(c) || !hasIdentityLayout(m.out) ||
      !hasIdentityLayout(m.bias))
    return std::nullopt;
  m.result = rootOf(c).getDefiningOp<memref::AllocOp>();
  if (!m.result)
    return std::nullopt;
  // The GEMM output is written by its fill and the GEMM, read only by the
  // addition, and freed.
  for (Operation *user : m.result->getUsers()) {
    if (auto fill = dyn_cast<linalg::FillOp>(user)) {
      m.fill = fill;
      continue;
    }
    if (isa<linalg::MatmulOp, linalg::MatmulTransposeAOp,
            linalg::MatmulTransposeBOp>(user)) {
      m.gemm = cast<linalg::LinalgOp>(user);
      m.transA = isa<linalg::MatmulTransposeAOp>(user);
      m.transB = isa<linalg::MatmulTransposeBOp>(user);
      continue;
    }
    if (isa<memref::DeallocOp>(user))
      continue;
    if (user == add.getOperation() ||
        (isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(user) &&
         onlyReadThroughReshapes(user->getResult(0), add)))
      continue;
    return std::nullopt;
  }
  if (!m.gemm || m.gemm.getDpsInitOperand(0)->get() != m.result.getResult() ||
      m.gemm->getBlock() != add->getBlock() || !m.gemm->isBeforeInBlock(add))
    return std::nullopt;
  if (m.fill) {
    auto zero = m.fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
    auto value = zero ? dyn_cast<FloatAttr>(zero.getValue()) : FloatAttr();
    if (!value || !value.getValue().isZero() ||
        m.fill.getOutputs()[0] != m.result.getResult() ||
        !m.fill->isBeforeInBlock(m.gemm))
      return std::nullopt;
  }
  // The GEMM moves to the addition: nothing in between may write memory.
  for (Operation *op = m.gemm->getNextNode(); op != add.getOperation();
       op = op->getNextNode())
    if (!isPure(op) && !isa<memref::AllocOp>(op))
      return std::nullopt;
  for (Value operand : m.gemm.getDpsInputs())
    if (!hasIdentityLayout(operand))
      return std::nullopt;
  auto cType = cast<MemRefType>(m.result.getType());
  int64_t rows = cType.getDimSize(0), cols = cType.getDimSize(1);
  if (!isMatrixOf(c, rows, cols) || !isMatrixOf(m.out, rows, cols) ||
      cast<MemRefType>(m.bias.getType()).getNumElements() != cols)
    return std::nullopt;
  return m;
}

/// `memref` as an `!llvm.ptr` to its first element (identity layouts).
Value pointerTo(OpBuilder &b, Location loc, Value memref) {
  Value aligned = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, memref);
  Value address = b.create<arith::IndexCastOp>(loc, b.getI64Type(), aligned);
  return b.create<LLVM::IntToPtrOp>(
      loc, LLVM::LLVMPointerType::get(b.getContext()), address);
}

func::FuncOp declareEpilogue(ModuleOp module) {
  if (auto f = module.lookupSymbol<func::FuncOp>(kEpilogue))
    return f;
  OpBuilder b(module.getBodyRegion());
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  Type ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto f = b.create<func::FuncOp>(
      module.getLoc(), kEpilogue,
      b.getFunctionType({i32, i32, i32, i64, i64, i64, ptr, i64, ptr, i64, ptr,
                         i64, i32, ptr},
                        {}));
  f.setPrivate();
  return f;
}

void rewrite(Match m, func::FuncOp callee) {
  OpBuilder b(m.add);
  Location loc = m.add.getLoc();
  Value a = m.gemm.getDpsInputOperand(0)->get();
  Value w = m.gemm.getDpsInputOperand(1)->get();
  auto aType = cast<MemRefType>(a.getType());
  auto wType = cast<MemRefType>(w.getType());
  auto cType = cast<MemRefType>(m.result.getType());
  int64_t rows = cType.getDimSize(0), cols = cType.getDimSize(1);
  int64_t k = aType.getDimSize(m.transA ? 0 : 1);
  auto i32 = [&](int64_t v) {
    return b.create<arith::ConstantIntOp>(loc, v, 32).getResult();
  };
  auto i64 = [&](int64_t v) {
    return b.create<arith::ConstantIntOp>(loc, v, 64).getResult();
  };
  int32_t dtype = *epilogueDTypeCode(cType.getElementType());
  b.create<func::CallOp>(
      loc, callee,
      ValueRange{i32(dtype), i32(m.transA), i32(m.transB), i64(rows), i64(cols),
                 i64(k), pointerTo(b, loc, a), i64(aType.getDimSize(1)),
                 pointerTo(b, loc, w), i64(wType.getDimSize(1)),
                 pointerTo(b, loc, m.out), i64(cols), i32(CLEAVE_EPILOGUE_BIAS),
                 pointerTo(b, loc, m.bias)});
  m.add.erase();
  m.gemm.erase();
  if (m.fill)
    m.fill.erase();
}

/// Removes the GEMM output buffer once only its deallocation uses it.
void eraseDeadBuffer(memref::AllocOp alloc) {
  SmallVector<Operation *> users(alloc->getUsers());
  if (!llvm::all_of(users,
                    [](Operation *u) { return isa<memref::DeallocOp>(u); }))
    return;
  for (Operation *user : users)
    user->erase();
  alloc.erase();
}

struct CleaveCudaGemmEpiloguesPass final
    : mlir::cleave::impl::CleaveCudaGemmEpiloguesPassBase<
          CleaveCudaGemmEpiloguesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Match> matches;
    module.walk([&](linalg::GenericOp op) {
      if (op.hasPureBufferSemantics())
        if (std::optional<Match> m = matchAddition(op))
          matches.push_back(*m);
    });
    if (matches.empty())
      return;
    func::FuncOp callee = declareEpilogue(module);
    for (Match &m : matches) {
      Value view = m.add.getDpsInputOperand(0)->get();
      rewrite(m, callee);
      // The views of the GEMM output that only the addition read.
      while (view.use_empty() && view.getDefiningOp<ViewLikeOpInterface>()) {
        Operation *def = view.getDefiningOp();
        view = cast<ViewLikeOpInterface>(def).getViewSource();
        def->erase();
      }
      eraseDeadBuffer(m.result);
    }
  }
};

} // namespace
