// The CUDA launchers of kernels/ give the very bits of the CPU path (which the unit tests
// check against float64): AdamW and SGD (every dtype, the decay table, stochastic rounding,
// slices cut anywhere, misaligned pointers), the gradient check (multi-level fold) and the
// casts. Bit-exact is the rule here (testing/tolerance.h): the same ZDP_HD math, no
// FMA on either side, IEEE division and square root. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/cast.h"
#include "kernels/grad_check.h"
#include "kernels/sgd.h"
#include "testing/device_arrays.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

using zdp::testing::bitwise_equal;
using zdp::testing::DeviceArray;
using zdp::testing::GpuFixture;
using zdp::testing::raw_bits;
using zdp::testing::TestRandom;

template <typename G, typename P>
void adamw_gpu_matches_cpu(Rounding rounding, int64_t pad, std::vector<int64_t> gpu_cuts) {
  ZDP_SKIP_WITHOUT_GPU();
  GpuFixture gpu;
  ASSERT_TRUE(gpu.init());
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const int64_t n = (1 << 20) + 13, offset = 1003;  // a tail, and groups of 8 cut by the offset
  std::vector<float> master = rnd.signed_vector(n, 0.01f, 1.0f), m = rnd.signed_vector(n, 1e-4f, 1e-2f);
  std::vector<float> v = rnd.positive_vector(n, 1e-6f, 1e-3f);
  std::vector<P> out(std::is_same_v<P, NoOutput> ? 0 : n);
  const std::vector<DecaySegment> segments = {{offset + 5, offset + 9, 0.0f}, {offset + 4000, offset + 70000, 0.02f},
                                              {offset + n - 3, offset + n + 100, 0.0f}};
  DeviceArray<float> dmaster(*gpu.device, master, pad), dm(*gpu.device, m, pad), dv(*gpu.device, v, pad);
  DeviceArray<P> dout(*gpu.device, out, pad);
  DeviceArray<DecaySegment> dseg(*gpu.device, segments);
  gpu_cuts.insert(gpu_cuts.begin(), 0);
  gpu_cuts.push_back(n);
  for (int64_t step = 1; step <= 3; ++step) {
    const std::vector<G> grad = zdp::testing::encode<G>(rnd.signed_vector(n, 1e-3f, 1.0f));
    DeviceArray<G> dgrad(*gpu.device, grad, pad);
    AdamWArgs a;
    a.grad_dtype = zdp::testing::dtype_of<G>();
    a.param_dtype = zdp::testing::dtype_of<P>();
    a.rounding = rounding;
    a.seed = 77;
    a.step = step;
    a.lr = 1e-2f;
    a.weight_decay = 0.1f;
    a.grad_scale = 0.75f;
    a.num_segments = static_cast<int64_t>(segments.size());
    // CPU: the whole slice at once.
    AdamWArgs c = a;
    c.count = n, c.global_offset = offset;
    c.master = master.data(), c.m = m.data(), c.v = v.data(), c.grad = grad.data();
    c.param_out = out.empty() ? nullptr : out.data();
    c.segments = segments.data();
    ASSERT_TRUE(adamw_update_cpu(c).ok());
    // GPU: cut into slices.
    for (size_t k = 0; k + 1 < gpu_cuts.size(); ++k) {
      const int64_t b = gpu_cuts[k], e = gpu_cuts[k + 1];
      AdamWArgs g = a;
      g.count = e - b, g.global_offset = offset + b;
      g.master = dmaster.data() + b, g.m = dm.data() + b, g.v = dv.data() + b, g.grad = dgrad.data() + b;
      g.param_out = out.empty() ? nullptr : dout.data() + b;
      g.segments = dseg.data();
      const Status st = adamw_update_cuda(g, gpu.cuda_stream());
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    gpu.sync();
  }
  EXPECT_TRUE(bitwise_equal(dmaster.download(), master, "master"));
  EXPECT_TRUE(bitwise_equal(dm.download(), m, "m"));
  EXPECT_TRUE(bitwise_equal(dv.download(), v, "v"));
  if constexpr (std::is_same_v<P, float>) {
    EXPECT_TRUE(bitwise_equal(dout.download(), out, "param_out"));
  } else if constexpr (!std::is_same_v<P, NoOutput>) {
    EXPECT_TRUE(bitwise_equal(raw_bits(dout.download()), raw_bits(out), "param_out"));
  }
}

TEST(AdamWGpu, Fp32GradFp32Param) { adamw_gpu_matches_cpu<float, float>(Rounding::kNearest, 0, {}); }
TEST(AdamWGpu, Bf16GradBf16Param) { adamw_gpu_matches_cpu<Bf16, Bf16>(Rounding::kNearest, 0, {}); }
TEST(AdamWGpu, Fp16GradFp16Param) { adamw_gpu_matches_cpu<Half, Half>(Rounding::kNearest, 0, {}); }
TEST(AdamWGpu, Fp32GradNoParamOut) { adamw_gpu_matches_cpu<float, NoOutput>(Rounding::kNearest, 0, {}); }
// bf16 compute with fp32 gradients (zero.reduce_dtype fp32 at stages 2-3): only the engine
// tests reached it.
TEST(AdamWGpu, Fp32GradBf16Param) { adamw_gpu_matches_cpu<float, Bf16>(Rounding::kStochastic, 0, {8, 4103}); }
TEST(AdamWGpu, StochasticRoundingSlicesCutAnywhere) {
  adamw_gpu_matches_cpu<Bf16, Bf16>(Rounding::kStochastic, 0, {8, 4103, 500001});
}
TEST(AdamWGpu, Fp16StochasticRoundingSlicesCutAnywhere) {
  adamw_gpu_matches_cpu<Half, Half>(Rounding::kStochastic, 0, {8, 4103, 500001});
}
TEST(AdamWGpu, MisalignedPointersTakeTheScalarPath) {
  adamw_gpu_matches_cpu<Bf16, Bf16>(Rounding::kStochastic, 1, {});
}

// T: the gradient's and the parameter's dtype (the engine's compute dtype).
template <typename T>
void sgd_gpu_matches_cpu(float momentum, SgdMomentum kind) {
  ZDP_SKIP_WITHOUT_GPU();
  GpuFixture gpu;
  ASSERT_TRUE(gpu.init());
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const int64_t n = 300007, offset = 5;
  std::vector<float> master = rnd.signed_vector(n, 0.01f, 1.0f), buf(n, 0.0f);
  std::vector<T> out(n);
  const std::vector<DecaySegment> segments = {{offset + 100, offset + 1000, 0.0f}};
  DeviceArray<float> dmaster(*gpu.device, master), dbuf(*gpu.device, buf);
  DeviceArray<T> dout(*gpu.device, out);
  DeviceArray<DecaySegment> dseg(*gpu.device, segments);
  for (int64_t step = 1; step <= 3; ++step) {
    const std::vector<T> grad = zdp::testing::encode<T>(rnd.signed_vector(n, 1e-3f, 1.0f));
    DeviceArray<T> dgrad(*gpu.device, grad);
    SgdArgs a;
    a.count = n, a.global_offset = offset, a.grad_dtype = zdp::testing::dtype_of<T>();
    a.param_dtype = zdp::testing::dtype_of<T>(), a.rounding = Rounding::kStochastic;
    a.seed = 3, a.step = step, a.lr = 0.05f, a.momentum = momentum, a.kind = kind, a.weight_decay = 0.01f;
    a.num_segments = 1;
    SgdArgs c = a, g = a;
    c.master = master.data(), c.momentum_buf = buf.data(), c.grad = grad.data(), c.param_out = out.data();
    c.segments = segments.data();
    g.master = dmaster.data(), g.momentum_buf = dbuf.data(), g.grad = dgrad.data(), g.param_out = dout.data();
    g.segments = dseg.data();
    ASSERT_TRUE(sgd_update_cpu(c).ok());
    const Status st = sgd_update_cuda(g, gpu.cuda_stream());
    ASSERT_TRUE(st.ok()) << st.to_string();
    gpu.sync();
  }
  EXPECT_TRUE(bitwise_equal(dmaster.download(), master, "master"));
  if (momentum != 0.0f) {
    EXPECT_TRUE(bitwise_equal(dbuf.download(), buf, "momentum buffer"));
  }
  EXPECT_TRUE(bitwise_equal(raw_bits(dout.download()), raw_bits(out), "param_out"));
}

TEST(SgdGpu, NesterovMatchesCpu) { sgd_gpu_matches_cpu<Bf16>(0.9f, SgdMomentum::kNesterov); }
TEST(SgdGpu, NoMomentumMatchesCpu) { sgd_gpu_matches_cpu<Bf16>(0.0f, SgdMomentum::kClassic); }
// fp16 gradients: the variants ptxas spills registers in (sgd.cu is exempt from
// --warn-on-spills), untested on their own before.
TEST(SgdGpu, Fp16NesterovMatchesCpu) { sgd_gpu_matches_cpu<Half>(0.9f, SgdMomentum::kNesterov); }
TEST(SgdGpu, Fp16ClassicMatchesCpu) { sgd_gpu_matches_cpu<Half>(0.9f, SgdMomentum::kClassic); }

template <typename T>
void grad_check_gpu_matches_cpu(int64_t n, int64_t pad, bool with_inf) {
  ZDP_SKIP_WITHOUT_GPU();
  GpuFixture gpu;
  ASSERT_TRUE(gpu.init());
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace() + " n=" + std::to_string(n));
  std::vector<float> x = rnd.signed_vector(static_cast<size_t>(n), 1e-3f, 4.0f);
  if (with_inf) x[static_cast<size_t>(rnd.integer(0, n - 1))] = std::numeric_limits<float>::infinity();
  const std::vector<T> h = zdp::testing::encode<T>(x);
  GradStats cpu;
  GradCheckArgs a;
  a.grad = h.data(), a.dtype = zdp::testing::dtype_of<T>(), a.count = n, a.scale = 0.5f, a.out = &cpu;
  ASSERT_TRUE(grad_check_cpu(a).ok());
  DeviceArray<T> dx(*gpu.device, h, pad);
  DeviceArray<GradStats> dout(*gpu.device, std::vector<GradStats>(1));
  DeviceArray<uint8_t> ws(*gpu.device, std::vector<uint8_t>(static_cast<size_t>(grad_check_workspace_bytes(n))));
  a.grad = dx.data(), a.out = dout.data();
  const Status st = grad_check_cuda(a, ws.data(), grad_check_workspace_bytes(n), gpu.cuda_stream());
  ASSERT_TRUE(st.ok()) << st.to_string();
  gpu.sync();
  const GradStats g = dout.download()[0];
  EXPECT_EQ(g.nonfinite, cpu.nonfinite);
  if (with_inf) EXPECT_TRUE(std::isinf(g.sum_sq));
  else EXPECT_EQ(float_bits(g.sum_sq), float_bits(cpu.sum_sq)) << g.sum_sq << " vs CPU " << cpu.sum_sq;
}

