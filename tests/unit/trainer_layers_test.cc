// Gradient check of every layer of dp-train's models on the CPU: the fp32 backward
// (kernels through trainer/models/ops.h and attention.h) against central finite
// differences of a float64 reference forward, on tiny random sizes. The objective is
// J = sum(G * y) for a random upstream gradient G, so d J / d input is exactly what each
// backward computes from dy = G.
//
// Tolerance (testing/tolerance.h): each gradient element is a sum of at most R
// products, each produced through at most ~10 fp32 roundings, so its first-order error
// is below (R + 10) u times the sum of the absolute terms. We take that sum as R x the
// largest |reference| of the tensor (no term of these O(1) random inputs exceeds the
// tensor's scale by more). Finite differences in float64 with h = 1e-6 add O(h^2) =
// 1e-12 relative: negligible.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "testing/tolerance.h"
#include "trainer/models/attention.h"
#include "trainer/models/model_spec.h"
#include "trainer/models/ops.h"

namespace zdp::trainer {
namespace {

using Vec = std::vector<double>;
using kernels::OutputMode;

class Layers : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = create_cpu_device();
    ops_ = Ops::create(*device_, DType::kF32).value();
  }
  Vec random(size_t n, double scale = 1.0) {
    std::uniform_real_distribution<double> u(-scale, scale);
    Vec v(n);
    for (double& x : v) x = u(rng_);
    return v;
  }
  // A device (here: host) fp32 copy of v.
  float* dev(const Vec& v) {
    buffers_.push_back(ops_->alloc(static_cast<int64_t>(v.size()), DType::kF32).value());
    float* p = buffers_.back().as<float>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
    return p;
  }
  float* zeros(size_t n) { return dev(Vec(n, 0.0)); }
  // d J / d theta by central differences of the float64 objective.
  static Vec fd(const std::function<double(const Vec&)>& J, Vec theta) {
    Vec g(theta.size());
    for (size_t i = 0; i < theta.size(); ++i) {
      const double h = 1e-6 * std::max(1.0, std::fabs(theta[i])), keep = theta[i];
      theta[i] = keep + h;
      const double up = J(theta);
      theta[i] = keep - h;
      g[i] = (up - J(theta)) / (2 * h);
      theta[i] = keep;
    }
    return g;
  }
  static void expect_grad(const float* got, const Vec& ref, int reduction, const char* what) {
    double scale = 0;
    for (double r : ref) scale = std::max(scale, std::fabs(r));
    const double allowed = testing::straight_line_bound(reduction + 10, reduction * scale);
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_TRUE(testing::within(got[i], ref[i], allowed, static_cast<int64_t>(i))) << what;
    }
  }
  static double dot(const Vec& g, const Vec& y) {
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += g[i] * y[i];
    return s;
  }

  std::mt19937_64 rng_{42};
  std::unique_ptr<Device> device_;
  std::unique_ptr<Ops> ops_;
  std::vector<DeviceBuffer> buffers_;
};

Vec linear_ref(const Vec& x, const Vec& w, const Vec& b, int rows, int in, int out) {
  Vec y(static_cast<size_t>(rows * out));
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double s = b[static_cast<size_t>(o)];
      for (int i = 0; i < in; ++i) s += x[static_cast<size_t>(r * in + i)] * w[static_cast<size_t>(o * in + i)];
      y[static_cast<size_t>(r * out + o)] = s;
    }
  }
  return y;
}

TEST_F(Layers, Linear) {
  const int rows = 5, in = 7, out = 3;
  const Vec x = random(rows * in), w = random(out * in), b = random(out), G = random(rows * out);
  float* dx = zeros(x.size());
  float* dw = zeros(w.size());
  float* db = zeros(b.size());
  float* y = zeros(G.size());
  ASSERT_TRUE(ops_->linear(dev(x), dev(w), dev(b), y, rows, in, out).ok());
  const Vec yr = linear_ref(x, w, b, rows, in, out);
  for (size_t i = 0; i < yr.size(); ++i) ASSERT_TRUE(testing::within(y[i], yr[i], testing::straight_line_bound(in + 1, in + 1.0), i));
  ASSERT_TRUE(ops_->linear_backward(dev(x), dev(w), dev(G), dx, OutputMode::kOverwrite, dw, db, rows, in, out).ok());
  expect_grad(dx, fd([&](const Vec& t) { return dot(G, linear_ref(t, w, b, rows, in, out)); }, x), out, "dx");
  expect_grad(dw, fd([&](const Vec& t) { return dot(G, linear_ref(x, t, b, rows, in, out)); }, w), rows, "dw");
  expect_grad(db, fd([&](const Vec& t) { return dot(G, linear_ref(x, w, t, rows, in, out)); }, b), rows, "db");
}

