// The --calibrate measurements (see plan_calibrate.h).
#include "launcher/plan_calibrate.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <vector>

#include "kernels/gemm.h"
#include "zdp/comm.h"
#include "zdp/device.h"
#include "zdp/store.h"

namespace zdp::launcher {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Best-of GEMM rate: Y[rows, out] = X[rows, in] W^T, as a linear layer runs it.
StatusOr<double> time_gemm(const CalibrateOptions& o) {
  kernels::set_cpu_gemm_threads(o.threads);
  std::unique_ptr<kernels::Gemm> gemm = kernels::make_cpu_gemm();
  std::vector<float> x(static_cast<size_t>(o.rows * o.in), 0.5f), w(static_cast<size_t>(o.out * o.in), 0.25f),
      y(static_cast<size_t>(o.rows * o.out));
  kernels::GemmArgs g;
  g.transa = kernels::Transpose::kYes;  // column-major: C[out, rows] = W^T[out, in] X[in, rows]
  g.m = o.out;
  g.n = o.rows;
  g.k = o.in;
  g.a = w.data();
  g.lda = o.in;
  g.b = x.data();
  g.ldb = o.in;
  g.c = y.data();
  g.ldc = o.out;
  double best = 1e30;
  for (int i = 0; i < 6; ++i) {  // the first warms up
    const auto t = Clock::now();
    ZDP_RETURN_IF_ERROR(gemm->run(g, nullptr).with_context("calibration GEMM"));
    if (i > 0) best = std::min(best, since(t));
  }
  return 2.0 * static_cast<double>(o.rows * o.in * o.out) / best;
}

// One rank of the 2-rank all-reduce: median seconds at each size.
StatusOr<std::pair<double, double>> all_reduce_rank(Store& store, int rank, const CalibrateOptions& o) {
  std::unique_ptr<Device> device = create_cpu_device();
  CommOptions co;
  co.timeout = std::chrono::seconds(20);
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, create_gloo_communicator(store, rank, 2, *device, co));
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->create_stream("calibration"));
  std::vector<float> buffer(static_cast<size_t>(o.large_bytes / 4), 1.0f);
  double result[2] = {0, 0};
  const int64_t sizes[2] = {o.small_bytes, o.large_bytes};
  for (int s = 0; s < 2; ++s) {
    std::vector<double> times;
    for (int i = 0; i < 12; ++i) {
      ZDP_RETURN_IF_ERROR(comm->barrier(*stream));
      ZDP_RETURN_IF_ERROR(stream->synchronize(co.timeout));
      const auto t = Clock::now();
      ZDP_RETURN_IF_ERROR(comm->all_reduce(buffer.data(), buffer.data(), sizes[s] / 4, DType::kF32, ReduceOp::kSum, *stream));
      ZDP_RETURN_IF_ERROR(stream->synchronize(co.timeout));
      if (i >= 2) times.push_back(since(t));
    }
    result[s] = median(times);
  }
  return std::make_pair(result[0], result[1]);
}

}  // namespace

StatusOr<Calibration> calibrate(const CalibrateOptions& o) {
  const auto start = Clock::now();
  Calibration c;
  ZDP_ASSIGN_OR_RETURN(c.flops_per_s, time_gemm(o));
  c.gemm = "sgemm " + std::to_string(o.rows) + " x " + std::to_string(o.in) + " x " + std::to_string(o.out) + ", " +
           std::to_string(o.threads) + (o.threads == 1 ? " thread" : " threads");

  InMemoryStore store;
  auto peer = std::async(std::launch::async, [&] { return all_reduce_rank(store, 1, o); });
  StatusOr<std::pair<double, double>> mine = all_reduce_rank(store, 0, o);
  StatusOr<std::pair<double, double>> theirs = peer.get();
  if (!mine.ok()) return mine.status().with_context("calibration all-reduce, rank 0");
  if (!theirs.ok()) return theirs.status().with_context("calibration all-reduce, rank 1");
  c.small_s = std::max(mine->first, theirs->first);
  c.large_s = std::max(mine->second, theirs->second);
  // Ring all-reduce on K = 2: 2 steps of n / 2 bytes, t(n) = 2 alpha + n / beta.
  const double dn = static_cast<double>(o.large_bytes - o.small_bytes);
  const double slope = (c.large_s - c.small_s) / dn;  // 1 / beta
  c.link.beta_bytes_per_s = slope > 0 ? 1.0 / slope : 1e12;
  c.link.alpha_s = std::max(0.0, (c.small_s - static_cast<double>(o.small_bytes) * slope) / 2.0);
  c.link.origin = "calibrated (2-rank Gloo all-reduce over loopback)";
  c.seconds = since(start);
  return c;
}

}  // namespace zdp::launcher
