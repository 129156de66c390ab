// The engine tests' model: a 3-layer tanh MLP (8 -> 24 -> 24 -> 4, 916 parameters, one
// layer group per layer) with a mean-squared-error loss, written with plain loops in fp32
// over parameter views of any compute dtype, on deterministic synthetic data where
// sample i of step s is a pure function of (s, i): any split of a step's global batch
// over ranks and micro-batches sees the same samples. On a CUDA engine the views are
// device memory: they are read and written through the compute stream (the host waits
// for each copy: a test model, the same host arithmetic on every device).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/common.h"
#include "zdp/device.h"
#include "zdp/engine.h"

namespace zdp::testing {

class TinyMlp {
 public:
  static constexpr int kLayers = 3;
  static constexpr int kIn[kLayers] = {8, 24, 24};
  static constexpr int kOut[kLayers] = {24, 24, 4};

  // Registers fc{l}.weight [out, in] and fc{l}.bias [out] in layer group l.
  static StatusOr<TinyMlp> create(Engine& engine) {
    TinyMlp m;
    for (int l = 0; l < kLayers; ++l) {
      const std::string name = "fc" + std::to_string(l);
      const float std = 1.0f / std::sqrt(static_cast<float>(kIn[l]));
      ZDP_ASSIGN_OR_RETURN(m.w_[l], engine.add_param(name + ".weight", {kOut[l], kIn[l]}, Init::normal(std), l));
      ZDP_ASSIGN_OR_RETURN(m.b_[l], engine.add_param(name + ".bias", {kOut[l]}, Init::uniform(-0.1f, 0.1f), l));
    }
    return m;
  }

  // What one micro-batch may do besides training (fault injection, timing).
  struct Hooks {
    float poison = 0.0f;    // when not 0: written into element 0 of fc2.weight's gradient
    int backward_sleep_ms = 0;  // per layer of backward: a slower backward, for overlap
  };

  // Forward and backward over `count` samples starting at global sample `first` of step
  // `step`, writing the gradient of the micro-batch's mean loss (times the loss scale)
  // and marking each parameter ready. Returns the mean loss.
  template <typename T>
  StatusOr<double> train_micro(Engine& engine, int64_t step, int64_t first, int64_t count, const Hooks& hooks = {}) {
    std::vector<std::vector<float>> acts(kLayers + 1);  // acts[l]: input of layer l, count x kIn[l]
    acts[0].resize(static_cast<size_t>(count * kIn[0]));
    for (int64_t s = 0; s < count; ++s) {
      for (int j = 0; j < kIn[0]; ++j) acts[0][static_cast<size_t>(s * kIn[0] + j)] = input(step, first + s, j);
    }
    for (int l = 0; l < kLayers; ++l) {
      ZDP_ASSIGN_OR_RETURN(Engine::LayerScope scope, engine.layer(l, Engine::Pass::kForward));
      std::vector<float> w, b;
      ZDP_RETURN_IF_ERROR(read(engine, w_[l], kOut[l] * kIn[l], w));
      ZDP_RETURN_IF_ERROR(read(engine, b_[l], kOut[l], b));
      acts[l + 1].assign(static_cast<size_t>(count * kOut[l]), 0.0f);
      for (int64_t s = 0; s < count; ++s) {
        for (int o = 0; o < kOut[l]; ++o) {
          float z = b[static_cast<size_t>(o)];
          for (int i = 0; i < kIn[l]; ++i) {
            z += w[static_cast<size_t>(o * kIn[l] + i)] * acts[l][static_cast<size_t>(s * kIn[l] + i)];
          }
          acts[l + 1][static_cast<size_t>(s * kOut[l] + o)] = l + 1 < kLayers ? std::tanh(z) : z;
        }
      }
    }
    // Loss 0.5 * |y - target|^2, averaged over the micro-batch.
    double loss = 0.0;
    const int out = kOut[kLayers - 1];
    const float scale = static_cast<float>(engine.loss_scale());
    std::vector<float> delta(static_cast<size_t>(count * out));
    for (int64_t s = 0; s < count; ++s) {
      for (int k = 0; k < out; ++k) {
        const float e = acts[kLayers][static_cast<size_t>(s * out + k)] - target(step, first + s, k);
        loss += 0.5 * e * e;
        delta[static_cast<size_t>(s * out + k)] = e * scale / static_cast<float>(count);
      }
    }
    for (int l = kLayers - 1; l >= 0; --l) {
      ZDP_ASSIGN_OR_RETURN(Engine::LayerScope scope, engine.layer(l, Engine::Pass::kBackward));
      if (hooks.backward_sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hooks.backward_sleep_ms));
      std::vector<float> w;
      ZDP_RETURN_IF_ERROR(read(engine, w_[l], kOut[l] * kIn[l], w));
      std::vector<float> gw(static_cast<size_t>(kOut[l] * kIn[l]), 0.0f), gb(static_cast<size_t>(kOut[l]), 0.0f);
      std::vector<float> back(static_cast<size_t>(count * kIn[l]), 0.0f);
      for (int64_t s = 0; s < count; ++s) {
        for (int o = 0; o < kOut[l]; ++o) {
          const float d = delta[static_cast<size_t>(s * kOut[l] + o)];
          gb[static_cast<size_t>(o)] += d;
          for (int i = 0; i < kIn[l]; ++i) {
            gw[static_cast<size_t>(o * kIn[l] + i)] += d * acts[l][static_cast<size_t>(s * kIn[l] + i)];
            back[static_cast<size_t>(s * kIn[l] + i)] += w[static_cast<size_t>(o * kIn[l] + i)] * d;
          }
        }
      }
      if (l == kLayers - 1 && hooks.poison != 0.0f) gw[0] = hooks.poison;
      ZDP_RETURN_IF_ERROR(write<T>(engine, w_[l], gw));
      ZDP_RETURN_IF_ERROR(write<T>(engine, b_[l], gb));
      ZDP_RETURN_IF_ERROR(engine.grad_ready(w_[l]));
      ZDP_RETURN_IF_ERROR(engine.grad_ready(b_[l]));
      if (l > 0) {  // through tanh: d/dz tanh = 1 - a^2
        delta.resize(back.size());
        for (size_t k = 0; k < back.size(); ++k) delta[k] = back[k] * (1.0f - acts[l][k] * acts[l][k]);
      }
    }
    return loss / static_cast<double>(count);
  }