Vec layernorm_ref(const Vec& x, const Vec& w, const Vec& b, int rows, int cols) {
  Vec y(x.size());
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < cols; ++c) mean += x[static_cast<size_t>(r * cols + c)] / cols;
    for (int c = 0; c < cols; ++c) var += std::pow(x[static_cast<size_t>(r * cols + c)] - mean, 2) / cols;
    for (int c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      y[i] = (x[i] - mean) / std::sqrt(var + 1e-5) * w[static_cast<size_t>(c)] + b[static_cast<size_t>(c)];
    }
  }
  return y;
}

TEST_F(Layers, LayerNormAccumulatingIntoTheResidualGradient) {
  const int rows = 4, cols = 9;
  const Vec x = random(rows * cols), w = random(cols), b = random(cols), G = random(rows * cols), prior = random(rows * cols);
  float* mean = zeros(rows);
  float* rstd = zeros(rows);
  float* y = zeros(x.size());
  float* dx = dev(prior);  // kAccumulate adds to what is there
  float* dw = zeros(cols);
  float* db = zeros(cols);
  const float* xd = dev(x);
  const float* wd = dev(w);
  ASSERT_TRUE(ops_->layernorm({rows, cols, DType::kF32, xd, wd, dev(b), y, mean, rstd}).ok());
  const Vec yr = layernorm_ref(x, w, b, rows, cols);
  for (size_t i = 0; i < yr.size(); ++i) ASSERT_TRUE(testing::within(y[i], yr[i], testing::straight_line_bound(3 * cols, 4.0), i));
  ASSERT_TRUE(ops_->layernorm_backward({rows, cols, DType::kF32, dev(G), xd, wd, mean, rstd, dx, OutputMode::kAccumulate, dw, db}).ok());
  Vec dx_ref = fd([&](const Vec& t) { return dot(G, layernorm_ref(t, w, b, rows, cols)); }, x);
  for (size_t i = 0; i < dx_ref.size(); ++i) dx_ref[i] += prior[i];
  expect_grad(dx, dx_ref, 3 * cols, "dx");
  expect_grad(dw, fd([&](const Vec& t) { return dot(G, layernorm_ref(x, t, b, rows, cols)); }, w), rows, "dweight");
  expect_grad(db, fd([&](const Vec& t) { return dot(G, layernorm_ref(x, w, t, rows, cols)); }, b), rows, "dbias");
}

TEST_F(Layers, Gelu) {
  const Vec x = random(64, 4.0), G = random(64);
  auto ref = [](const Vec& t) {
    Vec y(t.size());
    for (size_t i = 0; i < t.size(); ++i) y[i] = 0.5 * t[i] * (1 + std::tanh(std::sqrt(2 / M_PI) * (t[i] + 0.044715 * std::pow(t[i], 3))));
    return y;
  };
  float* dx = zeros(x.size());
  ASSERT_TRUE(ops_->gelu_backward(dev(x), dev(G), dx, 64).ok());
  expect_grad(dx, fd([&](const Vec& t) { return dot(G, ref(t)); }, x), 1, "gelu dx");
}

// qkv [B*T, 3d] -> y [B*T, d], causal, heads of hd.
Vec attention_ref(const Vec& qkv, int B, int T, int H, int hd) {
  const int d = H * hd;
  Vec y(static_cast<size_t>(B * T * d), 0.0);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      auto at = [&](int t, int part, int k) { return qkv[static_cast<size_t>((b * T + t) * 3 * d + part * d + h * hd + k)]; };
      for (int i = 0; i < T; ++i) {
        Vec s(static_cast<size_t>(i + 1));
        double m = -1e300, sum = 0;
        for (int j = 0; j <= i; ++j) {
          double v = 0;
          for (int k = 0; k < hd; ++k) v += at(i, 0, k) * at(j, 1, k);
          s[static_cast<size_t>(j)] = v / std::sqrt(static_cast<double>(hd));
          m = std::max(m, s[static_cast<size_t>(j)]);
        }
        for (double& v : s) sum += (v = std::exp(v - m));
        for (int j = 0; j <= i; ++j) {
          for (int k = 0; k < hd; ++k) y[static_cast<size_t>((b * T + i) * d + h * hd + k)] += s[static_cast<size_t>(j)] / sum * at(j, 2, k);
        }
      }
    }
  }
  return y;
}

