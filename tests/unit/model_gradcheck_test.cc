// Gradient check of dp-train's assembled models on the CPU (trainer/models/gpt.cc, mlp.cc):
// every parameter's fp32 gradient from train_micro() against central differences of a
// float64 re-implementation of the model's loss, on tiny shapes with random parameters
// of order 1 (every tensor: the tied embedding / LM head, wpe, all LayerNorms, attention
// and MLP weights and biases; the MLP in both tasks). And that the GPT refuses a token or
// target outside its vocabulary before any kernel runs.
//
// Why: trainer_layers_test checks each layer's backward alone, and gpt_gpu_test /
// mlp_gpu_test run the same gpt.cc / mlp.cc on both devices, so a wiring mistake in the
// model itself (a residual gradient overwritten instead of added to, the head's share of
// the tied wte dropped, a gradient written to another tensor's view) passes all of them.
// Here the reference shares no code with the model: its loss written out again in float64
// from the model's definition, differentiated numerically. Central differences of the fp32
// model's own loss would not do: that loss is rounded at u = 2^-24 of its size, so each
// difference quotient carries about u |L| / h, 1e-3 relative at the h ~ 1e-4 that keeps
// the truncation error down, too coarse to see a missing term of a small gradient. That
// the float64 loss is the model's function is checked first: it must match the fp32 loss
// within the forward's rounding bound.
//
// Tolerance (testing/tolerance.h). The fp32 gradient is within the rule's first-order
// bound of the exact one. Along any path from the inputs it passes at most N roundings (N
// from testing/model_roundings.h, as the GPU model tests count them: every sum's length
// plus a few per element-wise step, forward and backward), with intermediates no larger than
// the result's scale (weights uniform in +-0.4 (GPT) or +-0.7 (MLP), norm weights in
// 1 +- 0.3: the LayerNorms, softmax and GELU pass relative errors through about unchanged),
// so per tensor, normwise,
//   || g_fp32 - g_exact ||_2 <= straight_line_bound(N, || g ||_2)
// (one device, not the GPU tests' 2x: 1.2e-4 relative for the GPT here, 1.2e-5 the MLP).
// The central difference adds its own: each float64 evaluation of the loss J is within
// kSafety N_forward 2^-53 |J| of exact, so a quotient with step h is within that / h per
// element, sqrt(n) x that per tensor of n; its truncation error, h^2 |J'''| / 6 ~ 1e-13,
// is far below. Measured: at most 3.2e-7 relative (GPT), 1.7e-7 (MLP). A wrong wiring is
// off by the order of the gradient itself: LN2's backward overwriting the residual
// gradient (OutputMode::kOverwrite for kAccumulate) puts 20 of the GPT's 28 tensors
// 0.59-1.13 relative off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "testing/model_roundings.h"
#include "testing/model_side.h"
#include "testing/tolerance.h"
#include "trainer/models/model.h"

