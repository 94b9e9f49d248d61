//===- ModelConfig.cpp - Model architectures and named presets ------------===//

#include "cleave/ModelConfig/ModelConfig.h"

#include <map>

namespace cleave {

int64_t bytesOf(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return 4;
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::F8E4M3:
    return 1;
  }
  return 4;
}

const char *toString(Architecture arch) {
  switch (arch) {
  case Architecture::MLP:
    return "mlp";
  case Architecture::GPT:
    return "gpt";
  case Architecture::Llama:
    return "llama";
  }
  return "?";
}

const char *toString(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::F8E4M3:
    return "f8e4m3";
  }
  return "?";
}

std::optional<Architecture> parseArchitecture(const std::string &name) {
  for (Architecture a :
       {Architecture::MLP, Architecture::GPT, Architecture::Llama})
    if (name == toString(a))
      return a;
  return std::nullopt;
}

std::optional<DType> parseDType(const std::string &name) {
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::F8E4M3})
    if (name == toString(d))
      return d;
  return std::nullopt;
}

int64_t ModelConfig::numParameters() const {
  const int64_t h = hidden, f = ffnHidden, v = vocab;
  switch (arch) {
  case Architecture::MLP: {
    int64_t n = h * f + f;
    n += (layers - 1) * (f * f + f);
    return n + f * v + v;
  }
  case Architecture::GPT: {
    int64_t perLayer = 2 * h               // ln_1
                       + 3 * h * h + 3 * h // qkv
                       + h * h + h         // attention projection
                       + 2 * h             // ln_2
                       + h * f + f         // fc
                       + f * h + h;        // fc projection
    int64_t n = v * h + seqLen * h + layers * perLayer + 2 * h;
    return tiedEmbeddings ? n : n + v * h;
  }
  case Architecture::Llama: {
    int64_t d = headDim();
    int64_t perLayer = h                     // attention norm
                       + h * heads * d       // q
                       + 2 * h * kvHeads * d // k, v
                       + heads * d * h       // o
                       + h;                  // mlp norm
    int64_t n = v * h + layers * perLayer + h;
    for (int64_t l = 0; l < layers; ++l)
      n += isMoELayer(l)
               ? experts * h // router
                     + (experts + sharedExperts) * 3 * h * expertFfnHidden
               : 3 * h * f; // gate, up, down
    return tiedEmbeddings ? n : n + v * h;
  }
  }
  return 0;
}

std::string ModelConfig::validate() const {
  auto positive = [](const char *field, int64_t value) -> std::string {
    if (value > 0)
      return "";
    return std::string(field) + " must be positive, got " +
           std::to_string(value);
  };
  for (auto [field, value] :
       {std::pair{"layers", layers}, std::pair{"hidden", hidden},
        std::pair{"ffn_hidden", ffnHidden}, std::pair{"vocab", vocab},
        std::pair{"batch", batch}})
    if (std::string err = positive(field, value); !err.empty())
      return err;
  if (arch == Architecture::MLP)
    return "";
  for (auto [field, value] :
       {std::pair{"heads", heads}, std::pair{"kv_heads", kvHeads},
        std::pair{"seq_len", seqLen}})
    if (std::string err = positive(field, value); !err.empty())
      return err;
  if (hidden % heads != 0)
    return "hidden (" + std::to_string(hidden) +
           ") must be divisible by heads (" + std::to_string(heads) + ")";
  if (heads % kvHeads != 0)
    return "heads (" + std::to_string(heads) +
           ") must be a multiple of kv_heads (" + std::to_string(kvHeads) + ")";
  if (arch == Architecture::Llama && headDim() % 2 != 0)
    return "head dimension hidden/heads = " + std::to_string(headDim()) +
           " must be even for rotary embeddings";
  if (arch == Architecture::GPT && kvHeads != heads)
    return "GPT models use multi-head attention: kv_heads (" +
           std::to_string(kvHeads) + ") must equal heads (" +
           std::to_string(heads) + ")";
  if (!(dropout >= 0.0 && dropout < 1.0))
    return "dropout must be in [0, 1), got " + std::to_string(dropout);
  if (experts == 0)
    return "";
  if (arch != Architecture::Llama)
    return "experts (" + std::to_string(experts) +
           ") are supported on the llama architecture only";
  if (topK < 1 || topK > experts)
    return "top_k must be in [1, experts = " + std::to_string(experts) +
           "], got " + std::to_string(topK);
  for (auto [field, value] : {std::pair{"moe_every", moeEvery},
                              std::pair{"expert_ffn_hidden", expertFfnHidden}})
    if (std::string err = positive(field, value); !err.empty())
      return err;
  if (sharedExperts < 0)
    return "shared_experts must not be negative, got " +
           std::to_string(sharedExperts);
  if (!(capacityFactor >= 0.0))
    return "capacity_factor must be >= 0 (0: dropless), got " +
           std::to_string(capacityFactor);
  return "";
}

int64_t ModelConfig::ffnForWidth(int64_t width) const {
  switch (arch) {
  case Architecture::GPT:
    return 4 * width;
  case Architecture::Llama:
    return hidden > 0 ? (ffnHidden * width + hidden / 2) / hidden : ffnHidden;
  case Architecture::MLP:
    return ffnHidden;
  }
  return ffnHidden;
}

