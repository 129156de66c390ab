// One device's model, for the tests that run a trainer model on the GPU against the same
// model on the CPU (tests/gpu/gpt_gpu_test.cc, mlp_gpu_test.cc): a world of 1 on the device,
// an engine whose reductions wait for step() (so grad(p) keeps what the model wrote), the
// model's Ops (the config's dtype and attention) and the model (trainer/models' make_model),
// with reads and writes of its parameter and gradient views as floats; and the comparison
// both tests make.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "testing/tolerance.h"
#include "trainer/models/model.h"
#include "zdp/comm.h"
#include "zdp/context.h"
#include "zdp/engine.h"
#include "zdp/store.h"

namespace zdp::testing {

// A 16-bit value of `dtype` (bf16 or fp16) and fp32.
inline float half_to_f32(DType dtype, uint16_t h) {
  return dtype == DType::kF16 ? kernels::f16_to_f32(h) : kernels::bf16_to_f32(h);
}
inline uint16_t f32_to_half(DType dtype, float v) {
  return dtype == DType::kF16 ? kernels::f32_to_f16(v) : kernels::f32_to_bf16(v);
}

struct ModelSide {
  ModelSide(std::unique_ptr<Device> device, const Config& config) : ctx(single_rank(std::move(device), config)) {
    EngineOptions o = EngineOptions::from(config, 1).value();
    o.zero.overlap = false;  // no reduction before step(): grad(p) keeps what the model wrote
    engine = std::make_unique<Engine>(ctx, o);
    ops = trainer::Ops::create(ctx.device(), config.model.dtype, false, config.model.attention).value();
    model = trainer::make_model(config, *ops).value();
    Status s = model->register_params(*engine);
    if (s.ok()) s = engine->finalize();
    EXPECT_TRUE(s.ok()) << s.to_string();
    ops->set_stream(engine->compute_stream());
  }
  void sync() {
    const Status s = engine->compute_stream().synchronize(std::chrono::seconds(60));
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  // n values of the compute dtype at `view`, as floats.
  std::vector<float> read(void* view, size_t n) {
    std::vector<float> out(n);
    if (ops->dtype() == DType::kF32) {
      EXPECT_TRUE(ctx.device().memcpy(out.data(), view, n * sizeof(float)).ok());
      return out;
    }
    std::vector<uint16_t> bits(n);
    EXPECT_TRUE(ctx.device().memcpy(bits.data(), view, n * 2).ok());
    for (size_t i = 0; i < n; ++i) out[i] = half_to_f32(ops->dtype(), bits[i]);
    return out;
  }
  // Writes `values` (already representable in the compute dtype) to `view`.
  void write(void* view, const std::vector<float>& values) {
    if (ops->dtype() == DType::kF32) {
      EXPECT_TRUE(ctx.device().memcpy(view, values.data(), values.size() * 4).ok());
      return;
    }
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = f32_to_half(ops->dtype(), values[i]);
    EXPECT_TRUE(ctx.device().memcpy(view, bits.data(), bits.size() * 2).ok());
  }

  // Every parameter's gradient as floats, divided by the engine's loss scale (fp16: the
  // gradients of the loss times it; 1 otherwise).
  // `numel`: each parameter's element count (share_parameters gives them).
  std::vector<std::vector<float>> gradients(const std::vector<size_t>& numel) {
    const float unscale = static_cast<float>(1.0 / engine->loss_scale());
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < numel.size(); ++i) {
      out.push_back(read(engine->grad(Param{static_cast<int>(i)}), numel[i]));
      for (float& g : out.back()) g *= unscale;
    }
    return out;
  }

  // A world of 1 on `device`: Gloo over an in-memory store (never used at stage 0 without
  // a step, but the engine needs a communicator).
  static Context single_rank(std::unique_ptr<Device> device, const Config& config) {
    auto store = std::make_unique<InMemoryStore>();
    CommOptions options;
    options.timeout = std::chrono::seconds(60);
    std::unique_ptr<Communicator> comm = create_gloo_communicator(*store, 0, 1, *device, options).value();
    LaunchEnv env;
    env.origin = "model_side";
    return Context::assemble(env, config, std::move(store), std::move(device), std::move(comm), options.timeout);
  }

  Context ctx;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<trainer::Ops> ops;
  std::unique_ptr<trainer::Model> model;
};

inline double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}
// || a - b ||_2 / || b ||_2
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> diff(a.size());
  for (size_t j = 0; j < diff.size(); ++j) diff[j] = a[j] - b[j];
  return norm(diff) / norm(b);
}

// The same parameters on both sides: `from`'s initialisation, each tensor passed through
// `adjust(name, values)` first (values written as each side's dtype takes them); each
// parameter's element count into `numel`. Fails the test when the two models' parameters
// differ by name.
inline void share_parameters(ModelSide& from, ModelSide& to,
                             const std::function<void(const std::string&, std::vector<float>&)>& adjust,
                             std::vector<size_t>* numel) {
  const std::vector<std::string> names = from.engine->param_names();
  ASSERT_EQ(names, to.engine->param_names());
  for (size_t i = 0; i < names.size(); ++i) {
    const Param p{static_cast<int>(i)};
    std::vector<float> values = from.engine->gather_master(p).value();
    adjust(names[i], values);
    numel->push_back(values.size());
    from.write(from.engine->param(p), values);
    to.write(to.engine->param(p), values);
    ASSERT_FALSE(::testing::Test::HasFailure()) << names[i];
  }
}

// Each of the GPU's gradients within twice the straight-line bound of `roundings` of the
// CPU's, normwise (testing/tolerance.h; gpt_gpu_test's header explains the bound); a zero
// CPU gradient fails (it checks nothing). Returns the largest relative difference.
inline double expect_gradients_within_rounding_bound(const std::vector<std::string>& names,
                                                     const std::vector<std::vector<float>>& gpu,
                                                     const std::vector<std::vector<float>>& cpu, int roundings) {
  double worst = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const double scale = norm(cpu[i]);
    EXPECT_GT(scale, 0) << names[i] << ": a zero gradient checks nothing";
    const double diff = relative_difference(gpu[i], cpu[i]) * scale;
    EXPECT_TRUE(within(diff, 0, 2 * straight_line_bound(roundings, scale)))
        << names[i] << " (|| g_gpu - g_cpu ||_2; || g_cpu ||_2 = " << scale << ")";
    if (scale > 0) worst = std::max(worst, diff / scale);
  }
  return worst;
}

}  // namespace zdp::testing