namespace zdp::trainer {
namespace {

using Vec = std::vector<double>;
using Params = std::map<std::string, Vec>;  // by the engine's parameter names
using testing::ModelSide;

constexpr double kStep = 1e-6;  // central differences' step, times max(1, |theta|)
constexpr double kUnitRoundoffF64 = 0x1p-53;

// The layers in float64, rows x features row-major (trainer_layers_test's references).
Vec layernorm(const Vec& x, const Vec& w, const Vec& b, size_t rows, size_t C) {
  Vec y(x.size());
  for (size_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (size_t c = 0; c < C; ++c) mean += x[r * C + c] / static_cast<double>(C);
    for (size_t c = 0; c < C; ++c) var += std::pow(x[r * C + c] - mean, 2) / static_cast<double>(C);
    for (size_t c = 0; c < C; ++c) y[r * C + c] = (x[r * C + c] - mean) / std::sqrt(var + 1e-5) * w[c] + b[c];
  }
  return y;
}

// y = x w^T + b, w [out, in]; no bias when b is null.
Vec linear(const Vec& x, const Vec& w, const Vec* b, size_t rows, size_t in, size_t out) {
  Vec y(rows * out);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (size_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  }
  return y;
}

void gelu(Vec& v) {  // the tanh form, as the kernels
  for (double& x : v) x = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// The mean over rows of -log softmax(logits)[label].
double cross_entropy(const Vec& logits, const std::vector<int32_t>& labels, size_t V) {
  double total = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    const double* z = &logits[r * V];
    const double m = *std::max_element(z, z + V);
    double sum = 0;
    for (size_t j = 0; j < V; ++j) sum += std::exp(z[j] - m);
    total += std::log(sum) + m - z[labels[r]];
  }
  return total / static_cast<double>(labels.size());
}

// ---- The GPT: gpt.cc's header comment, written out. ----
struct GptShape {
  size_t L, C, H, V, T, B;
};

// Causal multi-head attention of qkv [n, 3C] (q | k | v, heads of C / H) into y [n, C].
Vec attention(const GptShape& s, const Vec& qkv) {
  const size_t C = s.C, hd = C / s.H;
  Vec y(s.B * s.T * C, 0.0);
  for (size_t b = 0; b < s.B; ++b) {
    for (size_t h = 0; h < s.H; ++h) {
      auto at = [&](size_t t, size_t part, size_t k) { return qkv[(b * s.T + t) * 3 * C + part * C + h * hd + k]; };
      for (size_t i = 0; i < s.T; ++i) {
        Vec score(i + 1);
        for (size_t j = 0; j <= i; ++j) {
          double d = 0;
          for (size_t k = 0; k < hd; ++k) d += at(i, 0, k) * at(j, 1, k);
          score[j] = d / std::sqrt(static_cast<double>(hd));
        }
        const double m = *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (double& v : score) sum += (v = std::exp(v - m));
        for (size_t j = 0; j <= i; ++j) {
          for (size_t k = 0; k < hd; ++k) y[(b * s.T + i) * C + h * hd + k] += score[j] / sum * at(j, 2, k);
        }
      }
    }
  }
  return y;
}

double gpt_loss(const GptShape& s, const Params& p, const Batch& batch) {
  const size_t C = s.C, n = s.B * s.T;
  const Vec& wte = p.at("wte.weight");
  const Vec& wpe = p.at("wpe.weight");
  Vec x(n * C);
  for (size_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < C; ++c) x[i * C + c] = wte[static_cast<size_t>(batch.tokens[i]) * C + c] + wpe[(i % s.T) * C + c];
  }
  for (size_t l = 0; l < s.L; ++l) {
    const std::string block = "blocks." + std::to_string(l) + ".";
    auto w = [&](const char* name) -> const Vec& { return p.at(block + name); };
    const Vec qkv = linear(layernorm(x, w("norm1.weight"), w("norm1.bias"), n, C), w("attn.qkv.weight"),
                           &w("attn.qkv.bias"), n, C, 3 * C);
    const Vec a = linear(attention(s, qkv), w("attn.proj.weight"), &w("attn.proj.bias"), n, C, C);
    for (size_t i = 0; i < x.size(); ++i) x[i] += a[i];
    Vec f = linear(layernorm(x, w("norm2.weight"), w("norm2.bias"), n, C), w("mlp.fc.weight"), &w("mlp.fc.bias"), n, C, 4 * C);
    gelu(f);
    const Vec m = linear(f, w("mlp.proj.weight"), &w("mlp.proj.bias"), n, 4 * C, C);
    for (size_t i = 0; i < x.size(); ++i) x[i] += m[i];
  }
  const Vec h = layernorm(x, p.at("norm_f.weight"), p.at("norm_f.bias"), n, C);
  return cross_entropy(linear(h, wte, nullptr, n, C, s.V), batch.labels, s.V);  // the head tied to wte
}

// ---- The MLP: mlp.cc's header comment, written out. ----
double mlp_loss(const ModelConfig& m, const Params& p, const Batch& batch) {
  const size_t W = static_cast<size_t>(m.d_model), O = static_cast<size_t>(m.vocab_size);
  const size_t rows = static_cast<size_t>(batch.count), depth = static_cast<size_t>(m.n_layers);
  Vec a(batch.features.begin(), batch.features.end());
  for (size_t l = 0; l <= depth; ++l) {
    const std::string name = l < depth ? "fc" + std::to_string(l) : std::string("head");
    a = linear(a, p.at(name + ".weight"), &p.at(name + ".bias"), rows, W, l < depth ? W : O);
    if (l < depth) gelu(a);
  }
  if (m.task == MlpTask::kClassification) return cross_entropy(a, batch.labels, O);
  double total = 0;
  for (size_t i = 0; i < a.size(); ++i) total += 0.5 * std::pow(a[i] - batch.targets[i], 2);
  return total / static_cast<double>(rows);
}

// One model: random parameters (draw(name) gives each element of the named tensor), one
// train_micro of `batch`, then the loss against `loss_ref` and every parameter's gradient
// against central differences of it (the bound of the header).
void check_gradients(const Config& config, const Batch& batch, const std::function<float(const std::string&)>& draw,
                     const std::function<double(const Params&)>& loss_ref, testing::RoundingChain chain) {
  ModelSide side(create_cpu_device(), config);
  if (::testing::Test::HasFailure()) return;
  const std::vector<std::string> names = side.engine->param_names();
  Params p;
  std::vector<size_t> numel;
  for (size_t i = 0; i < names.size(); ++i) {
    const Param q{static_cast<int>(i)};
    std::vector<float> values = side.engine->gather_master(q).value();
    for (float& v : values) v = draw(names[i]);
    side.write(side.engine->param(q), values);
    p[names[i]] = Vec(values.begin(), values.end());
    numel.push_back(values.size());
  }
  const double loss = side.model->train_micro(*side.engine, batch).value();
  side.sync();
  const double J = loss_ref(p);
  EXPECT_TRUE(testing::within(loss, J, testing::straight_line_bound(static_cast<int>(chain.forward), J)))
      << "loss: the float64 reference is not the model's function";
  const std::vector<std::vector<float>> grads = side.gradients(numel);
  const double fd_error = testing::kSafety * static_cast<double>(chain.forward) * kUnitRoundoffF64 * std::fabs(J) / kStep;

  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < names.size(); ++i) {
    Vec& theta = p[names[i]];
    double diff2 = 0, ref2 = 0;
    for (size_t k = 0; k < theta.size(); ++k) {
      const double keep = theta[k], h = kStep * std::max(1.0, std::fabs(keep));
      theta[k] = keep + h;
      const double up = loss_ref(p);
      theta[k] = keep - h;
      const double fd = (up - loss_ref(p)) / (2 * h);
      theta[k] = keep;
      diff2 += std::pow(grads[i][k] - fd, 2);
      ref2 += fd * fd;
    }
    const double scale = std::sqrt(ref2), diff = std::sqrt(diff2);
    EXPECT_GT(scale, 0) << names[i] << ": a zero gradient checks nothing";
    const double allowed = testing::straight_line_bound(static_cast<int>(chain.total), scale) +
                           std::sqrt(static_cast<double>(theta.size())) * fd_error;
    EXPECT_TRUE(testing::within(diff, 0, allowed))
        << names[i] << " (|| g_fp32 - g_fd ||_2; || g_fd ||_2 = " << scale << ", relative " << diff / scale << ")";
    if (scale > 0 && diff / scale > worst) {
      worst = diff / scale;
      worst_name = names[i];
    }
  }
  std::printf("%zu tensors; loss fp32 %.9f float64 %.9f; largest relative gradient error %.3g (%s; allowed %.3g + fd)\n",
              names.size(), loss, J, worst, worst_name.c_str(),
              testing::straight_line_bound(static_cast<int>(chain.total), 1.0));
}

