//===- GradientRuleTest.cpp - Every differentiable op has a gradient rule -===//
//
// The gradient counterpart of ShardingRuleTest: every op registered by the
// dialect either implements VJPOpInterface or is listed below as not
// differentiable, with the reason. A new op without a gradient rule fails
// here until it gets one or joins the list. Every rule is then built on the
// op's instance in test/Dialect/ops.mlir, and the gradients must verify and
// have their operands' types.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The ops without a gradient rule, and why they need none.
const llvm::StringMap<StringRef> &notDifferentiable() {
  static const llvm::StringMap<StringRef> ops = {
      // Per-device ops: they appear only after partitioning, which runs
      // after autodiff has built the training step.
      {"cleave.all_reduce", "per-device communication, after autodiff"},
      {"cleave.all_gather", "per-device communication, after autodiff"},
      {"cleave.reduce_scatter", "per-device communication, after autodiff"},
      {"cleave.all_to_all", "per-device communication, after autodiff"},
      {"cleave.collective_permute", "per-device communication, after autodiff"},
      {"cleave.send", "per-device communication, after autodiff"},
      {"cleave.recv", "per-device communication, after autodiff"},
      {"cleave.all_reduce_start", "per-device communication, after autodiff"},
      {"cleave.all_gather_start", "per-device communication, after autodiff"},
      {"cleave.reduce_scatter_start",
       "per-device communication, after autodiff"},
      {"cleave.all_to_all_start", "per-device communication, after autodiff"},
      {"cleave.collective_permute_start",
       "per-device communication, after autodiff"},
      {"cleave.send_start", "per-device communication, after autodiff"},
      {"cleave.recv_start", "per-device communication, after autodiff"},
      {"cleave.wait", "per-device communication, after autodiff"},
      {"cleave.axis_index", "per-device position, after autodiff"},
      {"cleave.shard", "per-device slice, after autodiff"},
      {"cleave.mesh", "a declaration, not a computation"},
      // No operand to differentiate.
      {"cleave.constant", "has no operands"},
      // Gradient ops: autodiff emits them; there is no second order.
      {"cleave.attention_grad", "a gradient op (no second order)"},
      {"cleave.cross_entropy_grad", "a gradient op (no second order)"},
      {"cleave.embedding_grad", "a gradient op (no second order)"},
      {"cleave.gelu_grad", "a gradient op (no second order)"},
      {"cleave.layer_norm_grad", "a gradient op (no second order)"},
      {"cleave.moe_aux_loss_grad", "a gradient op (no second order)"},
      {"cleave.moe_router_grad", "a gradient op (no second order)"},
      {"cleave.moe_weights_grad", "a gradient op (no second order)"},
      {"cleave.relu_grad", "a gradient op (no second order)"},
      {"cleave.rms_norm_grad", "a gradient op (no second order)"},
      {"cleave.silu_grad", "a gradient op (no second order)"},
      {"cleave.softmax_grad", "a gradient op (no second order)"},
      // Optimizer updates: they consume gradients after the backward pass.
      {"cleave.adamw", "an optimizer update, after the backward pass"},
      {"cleave.sgd", "an optimizer update, after the backward pass"},
      {"cleave.lr_schedule",
       "the learning rate of the optimizer update, after the backward pass"},
      {"cleave.optimization_barrier",
       "cleave-remat builds it in the backward pass, after differentiation"},
      {"cleave.label_count",
       "counts integer labels: its f32 result is a constant of the data"},
      // Documented as not differentiable (ops.td): statistics only.
      {"cleave.reduce_max",
       "for statistics; softmax and cross_entropy are the stable, "
       "differentiable forms"},
  };
  return ops;
}

class GradientRuleTest : public ::testing::Test {
protected:
  GradientRuleTest() {
    context.loadDialect<CleaveDialect, func::FuncDialect>();
  }

  MLIRContext context;
};