// Attention's GEMMs run as strided batches over the heads (samples <= heads) or over the
// samples (samples > heads): both layouts against the float64 reference.
TEST_F(Layers, CausalSelfAttention) {
  for (const AttentionShape s : {AttentionShape{2, 5, 2, 3}, AttentionShape{3, 5, 2, 3}, AttentionShape{1, 4, 3, 2}}) {
    const int B = static_cast<int>(s.batch), T = static_cast<int>(s.seq), H = static_cast<int>(s.heads);
    const int hd = static_cast<int>(s.head_dim), n = B * T, d = H * hd;
    const Vec qkv = random(static_cast<size_t>(n * 3 * d)), G = random(static_cast<size_t>(n * d));
    float* probs = zeros(static_cast<size_t>(B * H * T * T));
    float* dprobs = zeros(static_cast<size_t>(B * H * T * T));
    float* y = zeros(G.size());
    float* dqkv = zeros(qkv.size());
    const float* qd = dev(qkv);
    const AttentionSaved saved{false, probs, nullptr};
    ASSERT_TRUE(attention_forward(*ops_, s, qd, saved, y).ok());
    const Vec yr = attention_ref(qkv, B, T, H, hd);
    for (size_t i = 0; i < yr.size(); ++i) {
      ASSERT_TRUE(testing::within(y[i], yr[i], testing::straight_line_bound(30, 5.0), i)) << B << " samples, " << H << " heads";
    }
    ASSERT_TRUE(attention_backward(*ops_, s, qd, saved, y, dev(G), dprobs, dqkv).ok());
    expect_grad(dqkv, fd([&](const Vec& t) { return dot(G, attention_ref(t, B, T, H, hd)); }, qkv), 25, "dqkv");
  }
}

// The CPU runs attention batched: "auto" decides so quietly, "fused" is refused naming why.
TEST_F(Layers, FusedAttentionIsTheGpusOnly) {
  const kernels::FusedAttentionShape s{2, 8, 2, 4, DType::kF32};
  EXPECT_FALSE(ops_->use_fused_attention(s).value());
  std::unique_ptr<Ops> forced = Ops::create(*device_, DType::kF32, false, AttentionImpl::kFused).value();
  const StatusOr<bool> refused = forced->use_fused_attention(s);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("model.attention = \"fused\" cannot run fused attention fp32 batch 2 x seq 8 x "
                                            "2 heads x hd 4: the device is the CPU"),
            std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(Ops::create(*device_, DType::kF32, false, AttentionImpl::kBatched).value()->use_fused_attention(s).value());
}

// The activations model_spec() plans (dp-launch plan) follow the attention path: fused
// keeps 4 bytes of log-sum-exp per (sample, head, query) instead of seq bf16
// probabilities, and needs no backward scratch of their size.
TEST(PlannedActivations, FollowTheAttentionPath) {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = 2, c.model.d_model = 64, c.model.n_heads = 4, c.model.seq_len = 32, c.model.vocab_size = 50;
  c.model.dtype = DType::kBF16;
  c.train.micro_batch = 3;
  const ModelSpec fused = model_spec(c).value();
  c.model.attention = AttentionImpl::kBatched;
  const ModelSpec batched = model_spec(c).value();
  EXPECT_TRUE(fused.fused_attention);
  EXPECT_FALSE(batched.fused_attention);
  const int64_t B = 3, H = 4, T = 32, L = 2;
  const int64_t probs = B * H * T * T * 2, stats = B * H * T * 4;
  EXPECT_EQ(batched.activation_bytes - fused.activation_bytes, L * (probs - stats) + probs);
  // cuDNN's workspace, planned for the fused path only: the backward's fp32 softmax sums
  // and dQ accumulator (hd = 16), or, deterministic, its bf16 dP scratch of seq x seq
  // (32 rounded up to 64).
  EXPECT_EQ(fused.attention_workspace_bytes, B * H * T * 4 + B * H * T * 16 * 4);
  EXPECT_EQ(batched.attention_workspace_bytes, 0);
  c.model.attention = AttentionImpl::kAuto;
  c.train.deterministic = true;
  EXPECT_EQ(model_spec(c).value().attention_workspace_bytes, B * H * T * 4 + B * H * 64 * 64 * 2);
  c.model.dtype = DType::kF32;  // fp32 never runs fused, "auto" plans batched
  EXPECT_FALSE(model_spec(c).value().fused_attention);
  EXPECT_EQ(model_spec(c).value().attention_workspace_bytes, 0);
}

