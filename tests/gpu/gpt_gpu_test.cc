// The full dp-train GPT (trainer/models/gpt.cc) on CUDA against the same model on the
// CPU: one engine per device (a world of 1, stage 0, fp32, IEEE fp32 GEMMs on both), the
// same parameters and the same micro-batch; the loss and every parameter's gradient must
// agree within the bound below. Skips without a GPU.
//
// The bound (testing/tolerance.h). Both devices run the same operations in fp32,
// differing only in summation order (cuBLASLt vs OpenBLAS, warp/block reductions vs CPU
// loops; the element-wise kernels are bit-identical, layer_kernels_gpu_test) and in the
// cross-entropy's exponentials (the GPU's special-function unit, within (2.5 + 1.25 |x|)
// ulp: the larger errors fall on the small terms, e^-t (2.5 + 1.25 t) <= 2.5), so each
// result is within the rule's first-order bound of the exact value and the two differ by
// at most twice that. A result y depends on the inputs through a chain of operations;
// along any path it passes at most N roundings, N = rounding_chain() (every sum's length
// plus a few roundings per element-wise step, forward and backward, over all layers). With
// every intermediate on the path no larger than the result's own scale, the rule gives
// straight_line_bound(N, |y|) per device. A gradient tensor is compared normwise:
//   || g_gpu - g_cpu ||_2 <= 2 x straight_line_bound(N, || g_cpu ||_2)
// (about 1e-4 relative here), and the loss, a mean of positive per-token losses,
// |L_gpu - L_cpu| <= 2 x straight_line_bound(N_forward, L). A wrong kernel, index or
// scale gives differences of the order of the values themselves; a single wrong element
// of a 10^4-element tensor is about 1e-2 of its norm.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "testing/device_arrays.h"
#include "testing/tolerance.h"
#include "trainer/models/model.h"
#include "zdp/context.h"
#include "zdp/engine.h"

namespace zdp::trainer {
namespace {

using namespace std::chrono_literals;

// Small but with no dimension a multiple of a warp: tails everywhere. Micro-batch 3 <
// heads 4: attention's GEMMs batch over the heads, one call per sample; the second test
// swaps that (micro-batch 5 > heads 2: batched over the samples, one call per head).
Config gpt_config(int64_t micro_batch = 3, int heads = 4) {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = 2;
  c.model.d_model = 48;
  c.model.n_heads = heads;  // head_dim 12 (4 heads) or 24 (2)
  c.model.vocab_size = 83;
  c.model.seq_len = 21;
  c.model.dtype = DType::kF32;
  c.train.micro_batch = micro_batch;
  c.train.global_batch = micro_batch;
  c.zero.stage = 0;
  return c;
}

// An upper bound on the fp32 roundings along any path from the inputs to a result:
// each sum of length k counts k, each element-wise step a few (kPerStep).
struct RoundingChain {
  int64_t forward = 0, total = 0;
};
RoundingChain rounding_chain(const ModelConfig& m, int64_t tokens) {
  constexpr int64_t kPerStep = 8;  // gelu, exp, rsqrt, scale, bias, residual add: < 8 each
  const int64_t C = m.d_model, T = m.seq_len, hd = m.d_model / m.n_heads, V = m.vocab_size;
  const int64_t layernorm = 2 * C + kPerStep;               // mean, variance, normalise
  const int64_t block_forward = 2 * layernorm               // two norms
                                + C + hd + T + T + C        // qkv, q k^T, softmax, p v, proj
                                + C + 4 * C                 // fc, fc proj
                                + 6 * kPerStep;             // softmax exp, gelu, biases, adds
  const int64_t forward = m.n_layers * block_forward + layernorm + C + V + kPerStep;  // + norm_f, head, loss
  const int64_t block_backward = 2 * (2 * C + kPerStep)  // norm backward: two row sums each
                                 + 4 * C + C + C + 3 * C  // dx of fc proj, fc, proj, qkv
                                 + T + T + hd + T         // softmax backward, dP, dV/dQ/dK sums
                                 + 6 * kPerStep;
  const int64_t backward = V + 2 * C + kPerStep + m.n_layers * block_backward
                           + tokens;  // a weight gradient sums over all tokens (embeddings: their occurrences)
  return {forward, forward + backward};
}

// A world of 1 on `device`: Gloo over an in-memory store (never used at stage 0 without
// a step, but the engine needs a communicator).
Context single_rank(std::unique_ptr<Device> device, const Config& config) {
  auto store = std::make_unique<InMemoryStore>();
  CommOptions options;
  options.timeout = 60s;
  std::unique_ptr<Communicator> comm = create_gloo_communicator(*store, 0, 1, *device, options).value();
  LaunchEnv env;
  env.origin = "gpt_gpu_test";
  return Context::assemble(env, config, std::move(store), std::move(device), std::move(comm), options.timeout);
}

// One device's model: engine, ops, gpt; the forward/backward of one micro-batch.
struct Side {
  Side(std::unique_ptr<Device> device, const Config& config) : ctx(single_rank(std::move(device), config)) {
    EngineOptions o = EngineOptions::from(config, 1).value();
    o.zero.overlap = false;  // no reduction before step(): grad(p) keeps what the model wrote
    engine = std::make_unique<Engine>(ctx, o);
    ops = Ops::create(ctx.device(), DType::kF32).value();
    model = make_gpt(config.model, config.train.micro_batch, ops.get()).value();
    Status s = model->register_params(*engine);
    if (s.ok()) s = engine->finalize();
    EXPECT_TRUE(s.ok()) << s.to_string();
    ops->set_stream(engine->compute_stream());
  }
  void sync() {
    const Status s = engine->compute_stream().synchronize(60s);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  std::vector<float> read(void* view, size_t n) {
    std::vector<float> out(n);
    EXPECT_TRUE(ctx.device().memcpy(out.data(), view, n * sizeof(float)).ok());
    return out;
  }

  Context ctx;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Ops> ops;
  std::unique_ptr<Model> model;
};

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

void compare_with_cpu(const Config& config) {
  Side cpu(create_cpu_device(), config);
  Side gpu(testing::test_cuda_device().value(), config);
  ASSERT_TRUE(gpu.ctx.device().kind() == DeviceKind::kCuda);

  // The same parameters on both: the CPU engine's initialisation, with norms and biases
  // moved off their 1 / 0 initial values so that every term of every backward is non-zero.
  const std::vector<std::string> names = cpu.engine->param_names();
  ASSERT_EQ(names, gpu.engine->param_names());
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<size_t> numel;
  for (size_t i = 0; i < names.size(); ++i) {
    const Param p{static_cast<int>(i)};
    std::vector<float> values = cpu.engine->gather_master(p).value();
    const bool norm_weight = names[i].find("norm") != std::string::npos && names[i].find(".weight") != std::string::npos;
    for (float& v : values) {
      if (norm_weight) v = 1 + 0.2f * u(rng);
      else if (names[i].find(".bias") != std::string::npos) v = 0.05f * u(rng);
    }
    numel.push_back(values.size());
    ASSERT_TRUE(cpu.ctx.device().memcpy(cpu.engine->param(p), values.data(), values.size() * 4).ok()) << names[i];
    ASSERT_TRUE(gpu.ctx.device().memcpy(gpu.engine->param(p), values.data(), values.size() * 4).ok()) << names[i];
  }

  Batch batch;
  batch.count = config.train.micro_batch;
  const int64_t tokens = batch.count * config.model.seq_len;
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.model.vocab_size) - 1);
  for (int64_t i = 0; i < tokens; ++i) {
    batch.tokens.push_back(token(rng));
    batch.labels.push_back(token(rng));
  }
  const double loss_cpu = cpu.model->train_micro(*cpu.engine, batch).value();
  const double loss_gpu = gpu.model->train_micro(*gpu.engine, batch).value();
  cpu.sync();
  gpu.sync();