TEST(GradCheckGpu, SameBitsAsCpu) {
  for (int64_t n : {1, 4095, 4097, 1000003}) {
    grad_check_gpu_matches_cpu<float>(n, 0, false);
    grad_check_gpu_matches_cpu<Bf16>(n, 0, false);
    grad_check_gpu_matches_cpu<Half>(n, 0, false);
  }
}
TEST(GradCheckGpu, MultiLevelFoldAndMisalignment) {
  grad_check_gpu_matches_cpu<Bf16>(int64_t{2049} * kGradChunk + 77, 0, false);  // > 2048 chunks: two fold levels
  grad_check_gpu_matches_cpu<float>(300001, 1, false);
}
TEST(GradCheckGpu, FlagsInf) { grad_check_gpu_matches_cpu<Half>(100000, 0, true); }

template <typename S, typename D>
void cast_gpu_matches_cpu(GpuFixture& gpu, TestRandom& rnd, int64_t pad) {
  const int64_t n = 100003;
  const std::vector<S> src = zdp::testing::encode<S>(rnd.signed_vector(static_cast<size_t>(n), 1e-4f, 6e4f));
  std::vector<D> cpu(static_cast<size_t>(n));
  CastArgs a;
  a.src = src.data(), a.src_dtype = zdp::testing::dtype_of<S>(), a.dst = cpu.data();
  a.dst_dtype = zdp::testing::dtype_of<D>(), a.count = n;
  ASSERT_TRUE(cast_cpu(a).ok());
  DeviceArray<S> dsrc(*gpu.device, src, pad);
  DeviceArray<D> ddst(*gpu.device, std::vector<D>(static_cast<size_t>(n)), pad);
  a.src = dsrc.data(), a.dst = ddst.data();
  ASSERT_TRUE(cast_cuda(a, gpu.cuda_stream()).ok());
  gpu.sync();
  std::vector<D> got = ddst.download();
  EXPECT_EQ(std::memcmp(got.data(), cpu.data(), got.size() * sizeof(D)), 0)
      << to_string(a.src_dtype) << " -> " << to_string(a.dst_dtype) << ", pad " << pad;
  // Scale in place, on the destination type.
  ScaleArgs s;
  s.data = cpu.data(), s.dtype = a.dst_dtype, s.count = n, s.scale = 0.37f;
  ASSERT_TRUE(scale_cpu(s).ok());
  s.data = ddst.data();
  ASSERT_TRUE(scale_cuda(s, gpu.cuda_stream()).ok());
  gpu.sync();
  got = ddst.download();
  EXPECT_EQ(std::memcmp(got.data(), cpu.data(), got.size() * sizeof(D)), 0) << "scale " << to_string(s.dtype);
}

