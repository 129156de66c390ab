// Parameter groups by glob pattern and the decay-segment table they produce.
#include <gtest/gtest.h>

#include <vector>

#include "optim/param_groups.h"

namespace zdp::optim {
namespace {

ParamGroups make(double default_wd, std::vector<ParamGroupRule> rules) {
  auto g = ParamGroups::create(default_wd, std::move(rules));
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return std::move(g).value();
}

TEST(ParamGroups, BiasesAndNormsGetNoDecay) {
  const ParamGroups g = make(0.1, {no_decay_for_biases_and_norms()});
  EXPECT_EQ(g.weight_decay_of("blocks.0.mlp.fc.bias"), 0.0);
  // GPT-2's and HF's names for LayerNorm, which were decayed (the match was case-sensitive
  // and knew no "ln_"), and a bare "bias".
  EXPECT_EQ(g.weight_decay_of("blocks.0.ln_1.weight"), 0.0);
  EXPECT_EQ(g.weight_decay_of("transformer.ln_f.weight"), 0.0);
  EXPECT_EQ(g.weight_decay_of("encoder.0.LayerNorm.weight"), 0.0);
  EXPECT_EQ(g.weight_decay_of("bias"), 0.0);
  EXPECT_EQ(g.weight_decay_of("blocks.3.layernorm.weight"), 0.0);
  EXPECT_EQ(g.weight_decay_of("final_norm.weight"), 0.0);
  EXPECT_EQ(g.weight_decay_of("blocks.0.attn.qkv.weight"), 0.1);
  EXPECT_EQ(g.weight_decay_of("bias_table"), 0.1);  // "*.bias" needs the dot
  EXPECT_EQ(g.group_of("wte.weight"), -1);
  // nanoGPT-style "ln1" / "lnf" without the underscore, and llm.c's "ln1w" / "lnfb".
  EXPECT_EQ(g.weight_decay_of("blocks.0.ln1.weight"), 0.0);
  EXPECT_EQ(g.weight_decay_of("h.11.ln2.bias"), 0.0);
  EXPECT_EQ(g.weight_decay_of("lnf.weight"), 0.0);
  EXPECT_EQ(g.weight_decay_of("ln1w"), 0.0);
  EXPECT_EQ(g.weight_decay_of("lnfb"), 0.0);
  EXPECT_EQ(g.weight_decay_of("linear1.weight"), 0.1);  // "ln" must be followed by a digit or f
  EXPECT_EQ(g.weight_decay_of("blocks.0.kernel1.weight"), 0.1);
  EXPECT_EQ(g.weight_decay_of("blocks.0.mlp.fc1.weight"), 0.1);
}

// Only the by-name rule ignores case: a parameter's forced rule is its exact name.
TEST(ParamGroups, OnlyTheByNameRuleIgnoresCase) {
  const ParamGroups g = make(0.1, {{"forced", {"attn.W"}, 0.0}, no_decay_for_biases_and_norms()});
  EXPECT_EQ(g.weight_decay_of("attn.W"), 0.0);
  EXPECT_EQ(g.weight_decay_of("attn.w"), 0.1);
  EXPECT_EQ(g.weight_decay_of("x.LAYERNORM.weight"), 0.0);
}

TEST(ParamGroups, FirstMatchingRuleWins) {
  const ParamGroups g = make(0.1, {{"embeddings", {"wte.*", "wpe.*"}, 0.0},
                                   {"heads", {"blocks.[0-3].attn.*"}, 0.05},
                                   {"everything", {"*"}, 0.2}});
  EXPECT_EQ(g.group_of("wte.weight"), 0);
  EXPECT_EQ(g.weight_decay_of("blocks.2.attn.proj.weight"), 0.05);
  EXPECT_EQ(g.weight_decay_of("blocks.7.attn.proj.weight"), 0.2);  // [0-3] does not match 7
  EXPECT_EQ(g.group_of("anything.else"), 2);
}

TEST(ParamGroups, DecaySegmentsAreSortedAndMerged) {
  const ParamGroups g = make(0.1, {no_decay_for_biases_and_norms()});
  // Deliberately out of order; ln.weight + ln.bias touch and merge; a gap splits.
  const std::vector<ParamExtent> params = {
      {"fc.weight", 0, 100}, {"fc.bias", 100, 10}, {"norm.weight", 110, 16},
      {"norm.bias", 126, 16}, {"proj.weight", 150, 64}, {"proj.bias", 214, 8},
      {"empty.bias", 222, 0}};
  const auto segments = g.decay_segments({params.rbegin(), params.rend()});
  ASSERT_TRUE(segments.ok()) << segments.status().to_string();
  ASSERT_EQ(segments->size(), 2u);
  EXPECT_EQ((*segments)[0].begin, 100);
  EXPECT_EQ((*segments)[0].end, 142);
  EXPECT_EQ((*segments)[0].weight_decay, 0.0f);
  EXPECT_EQ((*segments)[1].begin, 214);
  EXPECT_EQ((*segments)[1].end, 222);
  EXPECT_TRUE(kernels::validate_segments(segments->data(), 2).ok());
}

TEST(ParamGroups, RejectsBadRulesAndOverlaps) {
  EXPECT_EQ(ParamGroups::create(0.1, {{"empty", {}, 0.0}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParamGroups::create(0.1, {{"blank", {""}, 0.0}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParamGroups::create(-0.1, {}).status().code(), StatusCode::kInvalidArgument);
  const ParamGroups g = make(0.1, {no_decay_for_biases_and_norms()});
  const auto overlap = g.decay_segments({{"a.weight", 0, 10}, {"a.bias", 5, 10}});
  ASSERT_FALSE(overlap.ok());
  EXPECT_NE(overlap.status().message().find("\"a.weight\" and \"a.bias\" overlap"), std::string::npos);
}

TEST(DecaySegments, ValidationNamesTheBadSegment) {
  const std::vector<kernels::DecaySegment> unsorted = {{10, 20, 0.0f}, {15, 30, 0.0f}};
  const Status st = kernels::validate_segments(unsorted.data(), 2);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("segments 0 and 1 overlap"), std::string::npos) << st.message();
  const std::vector<kernels::DecaySegment> empty = {{10, 10, 0.0f}};
  EXPECT_EQ(kernels::validate_segments(empty.data(), 1).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zdp::optim
