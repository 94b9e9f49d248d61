//===- ModelZoo.cpp - MLP, GPT and Llama programs from a config -----------===//
//
// Parameter names follow nanoGPT (GPT, with separate q/k/v projections so
// that tensor parallelism can split heads) and Meta's Llama reference code.
//
//===----------------------------------------------------------------------===//

#include "cleave/Models/ModelZoo.h"
#include "cleave/Models/GraphBuilder.h"
#include <cmath>

using namespace mlir;
using namespace mlir::cleave;
using ::cleave::Architecture;
using ::cleave::DType;
using ::cleave::ModelConfig;

static Type elementTypeOf(MLIRContext *ctx, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return Float32Type::get(ctx);
  case DType::BF16:
    return BFloat16Type::get(ctx);
  case DType::F16:
    return Float16Type::get(ctx);
  case DType::F8E4M3:
    return Float8E4M3FNType::get(ctx);
  }
  return Float32Type::get(ctx);
}

namespace {

/// Shared state of one model build.
struct ZooBuilder {
  ZooBuilder(ModuleOp module, const ModelConfig &c)
      : g(module, "forward", c.name.empty() ? "custom" : c.name), c(c),
        ct(elementTypeOf(module.getContext(), c.dtype)) {}

  /// A weight parameter in the compute type.
  Value weight(const std::string &name, ArrayRef<int64_t> shape,
               double stddev = 0.02) {
    return g.cast(g.param(name, shape, InitKind::Normal, stddev), ct);
  }
  Value zeros(const std::string &name, ArrayRef<int64_t> shape) {
    return g.cast(g.param(name, shape, InitKind::Zeros), ct);
  }
  Value ones(const std::string &name, ArrayRef<int64_t> shape) {
    return g.cast(g.param(name, shape, InitKind::Ones), ct);
  }
  Value dropout(Value x) { return seed ? g.dropout(x, seed, c.dropout) : x; }
  /// Declares the token inputs and the dropout seed.
  void tokenInputs() {
    Type i32 = IntegerType::get(g.getContext(), 32);
    tokens = g.input("tokens", {c.batch, c.seqLen}, i32);
    targets = g.input("targets", {c.batch, c.seqLen}, i32);
    if (c.dropout > 0.0)
      seed = g.input("seed", {}, IntegerType::get(g.getContext(), 64));
  }
  Value heads(Value x, int64_t n) {
    return g.reshape(x, {c.batch, c.seqLen, n, c.headDim()});
  }
  Value merge(Value x) { return g.reshape(x, {c.batch, c.seqLen, c.hidden}); }

