// A trainer outside the zdp tree, built against the installed package (CMakeLists.txt:
// find_package(zdp); Makefile: pkg-config). A two-layer tanh MLP learns y = sin(a . x),
// data-parallel: dp-launch embed.toml starts the ranks, each trains on its own slice of
// every global batch, and zdp::Engine reduces the gradients and shards the optimizer
// ([zero] stage, [train] batch and steps, [optim] from the config). Rank 0 prints its loss;
// every rank prints a checksum of its parameter values at the end, equal on all ranks.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "zdp/context.h"
#include "zdp/engine.h"

constexpr int kIn = 8, kHidden = 32;

// Sample i of an endless data set: x uniform in [-1, 1]^kIn (a hash of i), y = sin(a . x).
float sample(int64_t i, float* x) {
  float dot = 0;
  for (int j = 0; j < kIn; ++j) {
    uint64_t h = (static_cast<uint64_t>(i) * kIn + j + 1) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    x[j] = static_cast<float>(h % 2001) / 1000.0f - 1.0f;
    dot += x[j] * (0.9f - 0.2f * j);
  }
  return std::sin(dot);
}

int main() try {
  zdp::InitOptions init;
  init.backend = zdp::Backend::kGloo;  // CPU ranks: this trainer computes on the host
  zdp::Context ctx = zdp::init(init).value();
  zdp::Engine engine(ctx, zdp::EngineOptions::from(ctx.config(), ctx.world_size()).value());
  if (engine.options().compute_dtype != zdp::DType::kF32)
    throw zdp::Error({zdp::StatusCode::kInvalidArgument, std::string("this trainer computes in fp32, not ") +
                                                             zdp::to_string(engine.options().compute_dtype) +
                                                             ": set model.dtype = \"fp32\""});
  const zdp::Param w1 = engine.add_param("fc1.weight", {kHidden, kIn}, zdp::Init::normal(0.5f), /*layer=*/0).value();
  const zdp::Param b1 = engine.add_param("fc1.bias", {kHidden}, zdp::Init::zeros(), /*layer=*/0).value();
  const zdp::Param w2 = engine.add_param("fc2.weight", {kHidden}, zdp::Init::normal(0.2f), /*layer=*/1).value();
  const zdp::Param b2 = engine.add_param("fc2.bias", {1}, zdp::Init::zeros(), /*layer=*/1).value();
  engine.finalize().throw_if_error();  // same parameters on every rank, broadcast from rank 0

  const int64_t mb = ctx.config().train.micro_batch, steps = ctx.config().train.steps;
  std::vector<float> x(mb * kIn), y(mb), h(mb * kHidden), dh(mb * kHidden);
  for (int64_t step = 0; step < steps; ++step) {
    double loss = 0;  // this rank's mean over its micro-batches
    for (int64_t micro = 0; micro < engine.accum_steps(); ++micro) {
      // This rank's micro-batch: disjoint from every other rank's and micro-batch's.
      const int64_t first = ((step * engine.accum_steps() + micro) * ctx.world_size() + ctx.rank()) * mb;
      for (int64_t s = 0; s < mb; ++s) y[s] = sample(first + s, &x[s * kIn]);
      {  // forward, layer 0 (at stage 3 the scope gathers its parameters)
        zdp::Engine::LayerScope scope = engine.layer(0).value();
        const float *W1 = engine.param_as<float>(w1), *B1 = engine.param_as<float>(b1);
        for (int64_t s = 0; s < mb; ++s)
          for (int k = 0; k < kHidden; ++k) {
            float a = B1[k];
            for (int j = 0; j < kIn; ++j) a += W1[k * kIn + j] * x[s * kIn + j];
            h[s * kHidden + k] = std::tanh(a);
          }
      }
      {  // forward and backward, layer 1: gradients of the micro-batch's mean squared error
        zdp::Engine::LayerScope scope = engine.layer(1).value();
        const float *W2 = engine.param_as<float>(w2), *B2 = engine.param_as<float>(b2);
        float *gW2 = engine.grad_as<float>(w2), *gB2 = engine.grad_as<float>(b2);
        std::memset(gW2, 0, kHidden * sizeof(float));
        gB2[0] = 0;
        for (int64_t s = 0; s < mb; ++s) {
          float out = B2[0];
          for (int k = 0; k < kHidden; ++k) out += W2[k] * h[s * kHidden + k];
          const float e = (out - y[s]) / static_cast<float>(mb);  // d(mean 0.5 err^2)/d out
          loss += 0.5 * (out - y[s]) * (out - y[s]) / static_cast<double>(mb * engine.accum_steps());
          gB2[0] += e;
          for (int k = 0; k < kHidden; ++k) {
            gW2[k] += e * h[s * kHidden + k];
            dh[s * kHidden + k] = e * W2[k] * (1 - h[s * kHidden + k] * h[s * kHidden + k]);
          }
        }
        engine.grad_ready(w2).throw_if_error();  // last micro-batch: the bucket may start reducing
        engine.grad_ready(b2).throw_if_error();
      }
      {  // backward, layer 0
        zdp::Engine::LayerScope scope = engine.layer(0, zdp::Engine::Pass::kBackward).value();
        float *gW1 = engine.grad_as<float>(w1), *gB1 = engine.grad_as<float>(b1);
        std::memset(gW1, 0, kHidden * kIn * sizeof(float));
        std::memset(gB1, 0, kHidden * sizeof(float));
        for (int64_t s = 0; s < mb; ++s)
          for (int k = 0; k < kHidden; ++k) {
            gB1[k] += dh[s * kHidden + k];
            for (int j = 0; j < kIn; ++j) gW1[k * kIn + j] += dh[s * kHidden + k] * x[s * kIn + j];
          }
        engine.grad_ready(w1).throw_if_error();
        engine.grad_ready(b1).throw_if_error();
      }
    }
    const zdp::StepStats stats = engine.step().value();  // reduce, clip, AdamW on owned slices, all-gather
    if (ctx.rank() == 0 && (step % ctx.config().train.log_every == 0 || step + 1 == steps))
      std::printf("step %lld loss %.6f grad_norm %.4f lr %.2e\n", static_cast<long long>(step), loss, stats.grad_norm, stats.lr);
  }

  // The parameters as this rank holds them (FNV-1a of the fp32 bits): the same on every rank.
  uint64_t checksum = 14695981039346656037ull;
  for (int layer = 0; layer < 2; ++layer) {
    zdp::Engine::LayerScope scope = engine.layer(layer).value();
    const std::pair<zdp::Param, int64_t> params[2][2] = {{{w1, kHidden * kIn}, {b1, kHidden}}, {{w2, kHidden}, {b2, 1}}};
    for (const auto& [p, n] : params[layer])
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits;
        std::memcpy(&bits, engine.param_as<float>(p) + i, sizeof(bits));
        checksum = (checksum ^ bits) * 1099511628211ull;
      }
  }
  std::printf("rank %d/%d done: %lld steps, parameter checksum %016llx\n", ctx.rank(), ctx.world_size(),
              static_cast<long long>(steps), static_cast<unsigned long long>(checksum));
  return 0;
} catch (const zdp::Error& e) {  // a Status turned into an exception by .value() / throw_if_error()
  std::fprintf(stderr, "embed: %s\n", e.what());
  return 1;
}