  Param weight(int l) const { return w_[l]; }
  Param bias(int l) const { return b_[l]; }

  // Deterministic data: a hash of (step, sample, feature) mapped to [-1, 1).
  static float input(int64_t step, int64_t sample, int j) {
    uint64_t x = static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(sample) * 0xBF58476D1CE4E5B9ull +
                 static_cast<uint64_t>(j) * 0x94D049BB133111EBull + 1;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 29;
    return static_cast<float>(static_cast<double>(x >> 11) * 0x1p-52 - 1.0);
  }
  // A smooth teacher the MLP can fit.
  static float target(int64_t step, int64_t sample, int k) {
    float s = 0.0f;
    for (int j = 0; j < kIn[0]; ++j) s += input(step, sample, j) * static_cast<float>((j + k) % 3 - 1);
    return std::sin(s);
  }

 private:
  static bool on_gpu(Engine& engine) { return engine.compute_stream().device().kind() == DeviceKind::kCuda; }
  // Copies through the compute stream and waits: the view is device memory.
  static Status copy(Engine& engine, void* dst, const void* src, size_t bytes) {
    Stream& s = engine.compute_stream();
    ZDP_RETURN_IF_ERROR(s.memcpy_async(dst, src, bytes));
    return s.synchronize(std::chrono::seconds(120));
  }

  // Parameter p in fp32, whatever the compute dtype.
  static Status read(Engine& engine, Param p, int64_t n, std::vector<float>& out) {
    const void* src = engine.param(p);
    if (src == nullptr) return engine.error();
    out.resize(static_cast<size_t>(n));
    return kernels::dispatch_float(engine.options().compute_dtype, "tiny_mlp", [&](auto t) {
      using T = decltype(t);
      const T* values = static_cast<const T*>(src);
      std::vector<T> host;
      if (on_gpu(engine)) {
        host.resize(static_cast<size_t>(n));
        ZDP_RETURN_IF_ERROR(copy(engine, host.data(), src, host.size() * sizeof(T)));
        values = host.data();
      }
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = kernels::to_f32(values[i]);
      return Status::Ok();
    });
  }
  template <typename T>
  static Status write(Engine& engine, Param p, const std::vector<float>& g) {
    T* dst = engine.grad_as<T>(p);
    if (dst == nullptr) return engine.error();
    if (on_gpu(engine)) {
      std::vector<T> host(g.size());
      for (size_t i = 0; i < g.size(); ++i) host[i] = kernels::from_f32<T>(g[i]);
      return copy(engine, dst, host.data(), host.size() * sizeof(T));
    }
    for (size_t i = 0; i < g.size(); ++i) dst[i] = kernels::from_f32<T>(g[i]);
    return Status::Ok();
  }

  Param w_[kLayers];
  Param b_[kLayers];
};

}  // namespace zdp::testing