  GraphBuilder g;
  const ModelConfig &c;
  Type ct;
  Value tokens, targets, seed;
};

Value buildGPT(ZooBuilder &z) {
  const ModelConfig &c = z.c;
  GraphBuilder &g = z.g;
  int64_t h = c.hidden, f = c.ffnHidden;
  g.setScope("embedding");
  z.tokenInputs();
  Value wte = z.weight("wte.weight", {c.vocab, h});
  Value wpe = z.weight("wpe.weight", {c.seqLen, h});
  Value x = g.embedding(wte, z.tokens);
  x = z.dropout(g.add(x, g.broadcast(wpe, {c.batch, c.seqLen, h}, {1, 2})));
  // GPT-2 scales the residual projections by 1/sqrt(2 * layers).
  double projStd = 0.02 / std::sqrt(2.0 * c.layers);
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "h." + std::to_string(l) + ".";
    g.setScope(p + "attn");
    // Parameters are declared in statements of their own so that their
    // order does not depend on the compiler's argument evaluation order.
    Value ln1w = z.ones(p + "ln_1.weight", {h});
    Value ln1b = z.zeros(p + "ln_1.bias", {h});
    Value a = g.layerNorm(x, ln1w, ln1b, c.normEpsilon);
    auto proj = [&](const char *name) {
      Value w = z.weight(p + "attn." + name + ".weight", {h, h});
      Value b = z.zeros(p + "attn." + name + ".bias", {h});
      return z.heads(g.linear(a, w, b), c.heads);
    };
    Value q = proj("q"), k = proj("k"), v = proj("v");
    Value o = z.merge(g.attention(q, k, v, /*causal=*/true));
    Value projW = z.weight(p + "attn.proj.weight", {h, h}, projStd);
    Value projB = z.zeros(p + "attn.proj.bias", {h});
    o = g.linear(o, projW, projB);
    x = g.add(x, z.dropout(o));
    g.setScope(p + "mlp");
    Value ln2w = z.ones(p + "ln_2.weight", {h});
    Value ln2b = z.zeros(p + "ln_2.bias", {h});
    Value m = g.layerNorm(x, ln2w, ln2b, c.normEpsilon);
    Value fcW = z.weight(p + "mlp.fc.weight", {f, h});
    Value fcB = z.zeros(p + "mlp.fc.bias", {f});
    m = g.gelu(g.linear(m, fcW, fcB));
    Value mprojW = z.weight(p + "mlp.proj.weight", {h, f}, projStd);
    Value mprojB = z.zeros(p + "mlp.proj.bias", {h});
    m = g.linear(m, mprojW, mprojB);
    x = g.add(x, z.dropout(m));
  }
  g.setScope("head");
  Value lnfw = z.ones("ln_f.weight", {h});
  Value lnfb = z.zeros("ln_f.bias", {h});
  x = g.layerNorm(x, lnfw, lnfb, c.normEpsilon);
  Value head =
      c.tiedEmbeddings ? wte : z.weight("lm_head.weight", {c.vocab, h});
  return g.crossEntropy(g.linear(x, head), z.targets);
}

/// Llama's SwiGLU feed-forward with PyTorch Linear weights.
Value swiglu(ZooBuilder &z, Value x, Value w1, Value w3, Value w2) {
  GraphBuilder &g = z.g;
  return g.linear(g.mul(g.silu(g.linear(x, w1)), g.linear(x, w3)), w2);
}

/// A MoE feed-forward (docs/moe.md): routed experts plus optional shared
/// experts (one dense SwiGLU of their summed width). Adds the layer's
/// balance loss (f32, summed over sequences) to `aux`.
Value buildMoE(ZooBuilder &z, const std::string &p, Value x, Value &aux) {
  const ModelConfig &c = z.c;
  GraphBuilder &g = z.g;
  int64_t h = c.hidden, e = c.experts, fe = c.expertFfnHidden;
  std::string q = p + "feed_forward.";
  Value router = z.weight(q + "gate.weight", {e, h});
  Value w1 = z.weight(q + "experts.w1", {e, h, fe});
  Value w3 = z.weight(q + "experts.w3", {e, h, fe});
  Value w2 = z.weight(q + "experts.w2", {e, fe, h});
  GraphBuilder::MoERouting routing;
  routing.topK = c.topK;
  routing.capacityFactor = c.capacityFactor;
  routing.sigmoid = c.sigmoidRouter;
  GraphBuilder::MoEResult r = g.moe(x, router, w1, w3, w2, routing);
  aux = aux ? g.add(aux, r.auxLoss) : r.auxLoss;
  if (c.sharedExperts == 0)
    return r.output;
  int64_t fs = c.sharedExperts * fe;
  Value s1 = z.weight(q + "shared_experts.w1.weight", {fs, h});
  Value s3 = z.weight(q + "shared_experts.w3.weight", {fs, h});
  Value s2 = z.weight(q + "shared_experts.w2.weight", {h, fs});
  return g.add(r.output, swiglu(z, x, s1, s3, s2));
}

