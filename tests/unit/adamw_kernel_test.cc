// The fused AdamW kernel's CPU path against a float64 AdamW (testing/optim_reference.h)
// under the one tolerance rule: one step for every gradient/parameter dtype, 100 steps,
// bias correction, the weight-decay table; and bit-exactness across thread counts and
// slice cuts, stochastic rounding included.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/adamw.h"
#include "testing/optim_reference.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

using zdp::testing::AdamWRef;
using zdp::testing::AdamWRefHyper;
using zdp::testing::allowed_error;
using zdp::testing::TestRandom;
using zdp::testing::within;

// A slice's buffers on the host, with the stored gradient of type G and output of type P.
template <typename G, typename P>
struct Slice {
  std::vector<float> master, m, v;
  std::vector<G> grad;
  std::vector<P> out;

  AdamWArgs args(int64_t t, const AdamWRefHyper& h) {
    AdamWArgs a;
    a.count = static_cast<int64_t>(master.size());
    a.master = master.data();
    a.m = m.data();
    a.v = v.data();
    a.grad = grad.data();
    a.grad_dtype = zdp::testing::dtype_of<G>();
    if constexpr (!std::is_same_v<P, NoOutput>) {
      a.param_out = out.data();
      a.param_dtype = zdp::testing::dtype_of<P>();
    }
    a.step = t;
    a.lr = static_cast<float>(h.lr);
    a.beta1 = static_cast<float>(h.beta1);
    a.beta2 = static_cast<float>(h.beta2);
    a.eps = static_cast<float>(h.eps);
    a.weight_decay = static_cast<float>(h.weight_decay);
    a.grad_scale = static_cast<float>(h.grad_scale);
    return a;
  }

  // A float64 AdamW per element, starting from this slice's master, m and v.
  std::vector<AdamWRef> reference() const {
    std::vector<AdamWRef> ref(master.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      ref[i].p.value = master[i];
      ref[i].m.value = m[i];
      ref[i].v.value = v[i];
    }
    return ref;
  }
};

template <typename G, typename P>
Slice<G, P> random_slice(TestRandom& rnd, size_t n) {
  Slice<G, P> s;
  s.master = rnd.signed_vector(n, 0.05f, 2.0f);
  s.m = rnd.signed_vector(n, 1e-4f, 1e-2f);
  s.v = rnd.positive_vector(n, 1e-6f, 1e-3f);
  s.grad = zdp::testing::encode<G>(rnd.signed_vector(n, 1e-3f, 1.0f));
  if constexpr (!std::is_same_v<P, NoOutput>) s.out.resize(n);
  return s;
}

// Hyper-parameters as the float values the kernel receives, so the reference sees them exactly.
AdamWRefHyper random_hyper(TestRandom& rnd) {
  AdamWRefHyper h;
  h.lr = static_cast<float>(rnd.uniform(1e-4f, 3e-3f));
  h.beta1 = static_cast<float>(rnd.uniform(0.8f, 0.95f));
  h.beta2 = static_cast<float>(rnd.uniform(0.95f, 0.9995f));
  h.eps = 1e-8f;
  h.weight_decay = static_cast<float>(rnd.uniform(0.01f, 0.2f));
  h.grad_scale = static_cast<float>(rnd.uniform(0.25f, 1.0f));
  return h;
}

template <typename G, typename P>
void check_against(const Slice<G, P>& s, const std::vector<AdamWRef>& ref) {
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_TRUE(within(s.master[i], ref[i].p.value, allowed_error(ref[i].p.error, ref[i].p.value), i)) << "master";
    ASSERT_TRUE(within(s.m[i], ref[i].m.value, allowed_error(ref[i].m.error, ref[i].m.value), i)) << "m";
    ASSERT_TRUE(within(s.v[i], ref[i].v.value, allowed_error(ref[i].v.error, ref[i].v.value), i)) << "v";
    if constexpr (!std::is_same_v<P, NoOutput>) {
      const DType out_dtype = zdp::testing::dtype_of<P>();
      ASSERT_TRUE(within(to_f32(s.out[i]), ref[i].p.value, allowed_error(ref[i].p.error, ref[i].p.value, out_dtype), i))
          << "param_out " << to_string(out_dtype);
    }
  }
}

