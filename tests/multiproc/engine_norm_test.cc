// The global gradient norm, the clip coefficient and the clipped update against numbers
// computed here in float64 from TinyMlp's math (testing/tiny_mlp.h), at K = 1 and 2, in the
// default and the deterministic mode. The other engine tests compare the engine with
// itself (K ranks against 1 rank), so a norm that skipped a bucket, or a clip coefficient
// off by a factor, passed them all as long as every K was wrong the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "testing/engine_comparisons.h"

namespace zdp {
namespace {

using testing::TinyMlp;

constexpr int kBatch = 24;  // EngineRun's global batch

// TinyMlp's gradient of step 0's global-batch mean loss at `masters` (fc0.weight, fc0.bias,
// fc1.weight, ...), in float64.
std::vector<std::vector<double>> float64_gradient(const std::vector<std::vector<float>>& masters) {
  std::vector<std::vector<double>> g(masters.size());
  for (size_t p = 0; p < masters.size(); ++p) g[p].assign(masters[p].size(), 0.0);
  for (int s = 0; s < kBatch; ++s) {
    std::vector<std::vector<double>> a(TinyMlp::kLayers + 1);
    for (int j = 0; j < TinyMlp::kIn[0]; ++j) a[0].push_back(TinyMlp::input(0, s, j));
    for (int l = 0; l < TinyMlp::kLayers; ++l) {
      const int in = TinyMlp::kIn[l], out = TinyMlp::kOut[l];
      for (int q = 0; q < out; ++q) {
        double z = masters[2 * l + 1][q];
        for (int i = 0; i < in; ++i) z += masters[2 * l][q * in + i] * a[l][i];
        a[l + 1].push_back(l + 1 < TinyMlp::kLayers ? std::tanh(z) : z);
      }
    }
    // d(0.5 (y - t)^2) / dy, averaged over the batch.
    std::vector<double> d;
    for (int k = 0; k < TinyMlp::kOut[TinyMlp::kLayers - 1]; ++k) {
      d.push_back((a[TinyMlp::kLayers][k] - TinyMlp::target(0, s, k)) / kBatch);
    }
    for (int l = TinyMlp::kLayers - 1; l >= 0; --l) {
      const int in = TinyMlp::kIn[l], out = TinyMlp::kOut[l];
      std::vector<double> back(in, 0.0);
      for (int q = 0; q < out; ++q) {
        g[2 * l + 1][q] += d[q];
        for (int i = 0; i < in; ++i) {
          g[2 * l][q * in + i] += d[q] * a[l][i];
          back[i] += masters[2 * l][q * in + i] * d[q];
        }
      }
      d.assign(in, 0.0);
      for (int i = 0; i < in; ++i) d[i] = back[i] * (1 - a[l][i] * a[l][i]);
    }
  }
  return g;
}

TEST(GradientNorm, NormClipAndTheClippedUpdateMatchFloat64) {
  for (const bool deterministic : {false, true}) {
    for (const int world : {1, 2}) {
      SCOPED_TRACE("world " + std::to_string(world) + (deterministic ? ", deterministic" : ""));
      EngineOptions o = testing::comparison_options(2);
      o.deterministic = deterministic;
      o.optim.grad_clip = 0.05;      // the norm is ~1.66: clipped by ~30x
      o.optim.weight_decay = 0.0;    // the update below is AdamW's first step alone
      const testing::EngineRunResult before = testing::run_expecting_success(world, o, 0);
      const testing::EngineRunResult after = testing::run_expecting_success(world, o, 1);
      ASSERT_EQ(after.stats.size(), 1u);
      const std::vector<std::vector<double>> g = float64_gradient(before.masters);
      double sq = 0;
      for (const auto& p : g) {
        for (double x : p) sq += x * x;
      }
      const double norm = std::sqrt(sq);
      // fp32 gradients summed in fp32 over 4 micro-batches and 916 elements: ~1e-6.
      EXPECT_NEAR(after.stats[0].grad_norm, norm, 1e-5 * norm);
      const double clip = 0.05 / (after.stats[0].grad_norm + 1e-6);  // torch's clip_grad_norm_
      EXPECT_NEAR(after.stats[0].clip_coef, clip, 1e-12 * clip);
      // AdamW's first step: m_hat = c g, v_hat = (c g)^2, so x -= lr c g / (|c g| + eps);
      // with eps = 1e-3 near |c g|, the update follows c (a wrong factor moves it).
      ASSERT_EQ(after.masters.size(), before.masters.size());
      double worst = 0;
      for (size_t p = 0; p < g.size(); ++p) {
        for (size_t i = 0; i < g[p].size(); ++i) {
          const double cg = clip * g[p][i];
          const double want = before.masters[p][i] - o.optim.lr * cg / (std::fabs(cg) + o.optim.eps);
          worst = std::max(worst, std::fabs(after.masters[p][i] - want));
        }
      }
      // fp32 masters (~6e-8 x |x|) and the gradient's fp32 rounding through the update.
      EXPECT_LT(worst, 2e-6) << "largest difference from the float64 update";
    }
  }
}

}  // namespace
}  // namespace zdp
