// The fused SGD kernel's CPU path against a float64 torch.optim.SGD (classic and Nesterov
// momentum, dampening, coupled weight decay with a segment table, no momentum) under the
// one tolerance rule, over many steps; and the same bits for any slice cut.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/sgd.h"
#include "testing/optim_reference.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

using zdp::testing::allowed_error;
using zdp::testing::SgdRef;
using zdp::testing::SgdRefHyper;
using zdp::testing::TestRandom;
using zdp::testing::within;

struct Case {
  const char* name;
  float momentum, dampening;
  SgdMomentum kind;
};

void run_case(const Case& c, DType grad_dtype, int steps) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace() + " " + c.name + " grad " + to_string(grad_dtype));
  const size_t n = 30011;
  const int64_t offset = 1000;
  std::vector<float> master = rnd.signed_vector(n, 0.05f, 2.0f);
  std::vector<float> buf = rnd.signed_vector(n, 1e-3f, 1e-1f);  // overwritten at step 1
  std::vector<Bf16> out(n);
  const std::vector<DecaySegment> segments = {{offset + 100, offset + 300, 0.0f}, {offset + 20000, offset + 20001, 0.5f}};
  SgdRefHyper h{static_cast<float>(rnd.uniform(1e-3f, 5e-2f)), c.momentum, c.dampening, 0.01f,
                static_cast<float>(rnd.uniform(0.5f, 1.0f)), c.kind == SgdMomentum::kNesterov};
  std::vector<SgdRef> ref(n);
  for (size_t i = 0; i < n; ++i) ref[i].p.value = master[i];
  for (int64_t t = 1; t <= steps; ++t) {
    const std::vector<float> g32 = rnd.signed_vector(n, 1e-3f, 1.0f);
    const std::vector<Bf16> gb = zdp::testing::encode<Bf16>(g32);
    const std::vector<Half> gh = zdp::testing::encode<Half>(g32);
    const void* grad = grad_dtype == DType::kF32 ? static_cast<const void*>(g32.data())
                       : grad_dtype == DType::kBF16 ? static_cast<const void*>(gb.data())
                                                    : static_cast<const void*>(gh.data());
    for (size_t i = 0; i < n; ++i) {
      const double g = grad_dtype == DType::kF32 ? double{g32[i]}
                       : grad_dtype == DType::kBF16 ? double{to_f32(gb[i])}
                                                    : double{to_f32(gh[i])};
      SgdRefHyper hi = h;
      const int64_t gi = offset + static_cast<int64_t>(i);
      for (const DecaySegment& s : segments) {
        if (gi >= s.begin && gi < s.end) hi.weight_decay = s.weight_decay;
      }
      ref[i].step(g, t, hi);
    }
    SgdArgs a;
    a.count = static_cast<int64_t>(n);
    a.global_offset = offset;
    a.master = master.data();
    a.momentum_buf = c.momentum != 0.0f ? buf.data() : nullptr;
    a.grad = grad;
    a.grad_dtype = grad_dtype;
    a.param_out = out.data();
    a.param_dtype = DType::kBF16;
    a.step = t;
    a.lr = static_cast<float>(h.lr);
    a.momentum = c.momentum;
    a.dampening = c.dampening;
    a.kind = c.kind;
    a.weight_decay = static_cast<float>(h.weight_decay);
    a.grad_scale = static_cast<float>(h.grad_scale);
    a.segments = segments.data();
    a.num_segments = static_cast<int64_t>(segments.size());
    const Status st = sgd_update_cpu(a);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  for (size_t i = 0; i < n; ++i) {
    const int64_t idx = static_cast<int64_t>(i);
    ASSERT_TRUE(within(master[i], ref[i].p.value, allowed_error(ref[i].p.error, ref[i].p.value), idx)) << "master";
    ASSERT_TRUE(within(to_f32(out[i]), ref[i].p.value, allowed_error(ref[i].p.error, ref[i].p.value, DType::kBF16), idx))
        << "param_out";
    if (c.momentum != 0.0f) {
      ASSERT_TRUE(within(buf[i], ref[i].buf.value, allowed_error(ref[i].buf.error, ref[i].buf.value), idx)) << "buf";
    }
  }
}