  const RoundingChain n = rounding_chain(config.model, tokens);
  std::printf("roundings along the longest path: forward %lld, forward + backward %lld\n",
              static_cast<long long>(n.forward), static_cast<long long>(n.total));
  EXPECT_TRUE(testing::within(loss_gpu, loss_cpu, 2 * testing::straight_line_bound(static_cast<int>(n.forward), loss_cpu)))
      << "loss";
  EXPECT_GT(loss_cpu, 0.5 * std::log(static_cast<double>(config.model.vocab_size)));  // near ln V at this init

  double worst = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const Param p{static_cast<int>(i)};
    const std::vector<float> g_cpu = cpu.read(cpu.engine->grad(p), numel[i]);
    const std::vector<float> g_gpu = gpu.read(gpu.engine->grad(p), numel[i]);
    std::vector<float> diff(numel[i]);
    for (size_t j = 0; j < diff.size(); ++j) diff[j] = g_gpu[j] - g_cpu[j];
    const double scale = norm(g_cpu);
    ASSERT_GT(scale, 0) << names[i] << ": a zero gradient checks nothing";
    const double allowed = 2 * testing::straight_line_bound(static_cast<int>(n.total), scale);
    EXPECT_TRUE(testing::within(norm(diff), 0, allowed)) << names[i] << " (|| g_gpu - g_cpu ||_2; || g_cpu ||_2 = " << scale << ")";
    worst = std::max(worst, norm(diff) / scale);
  }
  std::printf("loss cpu %.9f gpu %.9f; largest relative gradient difference %.3g (allowed %.3g)\n", loss_cpu, loss_gpu,
              worst, 2 * testing::straight_line_bound(static_cast<int>(n.total), 1.0));
}

TEST(GptGpu, LossAndEveryGradientMatchTheCpuWithinTheRoundingBound) {
  ZDP_SKIP_WITHOUT_GPU();
  compare_with_cpu(gpt_config());
}

TEST(GptGpu, AttentionBatchedOverSamplesMatchesTheCpu) {
  ZDP_SKIP_WITHOUT_GPU();
  compare_with_cpu(gpt_config(5, 2));
}

}  // namespace
}  // namespace zdp::trainer
