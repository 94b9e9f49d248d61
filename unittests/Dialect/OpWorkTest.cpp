//===- OpWorkTest.cpp - Every op's work against hand-counted values -------===//
//
// One instance of every op with CostOpInterface, and what it must report on
// its own (f32 unless said) shapes, counted by hand: FLOPs by kind, bytes
// read and written, fusable or not. A new op with the interface must get a
// row here (EveryCostOpHasAHandCountedRow).
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringMap.h"
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;

namespace {

constexpr const char *kOps = R"mlir(
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) {
  %c = cleave.constant dense<0.5> : tensor<4x8xf32>
  %0 = cleave.add %a, %b : tensor<4x8xf32>
  %1 = cleave.sub %0, %c : tensor<4x8xf32>
  %2 = cleave.mul %1, %b : tensor<4x8xf32>
  %3 = cleave.div %2, %a : tensor<4x8xf32>
  %4 = cleave.max %3, %a : tensor<4x8xf32>
  %5 = cleave.min %4, %b : tensor<4x8xf32>
  %6 = cleave.pow %5, %c : tensor<4x8xf32>
  %7 = cleave.neg %6 : tensor<4x8xf32>
  %8 = cleave.exp %7 : tensor<4x8xf32>
  %9 = cleave.log %8 : tensor<4x8xf32>
  %10 = cleave.sqrt %9 : tensor<4x8xf32>
  %11 = cleave.rsqrt %10 : tensor<4x8xf32>
  %12 = cleave.tanh %11 : tensor<4x8xf32>
  %13 = cleave.sigmoid %12 : tensor<4x8xf32>
  %14 = cleave.relu %13 : tensor<4x8xf32>
  %15 = cleave.silu %14 : tensor<4x8xf32>
  %16 = cleave.gelu %15 : tensor<4x8xf32>
  %18 = cleave.gelu_grad %16, %15 : tensor<4x8xf32>
  %19 = cleave.silu_grad %14, %18 : tensor<4x8xf32>
  %20 = cleave.relu_grad %13, %19 : tensor<4x8xf32>
  %21 = cleave.cast %20 : tensor<4x8xf32> to tensor<4x8xbf16>
  %22 = cleave.sharding_constraint %0 <@world, [dp, _]> : tensor<4x8xf32>
  return
}
cleave.mesh @world(dp = 2 : ib)
func.func @reductions(%x: tensor<2x4x8xf32>) {
  %0 = cleave.reduce_sum %x dims = [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
  %1 = cleave.reduce_mean %x dims = [1] : tensor<2x4x8xf32> -> tensor<2x8xf32>
  %2 = cleave.reduce_max %x dims = [2] : tensor<2x4x8xf32> -> tensor<2x4xf32>
  return
}
func.func @shapes(%x: tensor<2x4x12xf32>, %b: tensor<12xf32>) {
  %0 = cleave.reshape %x : tensor<2x4x12xf32> to tensor<2x4x3x4xf32>
  %1 = cleave.transpose %0 permutation = [0, 2, 1, 3] : tensor<2x4x3x4xf32> -> tensor<2x3x4x4xf32>
  %2 = cleave.broadcast %b dims = [2] : tensor<12xf32> -> tensor<2x4x12xf32>
  %3 = cleave.slice %2 offsets = [0, 0, 2] sizes = [2, 4, 5] strides = [1, 1, 2] : tensor<2x4x12xf32> -> tensor<2x4x5xf32>
  %4 = cleave.concat %0, %0 dim = 3 : (tensor<2x4x3x4xf32>, tensor<2x4x3x4xf32>) -> tensor<2x4x3x8xf32>
  %5 = cleave.pad %3 low = [0, 1, 0] high = [0, 2, 1] interior = [0, 0, 1] : tensor<2x4x5xf32> -> tensor<2x7x10xf32>
  %6 = cleave.optimization_barrier %x : tensor<2x4x12xf32>
  return
}
func.func @nn(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %g: tensor<8xf32>, %bb: tensor<8xf32>,
              %ids: tensor<2x4xi32>, %table: tensor<10x8xf32>, %seed: tensor<i64>) {
  %0 = cleave.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %xt = cleave.transpose %x permutation = [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %1 = cleave.matmul %xt, %xt {transpose_lhs} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %dw = cleave.matmul %x, %0 {reduce_batch, transpose_lhs} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %2 = cleave.softmax %1 dim = 2 : tensor<2x4x4xf32>
  %3 = cleave.softmax_grad %2, %1 dim = 2 : tensor<2x4x4xf32>
  %4 = cleave.layer_norm %x, %g, %bb {epsilon = 1.0e-6 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %5:3 = cleave.layer_norm_grad %x, %g, %4 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %6 = cleave.rms_norm %x, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %7:2 = cleave.rms_norm_grad %x, %g, %6 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %8 = cleave.embedding %table, %ids : (tensor<10x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %9 = cleave.embedding_grad %ids, %8 : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  %10 = cleave.dropout %8, %seed {rate = 0.1 : f64, stream = 7 : i64} : (tensor<2x4x8xf32>, tensor<i64>) -> tensor<2x4x8xf32>
  %11 = cleave.cross_entropy %0, %ids : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %12 = cleave.cross_entropy_grad %0, %ids, %11 : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x16xf32>
  %n = cleave.label_count %ids {ignore_index = -1 : i64} : (tensor<2x4xi32>) -> tensor<f32>
  return
}
func.func @attention(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>) {
  %0 = cleave.rotary %q : tensor<2x8x4x16xf32>
  %2 = cleave.attention %0, %k, %v {causal} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
  %3:3 = cleave.attention_grad %0, %k, %v, %2 {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  return
}
func.func @moe(%l: tensor<2x8x4xf32>, %x: tensor<2x8x16xf32>, %out: tensor<4x2x4x16xf32>, %dloss: tensor<f32>) {
  %0:2 = cleave.moe_router %l {top_k = 2 : i64, capacity_factor = 1.0 : f64} : (tensor<2x8x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>)
  %1 = cleave.moe_router_grad %l, %0#1, %0#0 {top_k = 2 : i64} : (tensor<2x8x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4xf32>
  %2 = cleave.moe_dispatch %x, %0#1 : (tensor<2x8x16xf32>, tensor<2x8x4x4xf32>) -> tensor<4x2x4x16xf32>
  %3 = cleave.moe_combine %0#0, %out : (tensor<2x8x4x4xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x16xf32>
  %4 = cleave.moe_weights_grad %x, %out : (tensor<2x8x16xf32>, tensor<4x2x4x16xf32>) -> tensor<2x8x4x4xf32>
  %5 = cleave.moe_aux_loss %l {top_k = 2 : i64} : (tensor<2x8x4xf32>) -> tensor<f32>
  %6 = cleave.moe_aux_loss_grad %l, %dloss {top_k = 2 : i64} : (tensor<2x8x4xf32>, tensor<f32>) -> tensor<2x8x4xf32>
  return
}
func.func @optimizers(%p: tensor<4x4xf32>, %g: tensor<4x4xf32>, %gb: tensor<4x4xbf16>,
                      %m: tensor<4x4xf32>, %v: tensor<4x4xf32>, %lr: tensor<f32>, %t: tensor<f32>) {
  %0 = cleave.sgd %p, %g, %lr : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %1:3 = cleave.adamw %p, %gb, %m, %v, %lr, %t : (tensor<4x4xf32>, tensor<4x4xbf16>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  %2 = cleave.lr_schedule %lr, %t {decay = #cleave.lr_decay<cosine>, warmup_steps = 10 : i64, decay_steps = 30 : i64, min_lr = 6.0e-05 : f64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return
}
)mlir";

/// What the first instance of an op must report on its own types.
struct Expected {
  WorkKind kind;
  double gemm, attention, vector, read, written;
  bool fusable;
};

constexpr WorkKind N = WorkKind::None, V = WorkKind::Vector, G = WorkKind::Gemm,
                   A = WorkKind::Attention;

// 4x8 f32 operands of elementwise ops: 32 elements, 128 bytes each.
const Expected kBinary{V, 0, 0, 32, 256, 128, true};
const Expected kUnary{V, 0, 0, 32, 128, 128, true};

const llvm::StringMap<Expected> &expectations() {
  static const llvm::StringMap<Expected> table = {
      {"cleave.constant", {N, 0, 0, 0, 0, 0, false}},
      {"cleave.add", kBinary},
      {"cleave.sub", kBinary},
      {"cleave.mul", kBinary},
      {"cleave.div", kBinary},
      {"cleave.max", kBinary},
      {"cleave.min", kBinary},
      {"cleave.pow", kBinary},
      {"cleave.neg", kUnary},
      {"cleave.exp", kUnary},
      {"cleave.log", kUnary},
      {"cleave.sqrt", kUnary},
      {"cleave.rsqrt", kUnary},
      {"cleave.tanh", kUnary},
      {"cleave.sigmoid", kUnary},
      {"cleave.relu", kUnary},
      {"cleave.silu", kUnary},
      {"cleave.gelu", kUnary},
      {"cleave.gelu_grad", kBinary},
      {"cleave.silu_grad", kBinary},
      {"cleave.relu_grad", kBinary},
      // Reads 32 f32, writes 32 bf16.
      {"cleave.cast", {V, 0, 0, 32, 128, 64, true}},
      {"cleave.sharding_constraint", {N, 0, 0, 0, 0, 0, false}},
      // 2x4x8 input (64 elements, 256 bytes): one operation per element.
      {"cleave.reduce_sum", {V, 0, 0, 64, 256, 32, false}},
      {"cleave.reduce_mean", {V, 0, 0, 64, 256, 64, false}},
      {"cleave.reduce_max", {V, 0, 0, 64, 256, 32, false}},
      {"cleave.reshape", {N, 0, 0, 0, 0, 0, false}},
      // 96 elements copied.
      {"cleave.transpose", {V, 0, 0, 0, 384, 384, false}},
      // 12 read, 96 written (fused away into the consumer).
      {"cleave.broadcast", {V, 0, 0, 0, 48, 384, true}},
      // Keeps 40 of 96 elements: reads only those.
      {"cleave.slice", {V, 0, 0, 0, 160, 160, false}},
      {"cleave.concat", {V, 0, 0, 0, 768, 768, false}},
      // 40 in, 2x7x10 = 140 out.
      {"cleave.pad", {V, 0, 0, 0, 160, 560, false}},
      // The identity that no pass looks through: no kernel.
      {"cleave.optimization_barrier", {N, 0, 0, 0, 0, 0, false}},
      // [2, 4, 8] x [16, 8]^T: 2 * (2*4) * 16 * 8 flops; reads 64 + 128
      // elements, writes 128.
      {"cleave.matmul", {G, 2048, 0, 0, 768, 512, false}},
      // 2x4x4 (32 elements): 5 and 4 per element.
      {"cleave.softmax", {V, 0, 0, 160, 128, 128, false}},
      {"cleave.softmax_grad", {V, 0, 0, 128, 256, 128, false}},
      // x 64, gamma 8, beta 8 elements: 8 per element of x.
      {"cleave.layer_norm", {V, 0, 0, 512, 320, 256, false}},
      // x, gamma, dy (64 + 8 + 64) in; dx, dgamma, dbeta (64 + 8 + 8) out.
      {"cleave.layer_norm_grad", {V, 0, 0, 768, 544, 320, false}},
      {"cleave.rms_norm", {V, 0, 0, 320, 288, 256, false}},
      {"cleave.rms_norm_grad", {V, 0, 0, 512, 544, 288, false}},
      // 8 i32 ids and the 8 looked-up rows of 8 f32 (not the 10-row table).
      {"cleave.embedding", {V, 0, 0, 0, 32 + 256, 256, false}},
      // ids + dy, and the 64 f32 gradient elements it adds into (read and
      // written; the buffer is zeroed once per step, not here).
      {"cleave.embedding_grad", {V, 0, 0, 64, 32 + 256 + 256, 256, false}},
      // 64 f32 and the i64 seed in.
      {"cleave.dropout", {V, 0, 0, 64, 256 + 8, 256, true}},
      // 2x4x16 logits (128 elements) and 8 i32 labels in, a scalar out; the
      // f32 passes over the logits read 20 and write 16 bytes a logit.
      {"cleave.cross_entropy",
       {V, 0, 0, 512, 512 + 32 + 20 * 128, 4 + 16 * 128, false}},
      // Reads the saved f32 softmax twice (8 bytes a logit), the labels and
      // the loss gradient; writes 4 + 4 bytes a logit.
      {"cleave.cross_entropy_grad",
       {V, 0, 0, 512, 8 * 128 + 32 + 4, 512 + 4 * 128, false}},
      {"cleave.label_count", {V, 0, 0, 8, 32, 4, false}},
      // MoE with G 2, S 8, E 4, C 4, H 16, top-2: 64 logits (256 bytes),
      // one-hots of 256 elements (1024 bytes), tokens of 256 (1024 bytes),
      // expert buffers of 512 (2048 bytes). The router: softmax 5, an E-wide
      // rank count 4 and a slot count S * k / E = 4 per logit; its gradient
      // 8 + E per logit and one per one-hot element.
      {"cleave.moe_router", {V, 0, 0, 64 * 13, 256, 2048, false}},
      {"cleave.moe_router_grad",
       {V, 0, 0, 64 * 12 + 256, 256 + 2048, 256, false}},
      // The dense one-hot einsums: 2 * (G S E C = 256) * H flops.
      {"cleave.moe_dispatch", {V, 0, 0, 8192, 2048, 2048, false}},
      {"cleave.moe_combine", {V, 0, 0, 8192, 3072, 1024, false}},
      {"cleave.moe_weights_grad", {V, 0, 0, 8192, 3072, 1024, false}},
      // 8 + E per logit (12 + E for the gradient).
      {"cleave.moe_aux_loss", {V, 0, 0, 768, 256, 4, false}},
      {"cleave.moe_aux_loss_grad", {V, 0, 0, 1024, 260, 256, false}},
      // 2x8x4x16 = 1024 elements, 3 per element.
      {"cleave.rotary", {V, 0, 0, 3072, 4096, 4096, false}},
      // B 2, Hq 4, S = Skv = 8, D = Dv = 16: 2 * 2*4*8*8 * (16 + 16); q, k,
      // v = 1024 + 512 + 512 elements in, 1024 out.
      {"cleave.attention", {A, 0, 32768, 0, 8192, 4096, false}},
      {"cleave.attention_grad", {A, 0, 81920, 0, 12288, 8192, false}},
      // 16 parameters: 3 per element; p, g and lr in.
      {"cleave.sgd", {V, 0, 0, 48, 132, 64, false}},
      // 12 per parameter; p f32, g bf16, m, v, lr, step in; p, m, v out.
      {"cleave.adamw", {V, 0, 0, 192, 64 + 32 + 64 + 64 + 8, 192, false}},
      // One scalar: about 10 operations (warmup ratio, clamp, cosine); lr
      // and step in, the rate out.
      {"cleave.lr_schedule", {V, 0, 0, 10, 8, 4, false}},
  };
  return table;
}

class OpWorkTest : public ::testing::Test {
protected:
  OpWorkTest() {
    context.loadDialect<CleaveDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kOps, &context);
  }

  /// The first op named `name` in kOps.
  Operation *first(StringRef name) {
    Operation *found = nullptr;
    module->walk([&](Operation *op) {
      if (!found && op->getName().getStringRef() == name)
        found = op;
    });
    return found;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(OpWorkTest, EveryOpReportsItsHandCountedWork) {
  ASSERT_TRUE(module);
  for (const auto &entry : expectations()) {
    std::string name = entry.getKey().str();
    const Expected &e = entry.getValue();
    Operation *op = first(name);
    ASSERT_TRUE(op) << name << " has no instance in the test module";
    auto cost = dyn_cast<CostOpInterface>(op);
    ASSERT_TRUE(cost) << name;
    OpWork w = cost.getWork(OpShapes::of(op));
    EXPECT_EQ(w.kind, e.kind) << name;
    EXPECT_DOUBLE_EQ(w.gemmFlops, e.gemm) << name;
    EXPECT_DOUBLE_EQ(w.attentionFlops, e.attention) << name;
    EXPECT_DOUBLE_EQ(w.vectorFlops, e.vector) << name;
    EXPECT_DOUBLE_EQ(w.bytesRead, e.read) << name;
    EXPECT_DOUBLE_EQ(w.bytesWritten, e.written) << name;
    EXPECT_EQ(w.fusable, e.fusable) << name;
    EXPECT_DOUBLE_EQ(cost.getFlops(), e.gemm + e.attention + e.vector) << name;
  }
}

TEST_F(OpWorkTest, EveryCostOpHasAHandCountedRow) {
  for (RegisteredOperationName name : context.getRegisteredOperations())
    if (name.hasInterface<CostOpInterface>())
      EXPECT_TRUE(expectations().count(name.getStringRef()))
          << name.getStringRef().str()
          << " implements CostOpInterface but OpWorkTest has no row for it";
}

/// Expects `w` to be `batch` GEMMs of [m, k] x [k, n] and their FLOPs.
void expectGemm(const char *what, const OpWork &w, double m, double n, double k,
                double batch) {
  SCOPED_TRACE(what);
  EXPECT_DOUBLE_EQ(w.gemm.m, m);
  EXPECT_DOUBLE_EQ(w.gemm.n, n);
  EXPECT_DOUBLE_EQ(w.gemm.k, k);
  EXPECT_DOUBLE_EQ(w.gemm.batch, batch);
  EXPECT_DOUBLE_EQ(w.gemmFlops, 2.0 * batch * m * n * k);
}

TEST_F(OpWorkTest, MatmulReportsItsGemmShape) {
  ASSERT_TRUE(module);
  // A shared weight folds the batch into the rows: one [8, 8] x [8, 16].
  Operation *matmul = first("cleave.matmul");
  expectGemm("shared weight",
             cast<CostOpInterface>(matmul).getWork(OpShapes::of(matmul)), 8, 16,
             8, 1);
  // A batched product (rhs of the lhs rank) keeps its batch:
  // [2, 8, 4]^T x [2, 8, 4] is 2 x ([4, 8] x [8, 4]).
  Operation *batched = nullptr, *summed = nullptr;
  module->walk([&](MatmulOp op) {
    if (op.getTransposeLhs() && !op.getReduceBatch())
      batched = op;
    if (op.getReduceBatch())
      summed = op;
  });
  ASSERT_TRUE(batched);
  expectGemm("batched",
             cast<CostOpInterface>(batched).getWork(OpShapes::of(batched)), 4,
             4, 8, 2);
  // Summed batches (a weight gradient): one GEMM whose depth is every row
  // of every batch, [8, 2 x 4] x [2 x 4, 16].
  ASSERT_TRUE(summed);
  expectGemm("summed batches",
             cast<CostOpInterface>(summed).getWork(OpShapes::of(summed)), 8, 16,
             8, 1);
}

TEST_F(OpWorkTest, AttentionReportsItsProblem) {
  ASSERT_TRUE(module);
  Operation *op = first("cleave.attention_grad");
  ASSERT_TRUE(op);
  OpWork w = cast<CostOpInterface>(op).getWork(OpShapes::of(op));
  EXPECT_DOUBLE_EQ(w.attention.batch, 2);
  EXPECT_DOUBLE_EQ(w.attention.heads, 4);
  EXPECT_DOUBLE_EQ(w.attention.seqQ, 8);
  EXPECT_DOUBLE_EQ(w.attention.seqKV, 8);
  EXPECT_DOUBLE_EQ(w.attention.headDim, 16);
  EXPECT_DOUBLE_EQ(w.attention.valueDim, 16);
  EXPECT_TRUE(w.attention.causal);
  EXPECT_TRUE(w.attention.backward);
}

/// The work follows the shapes it is asked about, not the op's types: a
/// column-parallel matmul on 4 devices holds a quarter of the weight.
TEST_F(OpWorkTest, LocalShapesGiveLocalWork) {
  ASSERT_TRUE(module);
  Operation *op = first("cleave.matmul");
  OpShapes local = OpShapes::of(op);
  local.operands[1].dims = {4, 8};   // w: 16 / 4 output columns
  local.results[0].dims = {2, 4, 4}; // y
  OpWork w = cast<CostOpInterface>(op).getWork(local);
  EXPECT_DOUBLE_EQ(w.gemmFlops, 2.0 * 8 * 4 * 8);
  EXPECT_DOUBLE_EQ(w.gemm.n, 4);
  EXPECT_DOUBLE_EQ(w.bytesRead, (64 + 32) * 4.0);
  EXPECT_DOUBLE_EQ(w.bytesWritten, 32 * 4.0);
  // Priced in bf16: every float tensor at 2 bytes, FLOPs unchanged.
  local.setFloatBytes(2);
  OpWork half = cast<CostOpInterface>(op).getWork(local);
  EXPECT_DOUBLE_EQ(half.gemmFlops, w.gemmFlops);
  EXPECT_DOUBLE_EQ(half.bytesRead, w.bytesRead / 2);
  // Integer tensors keep their size.
  Operation *ce = first("cleave.cross_entropy");
  OpShapes ceShapes = OpShapes::of(ce).setFloatBytes(2);
  OpWork c = cast<CostOpInterface>(ce).getWork(ceShapes);
  EXPECT_DOUBLE_EQ(c.bytesRead, 128 * 2 + 8 * 4 + 20 * 128);
  EXPECT_DOUBLE_EQ(c.bytesWritten, 2 + 16 * 128);
}

/// Local attention under tensor parallelism (half the heads) and context
/// parallelism (a quarter of the queries against every key).
TEST_F(OpWorkTest, AttentionFollowsLocalHeadsAndSequence) {
  ASSERT_TRUE(module);
  Operation *op = first("cleave.attention");
  OpShapes local = OpShapes::of(op);
  local.operands[0].dims = {2, 2, 2, 16}; // q: 2 of 8 queries, 2 of 4 heads
  local.operands[1].dims = {2, 8, 1, 16};
  local.operands[2].dims = {2, 8, 1, 16};
  local.results[0].dims = {2, 2, 2, 16};
  OpWork w = cast<CostOpInterface>(op).getWork(local);
  EXPECT_DOUBLE_EQ(w.attentionFlops, 2.0 * 2 * 2 * 2 * 8 * 32);
  EXPECT_DOUBLE_EQ(w.attention.seqQ, 2);
  EXPECT_DOUBLE_EQ(w.attention.seqKV, 8);
  EXPECT_DOUBLE_EQ(w.attention.heads, 2);
}

} // namespace