// MFU's FLOPs (Model::flops_per_sample) are PaLM's and nanoGPT's count at gpt2-124m's
// shape: 6 per dense weight and token, N = V d + 12 L d^2 (the head and the blocks'
// linears; the position table is a lookup, which nanoGPT's get_num_params leaves out
// too: it was counted, 0.55% too many), plus attention's 12 L T d. 854,654,976 a token;
// the planner's GPU step model (gpu_step_model_test) counts the same.
TEST(PlannedActivations, FlopsPerTokenArePalmsCount) {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = 12, c.model.d_model = 768, c.model.n_heads = 12, c.model.seq_len = 1024;
  c.model.vocab_size = 50304;
  c.train.micro_batch = 1;
  const ModelSpec spec = model_spec(c).value();
  EXPECT_DOUBLE_EQ(spec.flops_per_sample / 1024, 6.0 * (50304.0 * 768 + 12.0 * 12 * 768 * 768) + 12.0 * 12 * 1024 * 768);
  EXPECT_DOUBLE_EQ(spec.flops_per_sample / 1024, 854654976.0);
}

// A vocabulary x width past 2^31 (2^20 x 4096, a shape the config allows) is planned in
// full: the fp32 head gradient alone is V x C x 4 = 2^34 bytes. When the gpt kept its
// sizes in int, V x C wrapped to 0 (undefined behaviour; UBSan named gpt.cc) and so did
// (V + 1) x 4 for V >= 2^29.
TEST(PlannedActivations, LargeVocabularyTimesWidthIsCountedInFull) {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = 1, c.model.d_model = 4096, c.model.n_heads = 32, c.model.seq_len = 8;
  c.model.vocab_size = 1 << 20;
  c.train.micro_batch = 1;
  const ModelSpec spec = model_spec(c).value();
  EXPECT_EQ(spec.psi, int64_t{(1 << 20) + 8} * 4096 + 12 * 4096 * 4096 + 13 * 4096 + 2 * 4096);
  EXPECT_GE(spec.activation_bytes, (int64_t{1} << 20) * 4096 * 4);
}

// When the gpt's gradients are complete in its backward (the planner's overlap, dp-launch
// plan): by hand for 2 layers of d 64, seq 32, vocab 50. Backward's FLOPs a token: the LM
// head's 4 V d = 12,800, each block's 48 d^2 + 8 T d = 212,992. norm_f's gradient is
// complete after the head, block 1's after the head and one block, block 0's and the tied
// embedding's and position table's only at the end.
TEST(PlannedActivations, GradientsAreReadyInTheGptsBackwardOrder) {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = 2, c.model.d_model = 64, c.model.n_heads = 4, c.model.seq_len = 32, c.model.vocab_size = 50;
  const ModelSpec spec = model_spec(c).value();
  ASSERT_EQ(spec.grad_ready.size(), spec.params.size());
  const double head = 12800, block = 212992, total = head + 2 * block;
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const std::string& n = spec.params[i].name;
    const double want = n.rfind("norm_f.", 0) == 0      ? head / total
                        : n.rfind("blocks.1.", 0) == 0  ? (head + block) / total
                                                        : 1.0;  // blocks.0.*, wte, wpe
    EXPECT_DOUBLE_EQ(spec.grad_ready[i], want) << n;
  }
  c.model.kind = ModelKind::kMlp;  // states none: the planner's even rate in elements
  EXPECT_TRUE(model_spec(c).value().grad_ready.empty());
}

TEST_F(Layers, CrossEntropyFusedWithItsGradient) {
  const int rows = 6, vocab = 11;
  const Vec logits = random(rows * vocab, 3.0);
  std::vector<int32_t> targets = {0, 10, 3, 3, 7, 1};
  const float scale = 1.0f / rows;
  auto J = [&](const Vec& t) {
    double total = 0;
    for (int r = 0; r < rows; ++r) {
      double m = -1e300, sum = 0;
      for (int j = 0; j < vocab; ++j) m = std::max(m, t[static_cast<size_t>(r * vocab + j)]);
      for (int j = 0; j < vocab; ++j) sum += std::exp(t[static_cast<size_t>(r * vocab + j)] - m);
      total += scale * (std::log(sum) + m - t[static_cast<size_t>(r * vocab + targets[static_cast<size_t>(r)])]);
    }
    return total;
  };
  float* l = dev(logits);
  float* losses = zeros(rows);
  ASSERT_TRUE(ops_->cross_entropy({rows, vocab, DType::kF32, l, targets.data(), losses, l, scale}).ok());
  double total = 0;
  for (int r = 0; r < rows; ++r) total += scale * losses[r];
  EXPECT_TRUE(testing::within(total, J(logits), testing::straight_line_bound(2 * vocab, 4.0)));
  expect_grad(l, fd(J, logits), vocab, "dlogits");
  targets[0] = vocab;  // out of range: named
  EXPECT_FALSE(ops_->cross_entropy({rows, vocab, DType::kF32, l, targets.data(), losses, nullptr, scale}).ok());
}

