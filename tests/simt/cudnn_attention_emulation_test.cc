// The emulated cuDNN fused attention (testing/simt/cudnn_attention_emulation.h): the
// refusals the cudnn-frontend makes on Hopper, the conditions a GPU would turn into another
// buffer's bytes or a fault (each named at the call), the work queued on the stream, the
// forward's arithmetic against float64, and the default backward's dQ bits changing from call
// to call where the deterministic one's repeat. What zdp's attention does with it is
// fused_attention_gpu_test's and gpt_gpu_test's to check.
#include "testing/simt/cudnn_attention_emulation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "testing/attention_reference.h"
#include "testing/simt/emulated_gpu_device.h"

namespace zdp::kernels {
namespace {

using namespace std::chrono_literals;

bool mentions(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// One shape's buffers on an emulated device, bf16 inputs of [-2, 2] (bf16 values).
struct Attention : ::testing::Test {
  void make(const FusedAttentionShape& shape, bool deterministic = false) {
    // A buffer goes before its device (zdp/device.h).
    for (DeviceBuffer* b : {&qkv, &out, &dout, &dqkv, &stats, &workspace}) b->reset();
    stream.reset();
    s = shape;
    device = testing::create_emulated_gpu_device();
    stream = device->create_stream("attention").value();
    attention = make_cudnn_attention_emu(deterministic).value();
    const int64_t n = s.batch * s.seq, d = s.heads * s.head_dim;
    qkv = bf16_buffer(n * 3 * d, 1), out = bf16_buffer(n * d, 0), dout = bf16_buffer(n * d, 2), dqkv = bf16_buffer(n * 3 * d, 0);
    stats = device->allocate(s.batch * s.heads * s.seq * 4, MemCategory::kOther).value();
    const int64_t need = attention->prepare(s).value();
    workspace = device->allocate(need, MemCategory::kWorkspace).value();
  }
  DeviceBuffer bf16_buffer(int64_t n, uint64_t seed) {
    std::vector<uint16_t> v(static_cast<size_t>(n), 0);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-2, 2);
    if (seed != 0) {
      for (uint16_t& x : v) x = f32_to_bf16(u(rng));
    }
    DeviceBuffer b = device->allocate(n * 2, MemCategory::kOther).value();
    EXPECT_TRUE(device->memcpy(b.data(), v.data(), v.size() * 2).ok());
    return b;
  }
  std::vector<float> floats(const DeviceBuffer& b) {
    std::vector<uint16_t> bits(static_cast<size_t>(b.bytes() / 2));
    EXPECT_TRUE(device->memcpy(bits.data(), b.data(), bits.size() * 2).ok());
    std::vector<float> out(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_f32(bits[i]);
    return out;
  }
  cudaStream_t cuda_stream() { return static_cast<cudaStream_t>(stream->native_handle()); }
  FusedAttentionArgs forward_args() { return {s, scale(), qkv.data(), out.data(), stats.as<float>()}; }
  FusedAttentionBackwardArgs backward_args() {
    return {s, scale(), qkv.data(), out.data(), dout.data(), stats.as<float>(), dqkv.data()};
  }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(s.head_dim)); }
  Status forward() { return attention->forward(forward_args(), workspace.data(), workspace.bytes(), cuda_stream()); }
  Status backward() { return attention->backward(backward_args(), workspace.data(), workspace.bytes(), cuda_stream()); }