TEST(CastGpu, EveryPairMatchesCpu) {
  ZDP_SKIP_WITHOUT_GPU();
  GpuFixture gpu;
  ASSERT_TRUE(gpu.init());
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  for (int64_t pad : {0, 1}) {
    cast_gpu_matches_cpu<float, Bf16>(gpu, rnd, pad);
    cast_gpu_matches_cpu<float, Half>(gpu, rnd, pad);
    cast_gpu_matches_cpu<Bf16, float>(gpu, rnd, pad);
    cast_gpu_matches_cpu<Half, float>(gpu, rnd, pad);
    cast_gpu_matches_cpu<Bf16, Half>(gpu, rnd, pad);
    cast_gpu_matches_cpu<float, float>(gpu, rnd, pad);
  }
}

TEST(KernelsGpu, EmptyAndBadCalls) {
  ZDP_SKIP_WITHOUT_GPU();
  GpuFixture gpu;
  ASSERT_TRUE(gpu.init());
  EXPECT_TRUE(adamw_update_cuda(AdamWArgs{}, gpu.cuda_stream()).ok());  // count 0
  AdamWArgs bad;
  bad.step = 0;
  EXPECT_EQ(adamw_update_cuda(bad, gpu.cuda_stream()).code(), StatusCode::kInvalidArgument);
  DeviceArray<GradStats> out(*gpu.device, std::vector<GradStats>{{5.0f, 5.0f}});
  GradCheckArgs g;
  g.out = out.data();
  ASSERT_TRUE(grad_check_cuda(g, nullptr, 0, gpu.cuda_stream()).ok());  // count 0 writes zeros
  gpu.sync();
  EXPECT_EQ(out.download()[0].sum_sq, 0.0f);
  g.count = 10;
  g.grad = out.data();
  EXPECT_EQ(grad_check_cuda(g, nullptr, 0, gpu.cuda_stream()).code(), StatusCode::kInvalidArgument);  // no workspace
}

}  // namespace
}  // namespace zdp::kernels
