// `dp-launch plan --from-profile DIR --baseline DIR0` (planner/profile_diff.h): two made-up
// profiles with hand-chosen region times; the per-region ratios, the totals over the
// regions both runs have and over each run's own, a region only one run has (the residual
// add before it rode in the GEMM), the "moved" line's 3% threshold, and the refusals.
#include <gtest/gtest.h>

#include <string>

#include "planner/profile_diff.h"

namespace zdp::launcher {
namespace {

using trainer::KernelRegion;

void set(MeasuredKernels& m, KernelRegion r, double ms) {
  const auto i = static_cast<size_t>(r);
  m.present[i] = true;
  m.seconds[i] = ms / 1e3;
  m.entries[i] = 12;
}

MeasuredKernels run(const std::string& dir) {
  MeasuredKernels m;
  m.dir = dir;
  m.device = "NVIDIA H200", m.device_kind = "cuda";
  m.layers = 12, m.d_model = 768, m.heads = 12, m.vocab = 50304, m.seq = 1024, m.micro_batch = 16, m.accum_steps = 2;
  m.dtype = "bf16", m.fused_attention = true, m.steps = 20;
  return m;
}

// Baseline: cross-entropy 5.0, layernorm bwd 4.0, fc proj fwd 3.0, residual add 1.0,
// embedding bwd 0.4, optimizer 2.0, step 60 ms. Measured: cross-entropy 2.5 (0.5x),
// layernorm bwd 4.1 (+2.5%: within 3%), fc proj fwd 3.2 (+6.7%), no residual add,
// embedding bwd 0.384 (-4%), optimizer 2.0, step 57 ms.
TEST(ProfileDiff, RegionsSideBySide) {
  MeasuredKernels b = run("/runs/base"), m = run("/runs/now");
  set(b, KernelRegion::kCrossEntropy, 5.0), set(m, KernelRegion::kCrossEntropy, 2.5);
  set(b, KernelRegion::kLayernormBwd, 4.0), set(m, KernelRegion::kLayernormBwd, 4.1);
  set(b, KernelRegion::kFcProjFwd, 3.0), set(m, KernelRegion::kFcProjFwd, 3.2);
  set(b, KernelRegion::kResidualAdd, 1.0);
  set(b, KernelRegion::kEmbeddingBwd, 0.4), set(m, KernelRegion::kEmbeddingBwd, 0.384);
  b.optimizer_s = m.optimizer_s = 2e-3;
  b.step_s = 60e-3, m.step_s = 57e-3;

  StatusOr<ProfileDiff> d = diff_profiles(m, b);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  ASSERT_EQ(d->rows.size(), 6u);  // five model regions and the optimizer, in the step's order
  EXPECT_EQ(d->rows[0].region, KernelRegion::kFcProjFwd);
  EXPECT_EQ(d->rows[1].region, KernelRegion::kResidualAdd);
  EXPECT_LT(d->rows[1].measured_s, 0);
  EXPECT_DOUBLE_EQ(d->rows[1].baseline_s, 1e-3);
  EXPECT_EQ(d->rows.back().region, KernelRegion::kAdamW);
  // Both: 5 + 4 + 3 + 0.4 + 2 = 14.4 against 2.5 + 4.1 + 3.2 + 0.384 + 2 = 12.184.
  EXPECT_NEAR(d->baseline_both_s, 14.4e-3, 1e-12);
  EXPECT_NEAR(d->measured_both_s, 12.184e-3, 1e-12);
  // Each run's own: the residual add counts in the baseline's.
  EXPECT_NEAR(d->baseline_regions_s, 15.4e-3, 1e-12);
  EXPECT_NEAR(d->measured_regions_s, 12.184e-3, 1e-12);

  const std::string text = format_profile_diff(*d, m, b);
  EXPECT_NE(text.find("cross-entropy"), std::string::npos) << text;
  EXPECT_NE(text.find("0.500x"), std::string::npos) << text;
  EXPECT_NE(text.find("-2.500"), std::string::npos) << text;
  EXPECT_NE(text.find("gone"), std::string::npos) << text;
  EXPECT_NE(text.find("step (rank 0's mean, profile.jsonl): baseline 60.000 ms, measured 57.000 ms (0.950x)"),
            std::string::npos)
      << text;
  // Moved: fc proj fwd (+6.7%), the residual add (gone), cross-entropy (0.5x), the embedding's
  // backward (4%); not layernorm bwd (2.5%) nor the optimizer (equal).
  const size_t at = text.find("moved by 3% or more: ");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string moved = text.substr(at);
  EXPECT_NE(moved.find("fc proj linear fwd 3.000 -> 3.200 ms (1.067x)"), std::string::npos) << moved;
  EXPECT_NE(moved.find("residual add 1.000 -> - ms (gone)"), std::string::npos) << moved;
  EXPECT_NE(moved.find("cross-entropy (loss, dlogits) 5.000 -> 2.500 ms (0.500x)"), std::string::npos) << moved;
  EXPECT_NE(moved.find("embedding bwd 0.400 -> 0.384 ms (0.960x)"), std::string::npos) << moved;
  EXPECT_EQ(moved.find("layernorm bwd"), std::string::npos) << moved;
  EXPECT_EQ(moved.find("adamw"), std::string::npos) << moved;
}

TEST(ProfileDiff, NothingMovedSaysNone) {
  MeasuredKernels b = run("/runs/base"), m = run("/runs/now");
  set(b, KernelRegion::kCrossEntropy, 5.0), set(m, KernelRegion::kCrossEntropy, 5.1);
  StatusOr<ProfileDiff> d = diff_profiles(m, b);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  const std::string text = format_profile_diff(*d, m, b);
  EXPECT_NE(text.find("moved by 3% or more: none"), std::string::npos) << text;
  EXPECT_NE(text.find("profile.jsonl's step lines are missing in /runs/now and /runs/base"), std::string::npos) << text;
}

TEST(ProfileDiff, RefusesAnotherModelOrDevice) {
  const MeasuredKernels b = run("/runs/base");
  MeasuredKernels m = run("/runs/now");
  m.d_model = 1024;
  StatusOr<ProfileDiff> d = diff_profiles(m, b);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("model.d_model is 768 there and 1024 here"), std::string::npos)
      << d.status().to_string();
  m = run("/runs/now");
  m.device = "NVIDIA H100 80GB HBM3";
  d = diff_profiles(m, b);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("the device is 'NVIDIA H200' there and 'NVIDIA H100 80GB HBM3' here"),
            std::string::npos)
      << d.status().to_string();
  m = run("/runs/now");
  m.accum_steps = 1;
  EXPECT_FALSE(diff_profiles(m, b).ok());
  m = run("/runs/now");
  m.dtype = "fp32";
  EXPECT_FALSE(diff_profiles(m, b).ok());
  // Attention may differ: fused against batched is a change worth measuring.
  m = run("/runs/now");
  m.fused_attention = false;
  EXPECT_TRUE(diff_profiles(m, b).ok());
  // Ranks and stage where both files say them (version 2): 2 ranks at stage 2 against 1 at
  // stage 0 set a 1/2 share of AdamW against the whole update.
  MeasuredKernels b2 = run("/runs/base"), m2 = run("/runs/now");
  b2.version = m2.version = 2;
  m2.world_size = 2;
  d = diff_profiles(m2, b2);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("ranks (world size) is 1 there and 2 here"), std::string::npos)
      << d.status().to_string();
  m2.world_size = 1, m2.zero_stage = 2;
  EXPECT_FALSE(diff_profiles(m2, b2).ok());
  b2.version = 1;  // the GPU check's older baseline build writes version 1: not compared
  EXPECT_TRUE(diff_profiles(m2, b2).ok());
}

}  // namespace
}  // namespace zdp::launcher