namespace {

ModelConfig gpt(const char *name, int64_t layers, int64_t hidden, int64_t heads,
                int64_t vocab, int64_t seqLen) {
  ModelConfig c;
  c.name = name;
  c.arch = Architecture::GPT;
  c.layers = layers;
  c.hidden = hidden;
  c.heads = c.kvHeads = heads;
  c.ffnHidden = 4 * hidden;
  c.vocab = vocab;
  c.seqLen = seqLen;
  c.tiedEmbeddings = true;
  return c;
}

ModelConfig llama(const char *name, int64_t layers, int64_t hidden,
                  int64_t heads, int64_t kvHeads, int64_t ffn, int64_t vocab,
                  int64_t seqLen, double theta) {
  ModelConfig c;
  c.name = name;
  c.arch = Architecture::Llama;
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.kvHeads = kvHeads;
  c.ffnHidden = ffn;
  c.vocab = vocab;
  c.seqLen = seqLen;
  c.tiedEmbeddings = false;
  c.ropeTheta = theta;
  return c;
}

std::map<std::string, ModelConfig> buildPresets() {
  std::map<std::string, ModelConfig> p;
  auto add = [&](ModelConfig c) { p[c.name] = c; };
  // GPT-2 (Radford et al. 2019), context 1024, vocabulary 50257.
  add(gpt("gpt2-small", 12, 768, 12, 50257, 1024));
  add(gpt("gpt2-medium", 24, 1024, 16, 50257, 1024));
  add(gpt("gpt2-large", 36, 1280, 20, 50257, 1024));
  add(gpt("gpt2-xl", 48, 1600, 25, 50257, 1024));
  // GPT-3 175B (Brown et al. 2020, Table 2.1).
  add(gpt("gpt3-175b", 96, 12288, 96, 50257, 2048));
  // Megatron-LM PTD-P (Narayanan et al. 2021, Table 1): vocabulary padded to
  // 51200, sequence 2048, bf16/fp16.
  add(gpt("megatron-1.7b", 24, 2304, 24, 51200, 2048));
  add(gpt("megatron-3.6b", 30, 3072, 32, 51200, 2048));
  add(gpt("megatron-7.5b", 36, 4096, 32, 51200, 2048));
  add(gpt("megatron-18b", 40, 6144, 48, 51200, 2048));
  add(gpt("megatron-39b", 48, 8192, 64, 51200, 2048));
  add(gpt("megatron-76b", 60, 10240, 80, 51200, 2048));
  add(gpt("megatron-145b", 80, 12288, 96, 51200, 2048));
  add(gpt("megatron-310b", 96, 16384, 128, 51200, 2048));
  add(gpt("megatron-530b", 105, 20480, 128, 51200, 2048));
  add(gpt("megatron-1t", 128, 25600, 160, 51200, 2048));
  // Korthikanti et al. 2022, Table 3: the 22B model (the others match the
  // Megatron sizes above: 175B = gpt3 shape with vocabulary 51200).
  add(gpt("megatron-22b", 48, 6144, 64, 51200, 2048));
  add(gpt("megatron-175b", 96, 12288, 96, 51200, 2048));
  // Llama 3 (Dubey et al. 2024, Table 3).
  add(llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 500000.0));
  add(llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 500000.0));
  add(llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, 500000.0));
  // Small models for tests and the demo.
  ModelConfig mlp;
  mlp.name = "tiny-mlp";
  mlp.arch = Architecture::MLP;
  mlp.layers = 2;
  mlp.hidden = 32;
  mlp.ffnHidden = 64;
  mlp.vocab = 10;
  mlp.batch = 8;
  add(mlp);
  ModelConfig tinyGpt = gpt("tiny-gpt", 2, 64, 4, 65, 32);
  tinyGpt.batch = 4;
  add(tinyGpt);
  ModelConfig tinyLlama =
      llama("tiny-llama", 2, 64, 4, 2, 128, 65, 32, 10000.0);
  tinyLlama.batch = 4;
  add(tinyLlama);
  // Mixtral 8x7B (Jiang et al. 2024): every layer 8 experts, top-2, dropless;
  // trained here at sequence 4096.
  ModelConfig mixtral =
      llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096, 1000000.0);
  mixtral.experts = 8;
  mixtral.topK = 2;
  mixtral.expertFfnHidden = 14336;
  mixtral.auxLossCoeff = 0.02;
  add(mixtral);
  // DeepSeek-V3's MoE shape (DeepSeek-AI 2024): 1 shared + 256 routed
  // experts of width 2048, top-8, sigmoid gates, on a 61-layer Llama block of
  // width 7168 (the dense width 18432); no multi-head latent attention.
  ModelConfig deepseek = llama("deepseek-v3-shaped", 61, 7168, 128, 128, 18432,
                               129280, 4096, 10000.0);
  deepseek.experts = 256;
  deepseek.topK = 8;
  deepseek.sharedExperts = 1;
  deepseek.expertFfnHidden = 2048;
  deepseek.sigmoidRouter = true;
  deepseek.auxLossCoeff = 0.0001;
  add(deepseek);
  // A small MoE for tests: 4 experts, top-2, one shared expert, MoE every
  // layer, capacity factor 1 (drops happen when routing is unbalanced).
  ModelConfig tinyMoE = llama("tiny-moe", 2, 64, 4, 2, 128, 65, 32, 10000.0);
  tinyMoE.batch = 4;
  tinyMoE.experts = 4;
  tinyMoE.topK = 2;
  tinyMoE.sharedExperts = 1;
  tinyMoE.expertFfnHidden = 32;
  tinyMoE.capacityFactor = 1.0;
  tinyMoE.auxLossCoeff = 0.01;
  add(tinyMoE);
  return p;
}

const std::map<std::string, ModelConfig> &presets() {
  static const std::map<std::string, ModelConfig> p = buildPresets();
  return p;
}

} // namespace

std::optional<ModelConfig> lookupPreset(const std::string &name) {
  auto it = presets().find(name);
  if (it == presets().end())
    return std::nullopt;
  return it->second;
}

std::vector<std::string> presetNames() {
  std::vector<std::string> names;
  for (const auto &[name, _] : presets())
    names.push_back(name);
  return names;
}

} // namespace cleave