template <typename GP>
class AdamWDtypes : public ::testing::Test {};
template <typename G, typename P>
struct Pair {
  using Grad = G;
  using Param = P;
};
using DtypePairs = ::testing::Types<Pair<float, float>, Pair<float, Bf16>, Pair<Bf16, Bf16>, Pair<Bf16, Half>,
                                    Pair<Half, Half>, Pair<Half, float>, Pair<Bf16, NoOutput>, Pair<float, NoOutput>>;
TYPED_TEST_SUITE(AdamWDtypes, DtypePairs);

TYPED_TEST(AdamWDtypes, OneStepMatchesFloat64) {
  using G = typename TypeParam::Grad;
  using P = typename TypeParam::Param;
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const size_t n = 40000;  // several CPU blocks
  auto s = random_slice<G, P>(rnd, n);
  const AdamWRefHyper h = random_hyper(rnd);
  const int64_t t = rnd.integer(1, 1000);
  std::vector<AdamWRef> ref = s.reference();
  const std::vector<double> g = zdp::testing::decode(s.grad);
  for (size_t i = 0; i < n; ++i) {
    ref[i].step(g[i], t, h);
  }
  ASSERT_TRUE(adamw_update_cpu(s.args(t, h)).ok());
  check_against(s, ref);
}

TEST(AdamWKernel, HundredStepsMatchFloat64) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const size_t n = 20000;
  auto s = random_slice<Bf16, Bf16>(rnd, n);
  std::fill(s.m.begin(), s.m.end(), 0.0f);  // a real start: zero moments, so bias correction matters
  std::fill(s.v.begin(), s.v.end(), 0.0f);
  const AdamWRefHyper h = random_hyper(rnd);
  std::vector<AdamWRef> ref = s.reference();
  for (int64_t t = 1; t <= 100; ++t) {
    s.grad = zdp::testing::encode<Bf16>(rnd.signed_vector(n, 1e-3f, 1.0f));
    const std::vector<double> g = zdp::testing::decode(s.grad);
    for (size_t i = 0; i < n; ++i) ref[i].step(g[i], t, h);
    ASSERT_TRUE(adamw_update_cpu(s.args(t, h)).ok());
  }
  check_against(s, ref);
}

// The bound is tight enough to catch a bias-correction bug: the same update at t + 1
// instead of t fails it.
TEST(AdamWKernel, ToleranceCatchesAnOffByOneStep) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const size_t n = 1000;
  auto s = random_slice<float, float>(rnd, n);
  const AdamWRefHyper h = random_hyper(rnd);
  std::vector<AdamWRef> ref = s.reference();
  const std::vector<double> g = zdp::testing::decode(s.grad);
  for (size_t i = 0; i < n; ++i) {
    ref[i].step(g[i], 3, h);
  }
  ASSERT_TRUE(adamw_update_cpu(s.args(4, h)).ok());
  size_t caught = 0;
  for (size_t i = 0; i < n; ++i) {
    caught += !within(s.master[i], ref[i].p.value, allowed_error(ref[i].p.error, ref[i].p.value));
  }
  EXPECT_GT(caught, n / 2);
}

// Closed form, independent of the reference code: from m = v = 0, step 1 moves each
// weight by lr * g / (|g| + eps) after decay (mhat = g, vhat = g^2).
TEST(AdamWKernel, FirstStepIsSignedLearningRate) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const size_t n = 5000;
  auto s = random_slice<float, NoOutput>(rnd, n);
  std::fill(s.m.begin(), s.m.end(), 0.0f);
  std::fill(s.v.begin(), s.v.end(), 0.0f);
  const std::vector<float> p0 = s.master;
  AdamWRefHyper h = random_hyper(rnd);
  h.grad_scale = 1.0;
  ASSERT_TRUE(adamw_update_cpu(s.args(1, h)).ok());
  for (size_t i = 0; i < n; ++i) {
    const double g = s.grad[i];
    const double want = p0[i] * (1 - h.lr * h.weight_decay) - h.lr * g / (std::fabs(g) + h.eps);
    // About 12 roundings (the kernel's chain), values no larger than |p0| + lr.
    ASSERT_TRUE(within(s.master[i], want, zdp::testing::straight_line_bound(12, std::fabs(p0[i]) + h.lr), i));
  }
}