TEST_F(GradientRuleTest, EveryDifferentiableOpHasAGradientRule) {
  unsigned ops = 0;
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "cleave")
      continue;
    ++ops;
    auto reason = notDifferentiable().find(name.getStringRef());
    bool listed = reason != notDifferentiable().end();
    if (listed)
      EXPECT_FALSE(name.hasInterface<VJPOpInterface>())
          << name.getStringRef().str()
          << " has a gradient rule: remove it from the list of ops that are "
             "not differentiable ("
          << reason->second.str() << ")";
    else
      EXPECT_TRUE(name.hasInterface<VJPOpInterface>())
          << name.getStringRef().str()
          << " has no gradient rule (VJPOpInterface): implement buildVJP, or "
             "list it in GradientRuleTest.cpp with the reason it is not "
             "differentiable";
  }
  // The list names only registered ops (a renamed op would leave a stale
  // entry that excuses nothing).
  for (const auto &entry : notDifferentiable())
    EXPECT_TRUE(RegisteredOperationName::lookup(entry.getKey(), &context))
        << entry.getKey().str() << " is listed but is not an op";
  EXPECT_GT(ops, notDifferentiable().size());
}

/// Float operands that are functions of the data alone, so their rule
/// builds no gradient for them: (op, operand index) and why.
static bool isDataOperand(StringRef op, unsigned index) {
  // The global count of kept labels (cleave.label_count of the targets,
  // all-reduced), the denominator of the mean: no parameter reaches it.
  // The dispatch one-hot of cleave.moe_router: which slot a token takes is
  // piecewise constant in the logits.
  return (op == "cleave.cross_entropy" && index == 2) ||
         (op == "cleave.moe_dispatch" && index == 1);
}

/// A value of `type` to stand for a result's gradient.
Value placeholder(OpBuilder &b, Location loc, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return b.create<ConstantOp>(loc, cast<ElementsAttr>(b.getZeroAttr(tensor)));
}

/// Every rule builds on the op's instance in ops.mlir: one gradient per
/// operand, of the operand's type, for every floating-point operand, and
/// the built ops verify.
TEST_F(GradientRuleTest, EveryGradientRuleBuildsOnItsRoundTripInstance) {
  OwningOpRef<ModuleOp> all = parseSourceFile<ModuleOp>(
      CLEAVE_SOURCE_DIR "/test/Dialect/ops.mlir", &context);
  ASSERT_TRUE(all);
  SmallVector<VJPOpInterface> ops;
  all->walk([&](VJPOpInterface op) { ops.push_back(op); });
  llvm::StringSet<> covered;
  for (VJPOpInterface op : ops) {
    std::string name = op->getName().getStringRef().str();
    covered.insert(name);
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    SmallVector<Value> dys;
    for (Value r : op->getResults())
      dys.push_back(placeholder(b, op->getLoc(), r.getType()));
    SmallVector<Value> grads;
    ASSERT_TRUE(succeeded(op.buildVJP(b, dys, grads))) << name;
    ASSERT_EQ(grads.size(), op->getNumOperands()) << name;
    for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
      auto type = cast<RankedTensorType>(operand.getType());
      if (!isa<FloatType>(type.getElementType()) || isDataOperand(name, i)) {
        EXPECT_FALSE(grads[i])
            << name << ": data operand #" << i << " gets a gradient";
        continue;
      }
      ASSERT_TRUE(grads[i]) << name << ": no gradient for operand #" << i;
      EXPECT_EQ(grads[i].getType(), operand.getType())
          << name << ": gradient of operand #" << i;
    }
  }
  EXPECT_TRUE(succeeded(verify(*all)));
  for (RegisteredOperationName name : context.getRegisteredOperations())
    if (name.getDialectNamespace() == "cleave" &&
        name.hasInterface<VJPOpInterface>())
      EXPECT_TRUE(covered.contains(name.getStringRef()))
          << name.getStringRef().str()
          << " has a gradient rule but no instance in test/Dialect/ops.mlir";
}

} // namespace
