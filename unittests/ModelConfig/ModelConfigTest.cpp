//===- ModelConfigTest.cpp - Presets and parameter counts -----------------===//

#include "cleave/ModelConfig/ModelConfig.h"
#include <gtest/gtest.h>

using namespace cleave;

namespace {

/// Published parameter counts, within the rounding of their papers.
TEST(ModelConfigTest, ParameterCountsMatchPublishedSizes) {
  struct Case {
    const char *name;
    double billions;
    double tolerance;
  } cases[] = {
      {"gpt2-small", 0.124, 0.002},
      {"gpt2-xl", 1.558, 0.01},
      {"gpt3-175b", 174.6, 0.5},
      {"megatron-1.7b", 1.7, 0.05},
      {"megatron-39b", 39.1, 0.2},
      {"megatron-530b", 529.6, 1.0},
      {"megatron-1t", 1008.0, 2.0},
      {"llama3-8b", 8.03, 0.01},
      {"llama3-70b", 70.55, 0.05},
      {"llama3-405b", 405.8, 0.5},
      // Mistral's 46.7B total (12.9B active) for Mixtral 8x7B.
      {"mixtral-8x7b", 46.7, 0.05},
  };
  for (const Case &c : cases) {
    std::optional<ModelConfig> config = lookupPreset(c.name);
    ASSERT_TRUE(config) << c.name;
    EXPECT_EQ(config->validate(), "") << c.name;
    EXPECT_NEAR(config->numParameters() / 1e9, c.billions, c.tolerance)
        << c.name;
  }
}

TEST(ModelConfigTest, EveryPresetIsValid) {
  for (const std::string &name : presetNames()) {
    std::optional<ModelConfig> config = lookupPreset(name);
    ASSERT_TRUE(config);
    EXPECT_EQ(config->name, name);
    EXPECT_EQ(config->validate(), "") << name;
  }
  EXPECT_FALSE(lookupPreset("gpt5"));
}

TEST(ModelConfigTest, MoEFieldsAreValidated) {
  ModelConfig c = *lookupPreset("tiny-moe");
  EXPECT_EQ(c.validate(), "");
  c.topK = 5;
  EXPECT_EQ(c.validate(), "top_k must be in [1, experts = 4], got 5");
  c = *lookupPreset("tiny-moe");
  c.expertFfnHidden = 0;
  EXPECT_EQ(c.validate(), "expert_ffn_hidden must be positive, got 0");
  c = *lookupPreset("tiny-gpt");
  c.experts = 4;
  c.topK = 1;
  EXPECT_EQ(c.validate(),
            "experts (4) are supported on the llama architecture only");
  // MoE every second layer: layer 1 of 2 is MoE, layer 0 dense.
  c = *lookupPreset("tiny-moe");
  c.moeEvery = 2;
  EXPECT_FALSE(c.isMoELayer(0));
  EXPECT_TRUE(c.isMoELayer(1));
  ModelConfig dense = *lookupPreset("tiny-llama");
  EXPECT_LT(c.numParameters(), lookupPreset("tiny-moe")->numParameters());
  EXPECT_GT(c.numParameters(), dense.numParameters());
}

TEST(ModelConfigTest, ValidateNamesTheField) {
  ModelConfig c = *lookupPreset("tiny-llama");
  c.kvHeads = 3;
  EXPECT_EQ(c.validate(), "heads (4) must be a multiple of kv_heads (3)");
  c = *lookupPreset("tiny-gpt");
  c.hidden = 66;
  EXPECT_EQ(c.validate(), "hidden (66) must be divisible by heads (4)");
  c.hidden = 0;
  EXPECT_EQ(c.validate(), "hidden must be positive, got 0");
}

TEST(ModelConfigTest, ParsesNames) {
  EXPECT_EQ(parseArchitecture("llama"), Architecture::Llama);
  EXPECT_EQ(parseDType("bf16"), DType::BF16);
  EXPECT_FALSE(parseDType("f128"));
  EXPECT_EQ(bytesOf(DType::F8E4M3), 1);
}

TEST(ModelConfigTest, FeedForwardFollowsTheWidthByThePresetsRule) {
  ModelConfig gpt = *lookupPreset("tiny-gpt");
  EXPECT_EQ(gpt.ffnForWidth(gpt.hidden), gpt.ffnHidden);
  EXPECT_EQ(gpt.ffnForWidth(128), 512);
  ModelConfig llama = *lookupPreset("llama3-8b");
  EXPECT_EQ(llama.ffnForWidth(llama.hidden), 14336);
  EXPECT_EQ(llama.ffnForWidth(2048), 7168); // the preset's 3.5 x
  ModelConfig mlp = *lookupPreset("tiny-mlp");
  EXPECT_EQ(mlp.ffnForWidth(100), mlp.ffnHidden); // hidden: input features
}

} // namespace