TEST(AdamWKernel, DecaySegmentsSetEachElementsWeightDecay) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const size_t n = 70000;
  const int64_t offset = 123457;  // the slice's global position: segments are global
  auto s = random_slice<Bf16, Bf16>(rnd, n);
  const AdamWRefHyper h = random_hyper(rnd);
  // Tiny, adjacent, straddling and out-of-slice segments.
  const std::vector<DecaySegment> segments = {
      {100, 200, 0.5f},                        // before the slice
      {offset - 10, offset + 5, 0.0f},         // straddles the slice start
      {offset + 5, offset + 6, 0.3f},          // one element, adjacent to the previous
      {offset + 40000, offset + 40017, 0.0f},  // crosses a CPU block boundary? (40960 no; inside)
      {offset + 49150, offset + 49160, 0.0f},  // crosses the block boundary at 49152
      {offset + 69990, offset + 80000, 0.0f},  // straddles the slice end
  };
  std::vector<double> wd(n, h.weight_decay);
  for (const DecaySegment& seg : segments) {
    for (int64_t gi = std::max<int64_t>(seg.begin, offset); gi < std::min<int64_t>(seg.end, offset + n); ++gi) {
      wd[static_cast<size_t>(gi - offset)] = seg.weight_decay;
    }
  }
  std::vector<AdamWRef> ref = s.reference();
  const std::vector<double> g = zdp::testing::decode(s.grad);
  for (size_t i = 0; i < n; ++i) {
    AdamWRefHyper hi = h;
    hi.weight_decay = static_cast<float>(wd[i]);
    ref[i].step(g[i], 7, hi);
  }
  AdamWArgs a = s.args(7, h);
  a.global_offset = offset;
  a.segments = segments.data();
  a.num_segments = static_cast<int64_t>(segments.size());
  ASSERT_TRUE(adamw_update_cpu(a).ok());
  check_against(s, ref);
}

TEST(AdamWKernel, RejectsBadArgumentsNamingThem) {
  std::vector<float> p(16, 1.0f), m(16, 0.1f), v(16, 0.1f), g(16, 0.5f);
  std::vector<Half> out(16);
  AdamWArgs a;
  a.count = 16;
  a.master = p.data(), a.m = m.data(), a.v = v.data(), a.grad = g.data();
  a.step = 0;
  Status st = adamw_update_cpu(a);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("step 0 < 1"), std::string::npos) << st.message();
  a.step = 1;
  a.beta2 = 1.0f;
  EXPECT_EQ(adamw_update_cpu(a).code(), StatusCode::kInvalidArgument);
  a.beta2 = 0.999f;
  a.param_out = out.data();
  a.param_dtype = DType::kF32;
  a.rounding = Rounding::kStochastic;  // bf16 and fp16 outputs only
  st = adamw_update_cpu(a);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("stochastic rounding needs a bf16 or fp16 param_out"), std::string::npos) << st.message();
  a.param_dtype = DType::kF16;
  a.rounding = Rounding::kNearest;
  const std::vector<DecaySegment> unsorted = {{8, 12, 0.0f}, {2, 4, 0.0f}};
  a.segments = unsorted.data();
  a.num_segments = 2;
  EXPECT_EQ(adamw_update_cpu(a).code(), StatusCode::kInvalidArgument);
  a.num_segments = 0;
  a.grad_dtype = DType::kI64;
  EXPECT_EQ(adamw_update_cpu(a).code(), StatusCode::kInvalidArgument);
  a.grad_dtype = DType::kF32;
  a.v = nullptr;
  EXPECT_EQ(adamw_update_cpu(a).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(std::all_of(p.begin(), p.end(), [](float x) { return x == 1.0f; })) << "a refused call wrote";
}

}  // namespace
}  // namespace zdp::kernels