Config gpt_config(const GptShape& s) {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = static_cast<int>(s.L);
  c.model.d_model = static_cast<int>(s.C);
  c.model.n_heads = static_cast<int>(s.H);
  c.model.vocab_size = static_cast<int>(s.V);
  c.model.seq_len = static_cast<int>(s.T);
  c.model.dtype = DType::kF32;
  c.train.micro_batch = static_cast<int64_t>(s.B);
  c.train.global_batch = static_cast<int64_t>(s.B);
  c.zero.stage = 0;
  return c;
}

TEST(ModelGradcheck, EveryGptGradientMatchesCentralDifferencesOfAFloat64Gpt) {
  const GptShape s{2, 12, 3, 17, 6, 2};  // head_dim 4, vocabulary prime
  const Config c = gpt_config(s);

  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(-1, 1);
  Batch batch;
  batch.count = c.train.micro_batch;
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(s.V) - 1);
  for (size_t i = 0; i < s.B * s.T; ++i) {
    batch.tokens.push_back(token(rng));
    batch.labels.push_back(token(rng));
  }
  // Norm weights near 1, everything else (biases too) of order 1: no term of any backward 0.
  const auto draw = [&](const std::string& name) {
    const bool norm_weight = name.find("norm") != std::string::npos && name.find(".weight") != std::string::npos;
    return static_cast<float>(norm_weight ? 1 + 0.3 * u(rng) : 0.4 * u(rng));
  };
  check_gradients(c, batch, draw, [&](const Params& p) { return gpt_loss(s, p, batch); },
                  testing::gpt_rounding_chain(c.model, batch.count * c.model.seq_len));
}

