//===- GraphBuilder.h - Build cleave programs from C++ ----------*- C++ -*-===//
//
// The API a framework front-end or a user's C++ code calls to emit a cleave
// program: declare parameters and inputs as they are needed, compose layers,
// and finish with the scalar loss. Shapes are inferred by the ops; every
// helper handles the explicit broadcasting the dialect requires.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_MODELS_GRAPHBUILDER_H
#define CLEAVE_MODELS_GRAPHBUILDER_H

#include "cleave/Dialect/CleaveOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

#include <string>

namespace mlir::cleave {

class GraphBuilder {
public:
  /// Starts function `name` (no arguments yet) at the end of `module`.
  /// Locations name what they belong to, prefixed by `model` when given:
  /// the function is "<model>", an argument "<model>.<its name>", an op
  /// "<model>.<scope>" (setScope), and a linear layer's ops are named after
  /// its weight ("gpt3-175b.h.3.attn.q" for "h.3.attn.q.weight"), so that a
  /// diagnostic on a built program says where in the model it is.
  GraphBuilder(ModuleOp module, StringRef name, StringRef model = {});

  /// Appends a parameter argument (f32 master weights) named `name`.
  Value param(StringRef name, ArrayRef<int64_t> shape, InitKind kind,
              double scale = 0.0);
  /// Appends a data input argument.
  Value input(StringRef name, ArrayRef<int64_t> shape, Type elementType);
  /// Ends the function, returning `results`; sets its type and argument
  /// attributes.
  func::FuncOp finish(ValueRange results);

  /// Ops created next get the location "<model>.<name>" (e.g.
  /// "gpt3-175b.h.3.attn").
  void setScope(StringRef name);
  OpBuilder &getBuilder() { return builder; }
  Location getLoc() const { return loc; }
  MLIRContext *getContext() { return builder.getContext(); }

  // Elementwise and shape helpers.
  Value add(Value a, Value b);
  Value mul(Value a, Value b);
  /// `x * scalar` through a splat constant.
  Value scale(Value x, double scalar);
  Value cast(Value x, Type elementType);
  Value reshape(Value x, ArrayRef<int64_t> shape);
  /// Broadcasts `x` to `shape`, x's dims landing at `dims`.
  Value broadcast(Value x, ArrayRef<int64_t> shape, ArrayRef<int64_t> dims);
  /// Broadcasts a vector over the last dimension of `like`'s shape.
  Value broadcastLast(Value vec, Value like);

  // Layers.
  /// `x @ w^T + b` with PyTorch's Linear layout: w is [out, in], b is [out].
  Value linear(Value x, Value w, Value b = {});
  Value layerNorm(Value x, Value gamma, Value beta, double eps);
  Value rmsNorm(Value x, Value gamma, double eps);
  Value gelu(Value x, GeluApproximation approx = GeluApproximation::Tanh);
  Value silu(Value x);
  Value dropout(Value x, Value seed, double rate);
  Value embedding(Value table, Value ids);
  Value attention(Value q, Value k, Value v, bool causal);
  Value rotary(Value x, double theta);
  Value crossEntropy(Value logits, Value labels);

  /// The routing of a mixture-of-experts layer (cleave.moe_router).
  struct MoERouting {
    int64_t topK = 1;
    /// 0: dropless.
    double capacityFactor = 0.0;
    bool sigmoid = false;
    bool normalize = true;
  };
  /// What moe() returns: the layer's output [B, S, H] and its load-balancing
  /// loss summed over the B sequences (cleave.moe_aux_loss).
  struct MoEResult {
    Value output, auxLoss;
  };
  /// A mixture-of-experts SwiGLU feed-forward over `x` [B, S, H], each
  /// sequence a routing group: `router` is [E, H]; `gate` and `up` are
  /// [E, H, F], `down` [E, F, H] (one SwiGLU per expert, run as batched
  /// matmuls over E on the expert buffers).
  MoEResult moe(Value x, Value router, Value gate, Value up, Value down,
                const MoERouting &routing);

private:
  Value arg(StringRef attrName, StringRef name, RankedTensorType type,
            ArrayRef<NamedAttribute> extra);
  /// The location named "<model>.<name>" (or "<name>" without a model).
  Location named(StringRef name);

  std::string model;
  /// The parameter name behind each parameter value and its casts.
  llvm::DenseMap<Value, std::string> paramNames;
  OpBuilder builder;
  func::FuncOp func;
  Block *body;
  SmallVector<Attribute> argAttrs;
  Location loc;
  int64_t nextDropoutStream = 0;
};

} // namespace mlir::cleave

#endif // CLEAVE_MODELS_GRAPHBUILDER_H