  FusedAttentionShape s;
  std::unique_ptr<Device> device;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<FusedAttention> attention;
  DeviceBuffer qkv, out, dout, dqkv, stats, workspace;
};

TEST_F(Attention, RefusesWhatTheFrontendRefusesOnHopper) {
  make({2, 16, 2, 16, DType::kBF16});
  for (const FusedAttentionShape bad : {FusedAttentionShape{1, 16, 2, 12, DType::kBF16},
                                        FusedAttentionShape{1, 16, 1, 264, DType::kBF16},
                                        FusedAttentionShape{1, 1, 2, 16, DType::kBF16}}) {
    const StatusOr<int64_t> r = attention->prepare(bad);
    ASSERT_FALSE(r.ok()) << describe(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
  }
  EXPECT_EQ(attention->prepare({1, 16, 2, 16, DType::kF32}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(attention->prepare({1, 16, 2, 256, DType::kF16}).value(), fused_attention_workspace_estimate({1, 16, 2, 256, DType::kF16}, false));
}

TEST_F(Attention, NamesATensorOutsideItsAllocationMisalignedOrSharingMemory) {
  make({2, 16, 2, 16, DType::kBF16});
  const testing::CudnnAttentionRuns before = testing::cudnn_attention_runs();
  // The statistics one float short: their last floats would land past the buffer.
  DeviceBuffer short_stats = device->allocate(stats.bytes() - 4, MemCategory::kOther).value();
  FusedAttentionArgs a = forward_args();
  a.stats = short_stats.as<float>();
  Status st = attention->forward(a, workspace.data(), workspace.bytes(), cuda_stream());
  EXPECT_TRUE(mentions(st, "stats") && mentions(st, "not inside one allocation")) << st.to_string();
  // Pageable host memory is no device memory.
  std::vector<uint16_t> host(static_cast<size_t>(out.bytes() / 2));
  a = forward_args();
  a.out = host.data();
  st = attention->forward(a, workspace.data(), workspace.bytes(), cuda_stream());
  EXPECT_TRUE(mentions(st, "O (") && mentions(st, "not inside")) << st.to_string();
  // qkv 2 bytes in: Q's address is not 16-byte aligned (the buffer is a row longer).
  DeviceBuffer wide = bf16_buffer(s.batch * s.seq * 3 * s.heads * s.head_dim + 8, 3);
  a = forward_args();
  a.qkv = static_cast<char*>(wide.data()) + 2;
  st = attention->forward(a, workspace.data(), workspace.bytes(), cuda_stream());
  EXPECT_TRUE(mentions(st, "16-byte aligned")) << st.to_string();
  // dQ, dK, dV written over the inputs.
  FusedAttentionBackwardArgs b = backward_args();
  b.dqkv = qkv.data();
  st = attention->backward(b, workspace.data(), workspace.bytes(), cuda_stream());
  EXPECT_TRUE(mentions(st, "shares memory with input Q")) << st.to_string();
  // An output inside the workspace, and a workspace one byte short.
  a = forward_args();
  a.out = workspace.data();
  st = attention->forward(a, workspace.data(), workspace.bytes(), cuda_stream());
  EXPECT_TRUE(mentions(st, "the workspace shares memory with O")) << st.to_string();
  st = attention->backward(backward_args(), workspace.data(), workspace.bytes() - 1, cuda_stream());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  ASSERT_TRUE(stream->synchronize(1s).ok());
  const testing::CudnnAttentionRuns after = testing::cudnn_attention_runs();
  EXPECT_EQ(after.forward + after.backward, before.forward + before.backward) << "a refused call queued work";
}

// The work waits on the stream, as cuDNN's kernels do; the forward is within the roundings
// it makes of the exact result: the probabilities rounded to bf16 before P V (each term's
// relative error <= u = 2^-8, so |dO| <= u sum_j p_j |v_j| / l) and O rounded (u |O|).
TEST_F(Attention, ForwardIsQueuedAndWithinItsRoundingsOfFloat64) {
  make({2, 40, 3, 16, DType::kBF16});
  const testing::CudnnAttentionRuns before = testing::cudnn_attention_runs();
  ASSERT_TRUE(forward().ok());
  EXPECT_EQ(testing::cudnn_attention_runs().forward, before.forward) << "ran before anything waited for it";
  for (float x : floats(out)) ASSERT_EQ(x, 0.0f) << "written before the stream ran";
  ASSERT_TRUE(stream->synchronize(1s).ok());
  EXPECT_EQ(testing::cudnn_attention_runs().forward, before.forward + 1);

  const std::vector<float> x = floats(qkv), o = floats(out);
  std::vector<float> lse(static_cast<size_t>(s.batch * s.heads * s.seq));
  ASSERT_TRUE(device->memcpy(lse.data(), stats.data(), lse.size() * 4).ok());
  const int64_t d = s.heads * s.head_dim, hd = s.head_dim;
  const double u = std::ldexp(1.0, -8);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        const std::vector<double> sc = testing::causal_scores(x, s.seq, s.heads, hd, scale(), b, h, i);
        const double m = *std::max_element(sc.begin(), sc.end());
        double l = 0;
        for (double v : sc) l += std::exp(v - m);
        const double want_lse = m + std::log(l);
        ASSERT_NEAR(lse[(b * s.heads + h) * s.seq + i], want_lse, 1e-5 * (1 + std::fabs(want_lse))) << b << " " << h << " " << i;
        for (int64_t c = 0; c < hd; ++c) {
          double exact = 0, magnitude = 0;
          for (int64_t j = 0; j <= i; ++j) {
            const double p = std::exp(sc[static_cast<size_t>(j)] - m) / l, v = x[(b * s.seq + j) * 3 * d + 2 * d + h * hd + c];
            exact += p * v;
            magnitude += p * std::fabs(v);
          }
          const double got = o[(b * s.seq + i) * d + h * hd + c];
          ASSERT_LE(std::fabs(got - exact), u * magnitude + u * std::fabs(exact) + 1e-6) << b << " " << h << " " << i << " " << c;
        }
      }
    }
  }
}

// dQ's partial sums meet in another order each call (a GPU's atomics): by default its bits
// change from call to call at a sequence of several key tiles, by fp32 roundings (the
// results agree to bf16's precision); dK and dV, and everything of the deterministic
// backward, repeat their bits.
TEST_F(Attention, TheDefaultBackwardsDqVariesWhereTheDeterministicOneRepeats) {
  for (const bool deterministic : {false, true}) {
    make({2, 128, 3, 64, DType::kBF16}, deterministic);
    ASSERT_TRUE(forward().ok());
    ASSERT_TRUE(backward().ok());
    ASSERT_TRUE(stream->synchronize(1s).ok());
    const std::vector<float> first = floats(dqkv);
    ASSERT_TRUE(backward().ok());
    ASSERT_TRUE(stream->synchronize(1s).ok());
    const std::vector<float> second = floats(dqkv);
    const int64_t d = s.heads * s.head_dim;
    int64_t changed[3] = {0, 0, 0};
    double diff = 0, norm = 0;
    for (size_t i = 0; i < first.size(); ++i) {
      const int64_t which = static_cast<int64_t>(i) % (3 * d) / d;  // dq, dk, dv
      if (std::memcmp(&first[i], &second[i], 4) != 0) ++changed[which];
      diff += (first[i] - second[i]) * static_cast<double>(first[i] - second[i]);
      norm += first[i] * static_cast<double>(first[i]);
    }
    EXPECT_EQ(changed[1] + changed[2], 0) << "dK and dV are summed in one order";
    if (deterministic) {
      EXPECT_EQ(changed[0], 0) << "the deterministic backward's dQ";
    } else {
      EXPECT_GT(changed[0], 0) << "the default backward's dQ never changed: its adds' order is fixed";
    }
    EXPECT_LE(std::sqrt(diff / norm), 1e-2);
    for (float v : first) ASSERT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace zdp::kernels
