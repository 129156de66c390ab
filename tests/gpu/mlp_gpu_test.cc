// The dp-train MLP (trainer/models/mlp.cc) on CUDA against the same model on the CPU, as
// gpt_gpu_test does for the GPT: one engine per device (a world of 1, stage 0, fp32 -- the
// MLP's only dtype), the same parameters and micro-batch, for both of its tasks
// (classification: cross-entropy; regression: squared error). Its GPU path is its own: the
// bias epilogue of its linear layers, GELU and GELU's backward in place, the two losses.
// Skips without a GPU.
//
// The bound (testing/tolerance.h), as gpt_gpu_test's: both devices run the same operations
// in fp32, differing in summation order (and the cross-entropy's exponentials on the GPU's
// special-function unit), so each result is within straight_line_bound(N, |y|) of the exact
// value on each device, N the roundings along the longest path from the inputs (every
// sum's length plus kPerStep per element-wise step), and the devices differ by at most twice
// that, normwise per gradient tensor. A wrong index, bias or scale is off by the order of
// the values themselves.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "testing/device_arrays.h"
#include "testing/model_roundings.h"
#include "testing/model_side.h"
#include "testing/test_cuda_device.h"
#include "testing/tolerance.h"

namespace zdp::trainer {
namespace {

using testing::ModelSide;

Config mlp_config(MlpTask task) {
  Config c;
  c.model.kind = ModelKind::kMlp;
  c.model.task = task;
  c.model.n_layers = 3;
  c.model.d_model = 40;     // no dimension a multiple of a warp: tails everywhere
  c.model.vocab_size = 13;  // outputs (classes, or regression targets)
  c.model.dtype = DType::kF32;
  c.train.micro_batch = 7;
  c.train.global_batch = 7;
  c.zero.stage = 0;
  return c;
}

void compare_with_cpu(const Config& config) {
  ModelSide cpu(create_cpu_device(), config);
  ModelSide gpu(testing::test_cuda_device().value(), config);
  ASSERT_TRUE(gpu.ctx.device().kind() == DeviceKind::kCuda);
  // The same parameters on both: the CPU engine's initialisation, biases moved off 0 so
  // that the bias epilogue and its gradient carry values.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<size_t> numel;
  testing::share_parameters(cpu, gpu, [&](const std::string& name, std::vector<float>& values) {
    if (name.find(".bias") == std::string::npos) return;
    for (float& v : values) v = 0.1f * u(rng);
  }, &numel);
  if (::testing::Test::HasFatalFailure()) return;
  const ModelConfig& m = config.model;
  Batch batch;
  batch.count = config.train.micro_batch;
  std::uniform_int_distribution<int32_t> label(0, static_cast<int32_t>(m.vocab_size) - 1);
  for (int64_t s = 0; s < batch.count; ++s) {
    for (int j = 0; j < m.d_model; ++j) batch.features.push_back(u(rng));
    if (m.task == MlpTask::kClassification) batch.labels.push_back(label(rng));
    else for (int k = 0; k < m.vocab_size; ++k) batch.targets.push_back(u(rng));
  }
  const double loss_cpu = cpu.model->train_micro(*cpu.engine, batch).value();
  const double loss_gpu = gpu.model->train_micro(*gpu.engine, batch).value();
  cpu.sync();
  gpu.sync();

  const auto [forward, total] = testing::mlp_rounding_chain(m, batch.count);
  EXPECT_TRUE(testing::within(loss_gpu, loss_cpu, 2 * testing::straight_line_bound(static_cast<int>(forward), loss_cpu)))
      << "loss";
  const double worst = testing::expect_gradients_within_rounding_bound(cpu.engine->param_names(), gpu.gradients(numel),
                                                                      cpu.gradients(numel), static_cast<int>(total));
  std::printf("%s: loss cpu %.9f gpu %.9f; largest relative gradient difference %.3g (allowed %.3g)\n", to_string(m.task),
              loss_cpu, loss_gpu, worst, 2 * testing::straight_line_bound(static_cast<int>(total), 1.0));
}

TEST(MlpGpu, ClassificationMatchesTheCpuWithinTheRoundingBound) {
  ZDP_SKIP_WITHOUT_GPU();
  compare_with_cpu(mlp_config(MlpTask::kClassification));
}

TEST(MlpGpu, RegressionMatchesTheCpuWithinTheRoundingBound) {
  ZDP_SKIP_WITHOUT_GPU();
  compare_with_cpu(mlp_config(MlpTask::kRegression));
}

}  // namespace
}  // namespace zdp::trainer