// A token or target outside the vocabulary is refused on the host before any kernel runs:
// the GPU's embedding and cross-entropy index with them unchecked (out of bounds).
TEST(ModelGradcheck, AnIdOutsideTheVocabularyIsRefusedBeforeAnyKernel) {
  const GptShape s{1, 12, 3, 17, 6, 2};
  ModelSide side(create_cpu_device(), gpt_config(s));
  ASSERT_FALSE(::testing::Test::HasFailure());
  for (const bool target : {false, true}) {
    Batch batch;
    batch.count = 2;
    batch.tokens.assign(12, 3);
    batch.labels.assign(12, 4);
    (target ? batch.labels : batch.tokens)[8] = 17;
    const StatusOr<double> loss = side.model->train_micro(*side.engine, batch);
    ASSERT_FALSE(loss.ok());
    EXPECT_NE(loss.status().message().find(std::string(target ? "target" : "token") +
                                           " 17 of sample 1 (position 2) is outside [0, 17) (model.vocab_size)"),
              std::string::npos) << loss.status().to_string();
  }
}

void check_mlp(MlpTask task) {
  Config c;
  c.model.kind = ModelKind::kMlp;
  c.model.task = task;
  c.model.n_layers = 2;
  c.model.d_model = 6;
  c.model.vocab_size = 5;  // outputs (classes, or regression targets)
  c.model.dtype = DType::kF32;
  c.train.micro_batch = 4;
  c.train.global_batch = 4;
  c.zero.stage = 0;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  Batch batch;
  batch.count = c.train.micro_batch;
  for (int i = 0; i < batch.count * c.model.d_model; ++i) batch.features.push_back(static_cast<float>(u(rng)));
  for (int i = 0; i < batch.count; ++i) batch.labels.push_back(static_cast<int32_t>((3 * i + 1) % c.model.vocab_size));
  for (int i = 0; i < batch.count * c.model.vocab_size; ++i) batch.targets.push_back(static_cast<float>(u(rng)));
  check_gradients(c, batch, [&](const std::string&) { return static_cast<float>(0.7 * u(rng)); },
                  [&](const Params& p) { return mlp_loss(c.model, p, batch); }, testing::mlp_rounding_chain(c.model, batch.count));
}

TEST(ModelGradcheck, EveryMlpClassificationGradientMatchesCentralDifferences) { check_mlp(MlpTask::kClassification); }

TEST(ModelGradcheck, EveryMlpRegressionGradientMatchesCentralDifferences) { check_mlp(MlpTask::kRegression); }

// The mlp checks a batch on the host as the gpt does: more features than the batch says
// wrote past the input buffer, and a label outside the classes made the GPU's
// cross-entropy read past a row of logits.
TEST(ModelGradcheck, AnMlpBatchOfTheWrongSizeOrALabelOutsideTheClassesIsRefused) {
  Config c;
  c.model.kind = ModelKind::kMlp;
  c.model.n_layers = 1;
  c.model.d_model = 6;
  c.model.vocab_size = 5;
  c.train.micro_batch = 4;
  c.train.global_batch = 4;
  ModelSide side(create_cpu_device(), c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  Batch batch;
  batch.count = 2;
  batch.features.assign(2 * 6, 0.5f);
  batch.labels = {1, 5};
  StatusOr<double> loss = side.model->train_micro(*side.engine, batch);
  ASSERT_FALSE(loss.ok());
  EXPECT_NE(loss.status().message().find("mlp: label 5 of sample 1 is outside [0, 5) (model.vocab_size)"),
            std::string::npos) << loss.status().to_string();
  batch.labels = {1, 4};
  batch.features.assign(4 * 6, 0.5f);  // four samples' features for a batch of two
  loss = side.model->train_micro(*side.engine, batch);
  ASSERT_FALSE(loss.ok());
  EXPECT_NE(loss.status().message().find("mlp: the batch has 24 features for its 2 samples (6 each)"), std::string::npos)
      << loss.status().to_string();
}

}  // namespace
}  // namespace zdp::trainer