Value buildLlama(ZooBuilder &z) {
  const ModelConfig &c = z.c;
  GraphBuilder &g = z.g;
  int64_t h = c.hidden, f = c.ffnHidden, d = c.headDim();
  Value aux;
  g.setScope("embedding");
  z.tokenInputs();
  Value emb = z.weight("tok_embeddings.weight", {c.vocab, h});
  Value x = z.dropout(g.embedding(emb, z.tokens));
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    g.setScope(p + "attention");
    Value a =
        g.rmsNorm(x, z.ones(p + "attention_norm.weight", {h}), c.normEpsilon);
    auto proj = [&](const char *name, int64_t n) {
      return z.heads(g.linear(a, z.weight(p + "attention." + name + ".weight",
                                          {n * d, h})),
                     n);
    };
    Value q = g.rotary(proj("wq", c.heads), c.ropeTheta);
    Value k = g.rotary(proj("wk", c.kvHeads), c.ropeTheta);
    Value v = proj("wv", c.kvHeads);
    Value o = z.merge(g.attention(q, k, v, /*causal=*/true));
    o = g.linear(o, z.weight(p + "attention.wo.weight", {h, c.heads * d}));
    x = g.add(x, z.dropout(o));
    g.setScope(p + "feed_forward");
    Value m = g.rmsNorm(x, z.ones(p + "ffn_norm.weight", {h}), c.normEpsilon);
    if (c.isMoELayer(l)) {
      m = buildMoE(z, p, m, aux);
    } else {
      Value w1 = z.weight(p + "feed_forward.w1.weight", {f, h});
      Value w3 = z.weight(p + "feed_forward.w3.weight", {f, h});
      Value w2 = z.weight(p + "feed_forward.w2.weight", {h, f});
      m = swiglu(z, m, w1, w3, w2);
    }
    x = g.add(x, z.dropout(m));
  }
  g.setScope("head");
  x = g.rmsNorm(x, z.ones("norm.weight", {h}), c.normEpsilon);
  Value head = c.tiedEmbeddings ? emb : z.weight("output.weight", {c.vocab, h});
  Value loss = g.crossEntropy(g.linear(x, head), z.targets);
  if (!aux || c.auxLossCoeff == 0.0)
    return loss;
  // The balance loss: mean over sequences and MoE layers, weighted.
  int64_t moeLayers = 0;
  for (int64_t l = 0; l < c.layers; ++l)
    moeLayers += c.isMoELayer(l);
  g.setScope("head");
  return g.add(loss,
               g.scale(aux, c.auxLossCoeff / double(c.batch * moeLayers)));
}

Value buildMLP(ZooBuilder &z) {
  const ModelConfig &c = z.c;
  GraphBuilder &g = z.g;
  g.setScope("mlp");
  Value x = g.input("features", {c.batch, c.hidden}, z.ct);
  Value labels =
      g.input("labels", {c.batch}, IntegerType::get(g.getContext(), 32));
  if (c.dropout > 0.0)
    z.seed = g.input("seed", {}, IntegerType::get(g.getContext(), 64));
  int64_t in = c.hidden;
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "fc" + std::to_string(l) + ".";
    g.setScope(p);
    Value w = z.weight(p + "weight", {c.ffnHidden, in});
    Value b = z.zeros(p + "bias", {c.ffnHidden});
    x = g.linear(x, w, b);
    x = z.dropout(g.gelu(x));
    in = c.ffnHidden;
  }
  g.setScope("head");
  Value headW = z.weight("head.weight", {c.vocab, in});
  Value headB = z.zeros("head.bias", {c.vocab});
  x = g.linear(x, headW, headB);
  return g.crossEntropy(x, labels);
}

} // namespace

OwningOpRef<ModuleOp> mlir::cleave::buildModel(MLIRContext *context,
                                               const ModelConfig &config,
                                               std::string &error) {
  error = config.validate();
  if (!error.empty())
    return nullptr;
  context->loadDialect<CleaveDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(NameLoc::get(StringAttr::get(context, config.name)));
  (*module)->setAttr(
      CleaveDialect::kModelAttrName,
      StringAttr::get(context, config.name.empty() ? "custom" : config.name));
  ZooBuilder z(*module, config);
  Value loss;
  switch (config.arch) {
  case Architecture::MLP:
    loss = buildMLP(z);
    break;
  case Architecture::GPT:
    loss = buildGPT(z);
    break;
  case Architecture::Llama:
    loss = buildLlama(z);
    break;
  }
  z.g.finish(loss);
  return module;
}