const Case kCases[] = {
    {"no momentum", 0.0f, 0.0f, SgdMomentum::kClassic},
    {"classic", 0.9f, 0.0f, SgdMomentum::kClassic},
    {"dampened", 0.8f, 0.3f, SgdMomentum::kClassic},
    {"nesterov", 0.9f, 0.0f, SgdMomentum::kNesterov},
};

TEST(SgdKernel, OneStepMatchesFloat64) {
  for (const Case& c : kCases) {
    for (DType g : {DType::kF32, DType::kBF16, DType::kF16}) run_case(c, g, 1);
  }
}

TEST(SgdKernel, FiftyStepsMatchFloat64) {
  for (const Case& c : kCases) run_case(c, DType::kBF16, 50);
}

TEST(SgdKernel, SlicesCutAnywhereGiveTheSameBits) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const int64_t n = 20011;
  const std::vector<float> p0 = rnd.signed_vector(static_cast<size_t>(n), 0.05f, 2.0f);
  const std::vector<Bf16> g = zdp::testing::encode<Bf16>(rnd.signed_vector(static_cast<size_t>(n), 1e-3f, 1.0f));
  const uint64_t seed = rnd.bits64();
  auto run = [&](const std::vector<int64_t>& bounds) {
    std::vector<float> p = p0, buf(static_cast<size_t>(n), 0.0f);
    std::vector<Bf16> out(static_cast<size_t>(n));
    for (int64_t t = 1; t <= 2; ++t) {
      for (size_t k = 0; k + 1 < bounds.size(); ++k) {
        SgdArgs a;
        a.count = bounds[k + 1] - bounds[k];
        a.global_offset = bounds[k];
        a.master = p.data() + bounds[k];
        a.momentum_buf = buf.data() + bounds[k];
        a.grad = g.data() + bounds[k];
        a.grad_dtype = DType::kBF16;
        a.param_out = out.data() + bounds[k];
        a.rounding = Rounding::kStochastic;
        a.seed = seed;
        a.step = t;
        a.lr = 0.05f;
        a.momentum = 0.9f;
        a.kind = SgdMomentum::kNesterov;
        a.weight_decay = 0.01f;
        EXPECT_TRUE(sgd_update_cpu(a).ok());
      }
    }
    std::vector<uint16_t> bits(out.size());
    for (size_t i = 0; i < out.size(); ++i) bits[i] = out[i].bits;
    return std::make_pair(p, bits);
  };
  const auto whole = run({0, n});
  const auto cut = run({0, 3, 4099, n / 2 + 1, n - 5, n});
  EXPECT_TRUE(zdp::testing::bitwise_equal(cut.first, whole.first, "master"));
  EXPECT_TRUE(zdp::testing::bitwise_equal(cut.second, whole.second, "param_out"));
}

TEST(SgdKernel, RejectsBadArguments) {
  std::vector<float> p(8, 1.0f), g(8, 1.0f);
  SgdArgs a;
  a.count = 8;
  a.master = p.data();
  a.grad = g.data();
  a.momentum = 0.9f;  // without a buffer
  EXPECT_EQ(sgd_update_cpu(a).code(), StatusCode::kInvalidArgument);
  a.momentum = 0.0f;
  a.kind = SgdMomentum::kNesterov;  // Nesterov needs momentum
  EXPECT_EQ(sgd_update_cpu(a).code(), StatusCode::kInvalidArgument);
  a.kind = SgdMomentum::kClassic;
  a.step = 0;
  EXPECT_EQ(sgd_update_cpu(a).code(), StatusCode::kInvalidArgument);
  a.step = 1;
  a.rounding = Rounding::kStochastic;  // without a 16-bit output
  EXPECT_EQ(sgd_update_cpu(a).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zdp::kernels