// The mlp's regression loss: per row 0.5 sum (pred - target)^2, its gradient fused.
TEST_F(Layers, SquaredErrorFusedWithItsGradient) {
  const int rows = 5, cols = 7;
  const Vec pred = random(rows * cols, 2.0), target_d = random(rows * cols, 2.0);
  std::vector<float> target(target_d.begin(), target_d.end());
  const float scale = 1.0f / rows;
  auto J = [&](const Vec& t) {
    double total = 0;
    for (size_t i = 0; i < t.size(); ++i) total += scale * 0.5 * std::pow(t[i] - static_cast<double>(target[i]), 2);
    return total;
  };
  float* p = dev(pred);
  float* dpred = zeros(pred.size());
  float* losses = zeros(rows);
  ASSERT_TRUE(ops_->squared_error({rows, cols, DType::kF32, p, target.data(), losses, dpred, scale}).ok());
  double total = 0;
  for (int r = 0; r < rows; ++r) total += scale * losses[r];
  // Per row: cols differences, squares and adds of terms up to (2 + 2)^2 / 2.
  EXPECT_TRUE(testing::within(total, J(pred), testing::straight_line_bound(3 * cols + 2, rows * cols * 8.0 * scale)));
  expect_grad(dpred, fd(J, pred), 1, "dpred");
}

TEST_F(Layers, EmbeddingsWithTheTiedHeadsShare) {
  const int B = 2, T = 4, C = 3, V = 5;
  const std::vector<int32_t> tokens = {1, 4, 1, 0, 4, 4, 2, 1};
  const Vec wte = random(V * C), wpe = random(T * C), G = random(B * T * C), head = random(V * C);
  auto ref = [&](const Vec& e, const Vec& p) {
    Vec y(static_cast<size_t>(B * T * C));
    for (int n = 0; n < B * T; ++n) {
      for (int c = 0; c < C; ++c) y[static_cast<size_t>(n * C + c)] = e[static_cast<size_t>(tokens[static_cast<size_t>(n)] * C + c)] + p[static_cast<size_t>((n % T) * C + c)];
    }
    return y;
  };
  float* out = zeros(G.size());
  ASSERT_TRUE(ops_->embedding({B, T, C, V, DType::kF32, tokens.data(), dev(wte), dev(wpe), out}).ok());
  const Vec yr = ref(wte, wpe);
  for (size_t i = 0; i < yr.size(); ++i) ASSERT_TRUE(testing::within(out[i], yr[i], testing::straight_line_bound(1, 2.0), i));
  std::vector<int32_t> offsets, order;
  ASSERT_TRUE(kernels::build_token_index(tokens.data(), B * T, V, &offsets, &order).ok());
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 1, 4, 5, 5, 8}));
  EXPECT_EQ(order, (std::vector<int32_t>{3, 0, 2, 7, 6, 1, 4, 5}));
  // A token past the vocabulary indexed the offsets out of bounds (host heap).
  for (const int32_t bad : {V, -1}) {
    std::vector<int32_t> wrong = tokens;
    wrong[3] = bad;
    const Status refused = kernels::build_token_index(wrong.data(), B * T, V, &offsets, &order);
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.to_string();
    EXPECT_NE(refused.message().find("token " + std::to_string(bad) + " at position 3 is outside [0, 5)"),
              std::string::npos) << refused.to_string();
  }
  float* dwte = zeros(wte.size());
  float* dwpe = zeros(wpe.size());
  std::vector<float> base(head.begin(), head.end());
  ASSERT_TRUE(ops_->embedding_backward({B, T, C, V, DType::kF32, dev(G), offsets.data(), order.data(), base.data(), dwte, dwpe}).ok());
  Vec dwte_ref = fd([&](const Vec& t) { return dot(G, ref(t, wpe)); }, wte);
  for (size_t i = 0; i < dwte_ref.size(); ++i) dwte_ref[i] += head[i];  // the head's share, added once
  expect_grad(dwte, dwte_ref, B * T, "dwte");
  expect_grad(dwpe, fd([&](const Vec& t) { return dot(G, ref(wte, t)); }, wpe), B, "dwpe");
}

}  // namespace
}  // namespace zdp::trainer
