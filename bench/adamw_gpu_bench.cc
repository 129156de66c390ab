// GPU optimizer-step benchmark, side by side in one run: the fused AdamW kernel against
// cudaMemcpy device-to-device of the same bytes; plus stochastic rounding, an fp32
// gradient, a weight-decay table, the gradient check and a cast, each against the copy's
// bandwidth.
//
//   adamw_gpu_bench [--params 256M] [--iters 10] [--rounds 5]
//
// Byte accounting as in bench/adamw_bench.cc: 28 B/param for a bf16 gradient and bf16
// output (30 B with an fp32 gradient); the copy moves 14 B/param (14 read + 14 written).
// Times come from CUDA events around --iters back-to-back launches; each round runs every
// variant in turn and each keeps its best round. "ms / 1e9 params" scales the step time
// of this many parameters to a billion (the target: ~6 ms on an H200).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_check.h"
#include "bench/gpu_timing.h"
#include "bench/size_arg.h"
#include "kernels/adamw.h"
#include "kernels/cast.h"
#include "kernels/grad_check.h"

namespace {

using zdp::DType;
using zdp::kernels::Bf16;

#define CHECK_CUDA(call) ZDP_BENCH_CHECK_CUDA("adamw_gpu_bench", call)

void check(const zdp::Status& st) {
  if (!st.ok()) {
    std::fprintf(stderr, "adamw_gpu_bench: %s\n", st.to_string().c_str());
    std::exit(1);
  }
}

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, bytes));
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = int64_t{256} << 20;
  int iters = 10, rounds = 5;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {  // a flag without its value (or --help) is not ignored
      std::fprintf(stderr, "adamw_gpu_bench: %s needs a value\n", argv[i]);
      return 2;
    }
    const std::string flag = argv[i];
    if (flag == "--params") n = zdp::bench::parse_binary_size(argv[i + 1]);
    else if (flag == "--iters") iters = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: adamw_gpu_bench [--params 256M] [--iters 10] [--rounds 5]\n");
      return 2;
    }
  }
  if (n < 1) {
    std::fprintf(stderr, "adamw_gpu_bench: --params must be a positive count such as 32M\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("adamw_gpu_bench: %s, %lld params, %d launches per timing, best of %d\n", prop.name,
              static_cast<long long>(n), iters, rounds);

  const size_t un = static_cast<size_t>(n);
  float* master = static_cast<float*>(device_alloc(un * 4));
  float* m = static_cast<float*>(device_alloc(un * 4));
  float* v = static_cast<float*>(device_alloc(un * 4));
  float* grad32 = static_cast<float*>(device_alloc(un * 4));
  Bf16* grad = static_cast<Bf16*>(device_alloc(un * 2));
  Bf16* out = static_cast<Bf16*>(device_alloc(un * 2));
  void* copy_src = device_alloc(un * 14);
  void* copy_dst = device_alloc(un * 14);
  const int64_t ws_bytes = zdp::kernels::grad_check_workspace_bytes(n);
  void* ws = device_alloc(static_cast<size_t>(ws_bytes));
  zdp::kernels::GradStats* stats = static_cast<zdp::kernels::GradStats*>(device_alloc(sizeof(zdp::kernels::GradStats)));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // Real-looking data: a random tile replicated over each buffer (no all-zero pages).
  {
    const size_t tile = 1 << 20;
    std::vector<float> host(tile);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& x : host) x = u(rng);
    for (size_t at = 0; at < un; at += tile) {
      const size_t len = std::min(tile, un - at);
      CHECK_CUDA(cudaMemcpy(master + at, host.data(), len * 4, cudaMemcpyHostToDevice));
      CHECK_CUDA(cudaMemcpy(grad32 + at, host.data(), len * 4, cudaMemcpyHostToDevice));
    }
    CHECK_CUDA(cudaMemset(m, 0, un * 4));
    CHECK_CUDA(cudaMemset(v, 0, un * 4));
    CHECK_CUDA(cudaMemset(copy_src, 1, un * 14));
    zdp::kernels::CastArgs c;
    c.src = grad32, c.src_dtype = DType::kF32, c.dst = grad, c.dst_dtype = DType::kBF16, c.count = n;
    check(zdp::kernels::cast_cuda(c, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }

  // A decay table like a model's biases and norms: 256 no-decay runs spread over the buffer.
  std::vector<zdp::kernels::DecaySegment> host_segments;
  for (int64_t i = 0; i < 256; ++i) host_segments.push_back({i * (n / 256), i * (n / 256) + 1024, 0.0f});
  auto* segments = static_cast<zdp::kernels::DecaySegment*>(device_alloc(host_segments.size() * sizeof(host_segments[0])));
  CHECK_CUDA(cudaMemcpy(segments, host_segments.data(), host_segments.size() * sizeof(host_segments[0]),
                        cudaMemcpyHostToDevice));

  zdp::kernels::AdamWArgs a;
  a.count = n, a.master = master, a.m = m, a.v = v, a.grad = grad, a.grad_dtype = DType::kBF16;
  a.param_out = out, a.param_dtype = DType::kBF16, a.lr = 1e-4f, a.weight_decay = 0.1f, a.grad_scale = 0.5f;
  int64_t step = 1;
  auto adamw = [&](DType grad_dtype, zdp::kernels::Rounding r, bool with_segments = false) {
    zdp::kernels::AdamWArgs x = a;
    if (with_segments) {
      x.segments = segments;
      x.num_segments = static_cast<int64_t>(host_segments.size());
    }
    x.grad = grad_dtype == DType::kF32 ? static_cast<const void*>(grad32) : static_cast<const void*>(grad);
    x.grad_dtype = grad_dtype;
    x.rounding = r;
    x.step = step++;
    check(zdp::kernels::adamw_update_cuda(x, stream));
  };

  struct Row {
    const char* name;
    std::function<void()> fn;
    double bytes_per_param;
    double best = 1e30;  // seconds per launch
  };
  std::vector<Row> rows = {
      {"cudaMemcpy D2D (14 B/param copied)",
       [&] { CHECK_CUDA(cudaMemcpyAsync(copy_dst, copy_src, un * 14, cudaMemcpyDeviceToDevice, stream)); }, 28.0},
      {"fused AdamW bf16 grad, bf16 out", [&] { adamw(DType::kBF16, zdp::kernels::Rounding::kNearest); }, 28.0},
      {"fused AdamW, stochastic rounding", [&] { adamw(DType::kBF16, zdp::kernels::Rounding::kStochastic); }, 28.0},
      {"fused AdamW fp32 grad, bf16 out", [&] { adamw(DType::kF32, zdp::kernels::Rounding::kNearest); }, 30.0},
      {"fused AdamW, 256-segment decay table", [&] { adamw(DType::kBF16, zdp::kernels::Rounding::kNearest, true); },
       28.0},
      {"grad check bf16 (2 B/param)",
       [&] {
         zdp::kernels::GradCheckArgs g;
         g.grad = grad, g.dtype = DType::kBF16, g.count = n, g.out = stats;
         check(zdp::kernels::grad_check_cuda(g, ws, ws_bytes, stream));
       },
       2.0},
      {"cast fp32 -> bf16 (6 B/param)",
       [&] {
         zdp::kernels::CastArgs c;
         c.src = master, c.src_dtype = DType::kF32, c.dst = out, c.dst_dtype = DType::kBF16, c.count = n;
         check(zdp::kernels::cast_cuda(c, stream));
       },
       6.0},
  };
  std::vector<std::function<void()>> bodies;
  for (const Row& r : rows) bodies.push_back(r.fn);
  const std::vector<double> best =
      zdp::bench::best_seconds_per_call("adamw_gpu_bench", bodies, iters, rounds, stream, /*warmups=*/2);
  for (size_t i = 0; i < rows.size(); ++i) rows[i].best = best[i];
  const double copy_s = rows[0].best, copy_gbs = 28.0 * n / copy_s / 1e9;
  std::printf("\n%-38s %9s %9s %10s %16s\n", "variant", "time ms", "GB/s", "vs memcpy", "ms / 1e9 params");
  for (const Row& r : rows) {
    const double gbs = r.bytes_per_param * n / r.best / 1e9;
    const double ratio = r.bytes_per_param == 28.0 ? copy_s / r.best : gbs / copy_gbs;
    std::printf("%-38s %9.3f %9.1f %9.2fx %16.2f\n", r.name, r.best * 1e3, gbs, ratio, r.best * 1e3 * 1e9 / n);
  }
  std::printf("\nsummary: gpu fused AdamW = %.2fx cudaMemcpy D2D (target >= 0.90), %.2f ms per 1e9 params, %.0f GB/s\n",
              copy_s / rows[1].best, rows[1].best * 1e3 * 1e9 / n, 28.0 * n / rows[1].best / 1e9);
  return 0;
}
