//===- ModelConfig.h - Model architectures and named presets ----*- C++ -*-===//
//
// Plain C++ (no MLIR): the shape of a model, as the IR builder, the cost
// model and the planner all need it, plus the published configurations as
// named presets. Nothing here allocates weights, so a 405B-parameter preset
// is as cheap as a toy one.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_MODELCONFIG_MODELCONFIG_H
#define CLEAVE_MODELCONFIG_MODELCONFIG_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cleave {

enum class Architecture {
  /// Dense layers with GELU: `features -> ffnHidden x layers -> classes`.
  MLP,
  /// GPT-2/GPT-3 decoder: learned positions, LayerNorm, GELU MLP, biases.
  GPT,
  /// Llama decoder: RoPE, RMSNorm, SwiGLU MLP, grouped-query attention, no
  /// biases, untied output head.
  Llama,
};

enum class DType { F32, BF16, F16, F8E4M3 };

/// Bytes per element of `dtype`.
int64_t bytesOf(DType dtype);
const char *toString(Architecture arch);
const char *toString(DType dtype);
std::optional<Architecture> parseArchitecture(const std::string &name);
std::optional<DType> parseDType(const std::string &name);

struct ModelConfig {
  std::string name;
  Architecture arch = Architecture::GPT;
  int64_t layers = 0;
  /// Model width. For the MLP: the number of input features.
  int64_t hidden = 0;
  int64_t heads = 0;
  /// Key/value heads (grouped-query attention); equals `heads` for MHA.
  int64_t kvHeads = 0;
  /// Feed-forward width (GPT: 4 * hidden; Llama: the SwiGLU width).
  int64_t ffnHidden = 0;
  /// Vocabulary size. For the MLP: the number of classes.
  int64_t vocab = 0;
  /// Sequence length. Unused by the MLP.
  int64_t seqLen = 0;
  /// Sequences per micro-batch when IR is emitted for a concrete step.
  int64_t batch = 1;
  /// Compute precision; master weights and optimizer state are always f32.
  DType dtype = DType::F32;
  /// GPT ties the output head to the token embedding.
  bool tiedEmbeddings = true;
  double dropout = 0.0;
  double normEpsilon = 1e-5;
  double ropeTheta = 10000.0;

  /// Mixture of experts (Llama only; docs/moe.md). `experts` routed experts
  /// per MoE layer (0: a dense model), each token routed to `topK` of them.
  int64_t experts = 0;
  int64_t topK = 0;
  /// Always-active experts added to the routed ones (DeepSeek-V3: 1).
  int64_t sharedExperts = 0;
  /// Layer l is a MoE layer when (l + 1) % moeEvery == 0.
  int64_t moeEvery = 1;
  /// SwiGLU width of each expert (dense layers keep ffnHidden).
  int64_t expertFfnHidden = 0;
  /// Slots per expert and sequence: ceil(capacityFactor * seqLen * topK /
  /// experts); 0 routes dropless.
  double capacityFactor = 0.0;
  /// Sigmoid router scores normalized over the top-k (DeepSeek-V3) instead
  /// of the softmax (Mixtral, renormalized over the top-k too).
  bool sigmoidRouter = false;
  /// Weight of the load-balancing loss (mean over sequences and MoE layers).
  double auxLossCoeff = 0.0;

  int64_t headDim() const { return heads ? hidden / heads : 0; }
  bool isMoE() const { return experts > 0; }
  bool isMoELayer(int64_t layer) const {
    return isMoE() && moeEvery > 0 && (layer + 1) % moeEvery == 0;
  }

  /// The feed-forward width this configuration's rule gives a model of
  /// width `width`: GPT 4 x width; Llama the ratio ffnHidden / hidden of
  /// this configuration (rounded to the nearest integer); the MLP, whose
  /// `hidden` counts input features, keeps ffnHidden. Tools use it when only
  /// the width is overridden.
  int64_t ffnForWidth(int64_t width) const;

  /// Exact number of trainable parameters.
  int64_t numParameters() const;

  /// Empty if the configuration is consistent; otherwise a message naming
  /// the field and the value that is wrong.
  std::string validate() const;
};

/// The published configurations: gpt2-{small,medium,large,xl}, gpt3-175b,
/// llama3-{8b,70b,405b}, the Megatron-LM paper sizes (megatron-1.7b ...
/// megatron-1t, Narayanan et al. 2021) and the sequence-parallel paper's 22B
/// (megatron-22b, Korthikanti et al. 2022), plus small models for tests and
/// demos (tiny-mlp, tiny-gpt, tiny-llama), and mixtures of experts:
/// mixtral-8x7b, deepseek-v3-shaped (DeepSeek-V3's widths and experts on a
/// Llama block: no multi-head latent attention, every layer MoE) and
/// tiny-moe.
std::optional<ModelConfig> lookupPreset(const std::string &name);
std::vector<std::string> presetNames();

} // namespace cleave

#endif // CLEAVE_MODELCONFIG_MODELCONFIG_H
