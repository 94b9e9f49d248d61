//===- LinalgToRuntime.cpp - Bufferized matmuls to runtime GEMM calls -----===//
//
// Implements -cleave-linalg-to-runtime. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "cleave/Conversion/RuntimeDType.h"
#include "cleave/Runtime/Runtime.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

#define DEBUG_TYPE "cleave-linalg-to-runtime"

namespace mlir::cleave {
#define GEN_PASS_DEF_CLEAVELINALGTORUNTIMEPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

constexpr StringLiteral kGemm = "cleave_rt_gemm";

/// The runtime's code of `type` when the runtime GEMM takes it (floating
/// point).
std::optional<int32_t> gemmDTypeCode(Type type) {
  const ::cleave::rt::DTypeInfo *info = lookupRuntimeDType(type);
  if (!info || !info->isFloat)
    return std::nullopt;
  return info->code;
}

/// One GEMM operand as the runtime sees it.
struct GemmOperand {
  Value ptr, ld, batchStride;
};

bool hasUnitInnerStride(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(getStridesAndOffset(type, strides, offset)))
    return false;
  return strides.empty() || strides.back() == 1;
}

/// A contiguous copy of `memref` when its innermost stride is not 1.
Value contiguous(OpBuilder &b, Location loc, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  if (hasUnitInnerStride(type))
    return memref;
  auto dense = MemRefType::get(type.getShape(), type.getElementType());
  Value copy = b.create<memref::AllocOp>(loc, dense);
  b.create<memref::CopyOp>(loc, memref, copy);
  return copy;
}

GemmOperand describe(OpBuilder &b, Location loc, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  int64_t rank = type.getRank();
  auto md = b.create<memref::ExtractStridedMetadataOp>(loc, memref);
  Value aligned = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, memref);
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  Value offsetBytes = b.create<arith::MulIOp>(
      loc, md.getOffset(), b.create<arith::ConstantIndexOp>(loc, bytes));
  Value address = b.create<arith::IndexCastOp>(
      loc, b.getI64Type(), b.create<arith::AddIOp>(loc, aligned, offsetBytes));
  GemmOperand op;
  op.ptr = b.create<LLVM::IntToPtrOp>(
      loc, LLVM::LLVMPointerType::get(b.getContext()), address);
  auto toI64 = [&](Value index) {
    return b.create<arith::IndexCastOp>(loc, b.getI64Type(), index).getResult();
  };
  op.ld = toI64(md.getStrides()[rank - 2]);
  op.batchStride = rank == 3
                       ? toI64(md.getStrides()[0])
                       : b.create<arith::ConstantIntOp>(loc, 0, 64).getResult();
  return op;
}

func::FuncOp declareGemm(ModuleOp module) {
  if (auto f = module.lookupSymbol<func::FuncOp>(kGemm))
    return f;
  OpBuilder b(module.getBodyRegion());
  Type i32 = b.getI32Type(), i64 = b.getI64Type(), f64 = b.getF64Type();
  Type ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto type = b.getFunctionType({i32, i32, i32, i64, i64, i64, i64, f64, ptr,
                                 i64, i64, ptr, i64, i64, f64, ptr, i64, i64},
                                {});
  auto f = b.create<func::FuncOp>(module.getLoc(), kGemm, type);
  f.setPrivate();
  return f;
}

/// Replaces one bufferized matmul-like op; `ta`/`tb` say how A and B are
/// stored. Returns failure if the element type has no runtime GEMM.
LogicalResult lowerGemm(linalg::LinalgOp op, bool ta, bool tb,
                        func::FuncOp gemm) {
  // Taken before the operand descriptions below are inserted in between.
  Operation *prev = op->getPrevNode();
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value a = op.getDpsInputOperand(0)->get();
  Value bm = op.getDpsInputOperand(1)->get();
  Value c = op.getDpsInitOperand(0)->get();
  auto aType = cast<MemRefType>(a.getType());
  auto cType = cast<MemRefType>(c.getType());
  std::optional<int32_t> dtype = gemmDTypeCode(aType.getElementType());
  if (!dtype || aType.getElementType() != cType.getElementType() ||
      cast<MemRefType>(bm.getType()).getElementType() != aType.getElementType())
    return op.emitError() << "no runtime GEMM for element types "
                          << aType.getElementType() << " x "
                          << cType.getElementType();
  int64_t rank = cType.getRank();
  int64_t batch = rank == 3 ? cType.getDimSize(0) : 1;
  int64_t m = cType.getDimSize(rank - 2), n = cType.getDimSize(rank - 1);
  int64_t k = aType.getDimSize(ta ? rank - 2 : rank - 1);
  a = contiguous(b, loc, a);
  bm = contiguous(b, loc, bm);
  Value cDense = contiguous(b, loc, c);
  GemmOperand da = describe(b, loc, a), db = describe(b, loc, bm),
              dc = describe(b, loc, cDense);
  auto i32 = [&](int64_t v) {
    return b.create<arith::ConstantIntOp>(loc, v, 32).getResult();
  };
  auto i64 = [&](int64_t v) {
    return b.create<arith::ConstantIntOp>(loc, v, 64).getResult();
  };
  auto f64 = [&](double v) {
    return b.create<arith::ConstantFloatOp>(loc, APFloat(v), b.getF64Type())
        .getResult();
  };
  // linalg accumulates into C. When C was just filled with zeros, the GEMM
  // overwrites it instead (beta = 0) and the fill goes: one pass less over
  // every output.
  double beta = 1.0;
  if (auto fill = dyn_cast_or_null<linalg::FillOp>(prev)) {
    auto zero = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
    auto value = zero ? dyn_cast<FloatAttr>(zero.getValue()) : FloatAttr();
    if (fill.getOutputs()[0] == c && value && value.getValue().isZero() &&
        cDense == c) {
      fill->erase();
      beta = 0.0;
    }
  }
  b.create<func::CallOp>(
      loc, gemm,
      ValueRange{i32(*dtype), i32(ta), i32(tb), i64(batch), i64(m), i64(n),
                 i64(k), f64(1.0), da.ptr, da.ld, da.batchStride, db.ptr, db.ld,
                 db.batchStride, f64(beta), dc.ptr, dc.ld, dc.batchStride});
  if (cDense != c)
    b.create<memref::CopyOp>(loc, cDense, c);
  op->erase();
  return success();
}

struct CleaveLinalgToRuntimePass final
    : mlir::cleave::impl::CleaveLinalgToRuntimePassBase<
          CleaveLinalgToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::tuple<linalg::LinalgOp, bool, bool>> gemms;
    module.walk([&](linalg::LinalgOp op) {
      if (!op.hasPureBufferSemantics())
        return;
      if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op))
        gemms.emplace_back(op, false, false);
      else if (isa<linalg::MatmulTransposeAOp, linalg::BatchMatmulTransposeAOp>(
                   op))
        gemms.emplace_back(op, true, false);
      else if (isa<linalg::MatmulTransposeBOp, linalg::BatchMatmulTransposeBOp>(
                   op))
        gemms.emplace_back(op, false, true);
    });
    if (gemms.empty())
      return;
    func::FuncOp gemm = declareGemm(module);
    for (auto [op, ta, tb] : gemms)
      if (failed(lowerGemm(op, ta, tb, gemm)))
        return signalPassFailure();
  }
};

} // namespace
