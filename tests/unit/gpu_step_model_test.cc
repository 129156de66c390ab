// The per-kernel GPU step model (planner/gpu_step_model.h) against numbers computed by
// hand: the roofline rule for one kernel, single rows of a tiny GPT's table, the step's
// sum, tokens/s and MFU; the host's issue of the launches (by hand and against a
// launch-by-launch simulation); and the GPU table.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "planner/gpu_step_model.h"
#include "tests/unit/round_gpu.h"

namespace zdp::launcher {
namespace {

using testing::halves;
using trainer::KernelRegion;
// 1 TFLOP/s and 1 GB/s (round_gpu.h), efficiencies 1/2.
GpuSpec round_gpu() { return testing::round_gpu(1e9); }

const KernelCost& row(const GpuStepPrediction& p, const std::string& name) {
  for (const KernelCost& k : p.kernels) {
    if (k.name == name) return k;
  }
  ADD_FAILURE() << "no row " << name;
  return p.kernels.front();
}

TEST(GpuStepModel, OneKernelIsTheLargerOfComputeMemoryAndLaunch) {
  const GpuSpec g = round_gpu();
  GpuEfficiency e = halves();
  std::string bound;
  // 1e9 FLOPs at 1e12 x 0.5 = 2 ms; 1e6 bytes at 1e9 x 0.5 = 2 ms... make memory win: 3e6 B = 6 ms.
  EXPECT_DOUBLE_EQ(kernel_time_s(1e9, 3e6, 1e12, 0.5, g, e, &bound), 6e-3);
  EXPECT_EQ(bound, "memory");
  EXPECT_DOUBLE_EQ(kernel_time_s(4e9, 3e6, 1e12, 0.5, g, e, &bound), 8e-3);
  EXPECT_EQ(bound, "compute");
  e.launch_s = 1.0;
  EXPECT_DOUBLE_EQ(kernel_time_s(4e9, 3e6, 1e12, 0.5, g, e, &bound), 1.0);
  EXPECT_EQ(bound, "launch");
}

TEST(GpuStepModel, TinyGptRowsAndTotals) {
  // 1 layer, d 4, 2 heads (hd 2), vocab 8, seq 4, micro-batch 2, 3 micro-batches, bf16.
  GptShape s;
  s.layers = 1, s.d_model = 4, s.heads = 2, s.vocab = 8, s.seq = 4, s.micro_batch = 2, s.accum_steps = 3;
  s.elem_bytes = 2, s.params = 1000;
  const GpuSpec g = round_gpu();
  const GpuStepPrediction p = predict_gpt_step(s, g, halves());
  // qkv forward: N = 8 tokens, 2 N d 3d = 2*8*4*12 = 768 FLOPs -> 768 / 0.5e12 = 1.536 ns;
  // bytes 2 (N d + 3 d^2 + 3 N d) = 2 (32 + 48 + 96) = 352 -> 352 / 0.5e9 = 704 ns: memory.
  const KernelCost& qkv = row(p, "qkv linear fwd");
  EXPECT_EQ(qkv.calls, 3);  // 1 layer x 3 micro-batches
  EXPECT_DOUBLE_EQ(qkv.flops, 768);
  EXPECT_DOUBLE_EQ(qkv.bytes, 352);
  EXPECT_DOUBLE_EQ(qkv.time_s, 3 * 704e-9);
  EXPECT_EQ(qkv.bound, "memory");
  // Scores: batched over the heads and samples' larger (2 = 2: heads), one call per sample:
  // 2 calls per micro-batch; per call 2 x 2 x 4 x 4 x 2 = 128 FLOPs, bytes 2 (2*2*4*2 + 2*4*4) = 128.
  const KernelCost& sc = row(p, "attention S = K^T Q");
  EXPECT_EQ(sc.calls, 6);
  EXPECT_DOUBLE_EQ(sc.flops, 128);
  EXPECT_DOUBLE_EQ(sc.bytes, 128);
  // Softmax forward: P has 2*2*4*4 = 64 elements, read and written in bf16: 256 bytes.
  EXPECT_DOUBLE_EQ(row(p, "causal softmax fwd").bytes, 256);
  // Layernorm forward: ln1 per layer + the final one, 2 per micro-batch; 2 N d e + 8 N =
  // 128 + 64. ln2 carries the residual add: 4 N d e + 8 N = 256 + 64.
  EXPECT_EQ(row(p, "layernorm fwd").calls, 6);
  EXPECT_DOUBLE_EQ(row(p, "layernorm fwd").bytes, 192);
  EXPECT_EQ(row(p, "residual add + layernorm fwd").calls, 3);
  EXPECT_DOUBLE_EQ(row(p, "residual add + layernorm fwd").bytes, 320);
  // The fc forward writes the pre-activation too (GELU_AUX_BIAS): 2 (N d + 4 d^2 + 2 x 4 N d)
  // = 2 (32 + 64 + 256) = 704 bytes; fc proj's two backward GEMMs are plain ones.
  EXPECT_DOUBLE_EQ(row(p, "fc linear (+gelu) fwd").bytes, 704);
  EXPECT_DOUBLE_EQ(row(p, "fc proj linear bwd (dx, dW)").bytes, 2 * (128 + 64 + 32));
  // fc proj's forward adds the block's residual in its GEMM (x_mid read, N d): 2 (N 4d +
  // 4d d + N d + N d) = 2 (128 + 64 + 32 + 32) = 512 bytes; no residual add kernel is left.
  EXPECT_DOUBLE_EQ(row(p, "fc proj linear fwd").bytes, 512);
  for (const KernelCost& k : p.kernels) EXPECT_NE(k.name, "residual add") << "the residual rides in fc proj's GEMM";
  // Then GELU's backward reads the pre-activation and the gradient and writes the gradient
  // (3 x 2 x N 4d = 768 bytes), and fc's bias gradient reads it and writes 4d: 2 (128 + 16).
  EXPECT_DOUBLE_EQ(row(p, "gelu bwd").bytes, 768);
  EXPECT_EQ(row(p, "gelu bwd").region, KernelRegion::kFcProjBwd);
  EXPECT_DOUBLE_EQ(row(p, "fc bias grad").bytes, 288);
  // A bias gradient per biased layer and micro-batch: qkv's reads dy (N x 3d) and writes
  // 3d: 2 (96 + 12) = 216 bytes at 0.5 GB/s = 432 ns each.
  const KernelCost& qkv_bias = row(p, "qkv bias grad");
  EXPECT_EQ(qkv_bias.calls, 3);
  EXPECT_DOUBLE_EQ(qkv_bias.bytes, 216);
  EXPECT_DOUBLE_EQ(qkv_bias.time_s, 3 * 432e-9);
  EXPECT_EQ(qkv_bias.region, KernelRegion::kQkvBwd);
  EXPECT_DOUBLE_EQ(row(p, "fc proj bias grad").bytes, 2 * (32 + 4));
  // The LM head's backward is two GEMMs per micro-batch; no GELU or bias-gradient kernels.
  EXPECT_EQ(row(p, "lm head bwd (dx, dW)").calls, 6);
  for (const KernelCost& k : p.kernels) EXPECT_EQ(k.name.find("lm head bias"), std::string::npos) << k.name;
  for (const KernelCost& k : p.kernels) EXPECT_EQ(k.name.find("gelu fwd"), std::string::npos) << k.name;
  // The engine's kernels (engine_kernels.h), one bucket of psi = 1000 elements, 3
  // micro-batches, a fp32 reduce dtype: the first micro-batch's gradient copied into the
  // fp32 accumulation, psi (2 + 4) = 6000 bytes -> 12 us; the second added, psi (2 + 8)
  // -> 20 us; the last folded into fp32, psi (2 + 4 + 4) -> 20 us; the statistics read
  // the fp32 gradient, 4000 bytes -> 8 us, in 2 launches (the fold); the decision and its
  // copy 2 launches.
  EXPECT_DOUBLE_EQ(row(p, "grad accumulate: copy into fp32").time_s, 12e-6);
  EXPECT_DOUBLE_EQ(row(p, "grad accumulate: add into fp32").time_s, 20e-6);
  EXPECT_DOUBLE_EQ(row(p, "grad + accumulation -> reduce dtype").time_s, 20e-6);
  EXPECT_EQ(row(p, "grad + accumulation -> reduce dtype").region, KernelRegion::kGradHandoff);
  EXPECT_DOUBLE_EQ(row(p, "grad norm statistics (slice + fold)").time_s, 8e-6);
  EXPECT_EQ(row(p, "grad norm statistics (slice + fold)").calls, 2);
  EXPECT_EQ(row(p, "step decision + its copy to the host").calls, 2);
  // AdamW once a bucket: psi (3 x 8 + 4 + 2) = 30,000 bytes -> 60 us.
  const KernelCost& adam = row(p, "adamw (per bucket, once per step)");
  EXPECT_EQ(adam.calls, 1);
  EXPECT_DOUBLE_EQ(adam.time_s, 60e-6);
  EXPECT_TRUE(adam.per_step);
  // Plain SGD keeps no moment: psi (8 + 4 + 2) = 14,000 bytes -> 28 us; with momentum one:
  // psi (2 x 8 + 4 + 2) -> 44 us (it was AdamW's 60 us whatever the optimizer).
  GptShape sgd = s;
  sgd.adamw = false, sgd.optimizer_moments = 0;
  const GpuStepPrediction plain = predict_gpt_step(sgd, g, halves());
  EXPECT_DOUBLE_EQ(row(plain, "sgd (per bucket, once per step)").time_s, 28e-6);
  sgd.optimizer_moments = 1;
  const GpuStepPrediction momentum = predict_gpt_step(sgd, g, halves());
  EXPECT_DOUBLE_EQ(row(momentum, "sgd (per bucket, once per step)").time_s, 44e-6);
  // The embedding's backward writes the whole tied table from the LM head's fp32 gradient:
  // 8 N + 2 N d e + T d e + V d (4 + e) = 64 + 128 + 32 + 192 = 416 bytes at 0.5 GB/s.
  EXPECT_DOUBLE_EQ(row(p, "embedding bwd").bytes, 416);
  // With no host issue cost the step is the sum of the rows; tokens/s and MFU follow from it.
  double sum = 0;
  int64_t launches = 0;
  for (const KernelCost& k : p.kernels) sum += k.time_s, launches += k.calls;
  EXPECT_DOUBLE_EQ(p.busy_s, sum);
  EXPECT_DOUBLE_EQ(p.launch_wait_s, 0);
  EXPECT_DOUBLE_EQ(p.step_s, sum);
  EXPECT_EQ(p.launches, launches);
  EXPECT_DOUBLE_EQ(p.tokens_per_s, 24 / p.step_s);
  // Model FLOPs: dense weights 8 x 4 (the head; the position table is a lookup) + 12 x 16
  // = 224; per sample 4 (6 x 224 + 12 x 1 x 4 x 4) = 6144; x 2 samples x 3 micro-batches
  // = 36,864.
  EXPECT_DOUBLE_EQ(p.model_flops, 36864);
  EXPECT_DOUBLE_EQ(p.mfu, 36864 / p.step_s / 1e12);
  // llm.c's count: every parameter (psi = 1000) and attention's causal half, per token
  // 6 x 1000 + 6 x 1 x 4 x 4 = 6096, x 24 tokens = 146,304.
  EXPECT_DOUBLE_EQ(p.mfu_llmc, 146304 / p.step_s / 1e12);
  // fp32 uses the fp32 peak.
  s.elem_bytes = 4;
  const GpuStepPrediction f = predict_gpt_step(s, g, halves());
  EXPECT_DOUBLE_EQ(f.mfu, f.model_flops / f.step_s / 0.5e12);
}

TEST(GpuStepModel, TinyGptWithFusedAttention) {
  // The tiny GPT above with cuDNN's fused attention: two rows replace the five of the
  // batched path (scores, softmax, P V and their backward).
  GptShape s;
  s.layers = 1, s.d_model = 4, s.heads = 2, s.vocab = 8, s.seq = 4, s.micro_batch = 2, s.accum_steps = 3;
  s.elem_bytes = 2, s.params = 1000, s.fused_attention = true;
  GpuEfficiency e = halves();
  e.fused_attention = 0.25;
  const GpuStepPrediction p = predict_gpt_step(s, round_gpu(), e);
  for (const KernelCost& k : p.kernels) {
    EXPECT_EQ(k.name.find("softmax"), std::string::npos) << k.name;
    EXPECT_EQ(k.name.find("attention S"), std::string::npos) << k.name;
    EXPECT_EQ(k.name.find("attention bwd GEMMs"), std::string::npos) << k.name;
  }
  // Forward: the causal half of S and O for 2 samples x 2 heads: 2 x (4 x 4^2 x 2) = 256
  // FLOPs (at 0.25 x 1e12: 1.024 ns); q, k, v read and o written in bf16, 2 x 4 N d = 256
  // bytes, plus the fp32 log-sum-exp of 2 x 2 x 4 queries, 64 bytes: 320 bytes at 0.5 GB/s
  // = 640 ns, memory-bound, once per layer and micro-batch.
  const KernelCost& f = row(p, "fused attention fwd (cuDNN)");
  EXPECT_EQ(f.calls, 3);
  EXPECT_DOUBLE_EQ(f.flops, 256);
  EXPECT_DOUBLE_EQ(f.bytes, 320);
  EXPECT_DOUBLE_EQ(f.time_s, 3 * 640e-9);
  EXPECT_EQ(f.bound, "memory");
  // Backward: 5 half-matmuls, 640 FLOPs; q, k, v, o, do read and dq, dk, dv written (2 x 8
  // N d = 512), the log-sum-exp (64) and the fp32 dQ accumulator read and written (2 x 4 N
  // d = 256): 832 bytes.
  const KernelCost& b = row(p, "fused attention bwd (cuDNN)");
  EXPECT_EQ(b.calls, 3);
  EXPECT_DOUBLE_EQ(b.flops, 640);
  EXPECT_DOUBLE_EQ(b.bytes, 832);
  EXPECT_DOUBLE_EQ(b.time_s, 3 * 832 / 0.5e9);
  // The trainer's FLOP count (for MFU) does not depend on the path.
  s.fused_attention = false;
  EXPECT_DOUBLE_EQ(p.model_flops, predict_gpt_step(s, round_gpu(), e).model_flops);
}

TEST(GpuStepModel, Gpt2SmallOnAnH200IsComputeBoundInItsLinears) {
  GptShape s;
  s.layers = 12, s.d_model = 768, s.heads = 12, s.vocab = 50304, s.seq = 1024, s.micro_batch = 16, s.accum_steps = 2;
  s.elem_bytes = 2, s.params = 124475904;
  const GpuSpec* h200 = find_gpu("h200");
  ASSERT_NE(h200, nullptr);
  const GpuStepPrediction p = predict_gpt_step(s, *h200);
  // MFU's FLOPs, as the trainer counts them (trainer_layers_test): 854,654,976 a token.
  EXPECT_DOUBLE_EQ(p.model_flops / (16.0 * 2 * 1024), 854654976.0);
  EXPECT_EQ(row(p, "fc linear (+gelu) fwd").bound, "compute");
  EXPECT_EQ(row(p, "causal softmax fwd").bound, "memory");
  // Batched over the 16 samples, one call per head: 12 per layer and micro-batch.
  EXPECT_EQ(row(p, "attention S = K^T Q").calls, 12 * 12 * 2);
  // An MFU below the matmul efficiency (everything else costs time) and above zero.
  EXPECT_GT(p.mfu, 0.05);
  EXPECT_LT(p.mfu, 0.80);
  const std::string table = format_gpu_step(p, *h200, GpuEfficiency{});
  EXPECT_NE(table.find("PREDICTION"), std::string::npos);
  EXPECT_NE(table.find("MFU"), std::string::npos);
  // Fused attention: 2 launches per layer and micro-batch instead of 5 x 12 + 2, and a
  // faster step (the materialised scores were memory-bound and the thin GEMMs slow).
  s.fused_attention = true;
  const GpuStepPrediction fused = predict_gpt_step(s, *h200);
  EXPECT_EQ(row(fused, "fused attention fwd (cuDNN)").calls, 12 * 2);
  EXPECT_LT(fused.step_s, p.step_s);
  EXPECT_LT(fused.launches, p.launches);
  EXPECT_GT(fused.mfu, p.mfu);
  // llm.c's count, 6 psi + 6 L T d a token (803.5M), is 0.940 of ours (docs/gpu-notes.md).
  EXPECT_NEAR(fused.mfu_llmc / fused.mfu, (6.0 * 124475904 + 6.0 * 12 * 1024 * 768) / 854654976.0, 1e-12);
  EXPECT_NEAR(fused.mfu_llmc / fused.mfu, 0.940, 0.001);
  // A forward + backward alone (gpt_gpu_bench): no optimizer row, llm.c's count kept (the
  // bench dropped psi to drop the optimizer, and its llm.c MFU read 3% for 42%).
  s.optimizer = false;
  const GpuStepPrediction alone = predict_gpt_step(s, *h200);
  const auto per_step = std::count_if(fused.kernels.begin(), fused.kernels.end(),
                                      [](const KernelCost& k) { return k.per_step; });
  // The engine's kernels at 2 micro-batches: the accumulation's copy, the fold into the
  // reduce dtype, the statistics, the decision, AdamW.
  EXPECT_EQ(per_step, 5);
  EXPECT_EQ(alone.kernels.size() + static_cast<size_t>(per_step), fused.kernels.size());
  EXPECT_LT(alone.step_s, fused.step_s);
  EXPECT_NEAR(alone.mfu_llmc / alone.mfu, 0.940, 0.001);
}

// Launch i issued at h_i = h_(i-1) + c_i starts at max(h_i, end of launch i-1): one launch
// at a time, for comparison with simulate_issue's closed form per run.
double issue_launch_by_launch(const std::vector<KernelCost>& kernels, int64_t micro_batches) {
  double h = 0, g = 0;
  auto one = [&](const KernelCost& k) {
    h += k.issue_s;
    g = std::max(g, h) + k.time_s / static_cast<double>(k.calls);
  };
  for (int64_t m = 0; m < micro_batches; ++m) {
    for (const KernelCost& k : kernels) {
      for (int64_t i = 0; !k.per_step && i < k.calls / micro_batches; ++i) one(k);
    }
  }
  for (const KernelCost& k : kernels) {
    for (int64_t i = 0; k.per_step && i < k.calls; ++i) one(k);
  }
  return g;
}

TEST(GpuStepModel, TheHostIssuingLaunchesByHand) {
  // Two micro-batches of: A, 2 launches of 10 us issued in 3 us each; B, 3 launches of 1 us
  // issued in 10 us each; then AdamW once, 2 us issued in 3 us. In microseconds:
  //   micro 1: A ends at max(0 + 20, 0 + 3 + 20, 0 + 6 + 10) = 23, host at 6;
  //            B ends at max(23 + 3, 6 + 10 + 3, 6 + 30 + 1) = 37, host at 36;
  //   micro 2: A ends at max(37 + 20, 36 + 3 + 20, 36 + 6 + 10) = 59, host at 42;
  //            B ends at max(59 + 3, 42 + 10 + 3, 42 + 30 + 1) = 73, host at 72;
  //   AdamW ends at max(73 + 2, 72 + 3 + 2, 72 + 3 + 2) = 77, host at 75.
  // The kernels are busy 2 x (20 + 3) + 2 = 48 us: the GPU waits 29 us for the host.
  std::vector<KernelCost> k = {{"A", 4, 0, 0, 40e-6, "", 3e-6, false},
                               {"B", 6, 0, 0, 6e-6, "", 10e-6, false},
                               {"adamw", 1, 0, 0, 2e-6, "", 3e-6, true}};
  double host = 0;
  EXPECT_NEAR(simulate_issue(k, 2, &host), 77e-6, 1e-12);
  EXPECT_NEAR(host, 75e-6, 1e-12);
  EXPECT_NEAR(issue_launch_by_launch(k, 2), 77e-6, 1e-12);
}

TEST(GpuStepModel, TheClosedFormPerRunEqualsLaunchByLaunch) {
  // Runs of kernels longer and shorter than their issue cost, mixed.
  std::vector<KernelCost> k;
  for (int i = 0; i < 12; ++i) {
    const int64_t per_micro = 1 + (i * 7) % 5;
    const double t = 1e-6 * (1 + (i * 13) % 17), c = 1e-6 * (1 + (i * 5) % 11);
    k.push_back({"k" + std::to_string(i), per_micro * 3, 0, 0, t * static_cast<double>(per_micro * 3), "", c, false});
  }
  k.push_back({"adamw", 2, 0, 0, 8e-6, "", 4e-6, true});
  EXPECT_NEAR(simulate_issue(k, 3, nullptr), issue_launch_by_launch(k, 3), 1e-12);
}

TEST(GpuStepModel, AGpt2StepHidesItsLaunchesAndATinyOneIsLaunchBound) {
  const GpuSpec* h200 = find_gpu("h200");
  ASSERT_NE(h200, nullptr);
  GptShape s;
  s.layers = 12, s.d_model = 768, s.heads = 12, s.vocab = 50304, s.seq = 1024, s.micro_batch = 16, s.accum_steps = 2;
  s.elem_bytes = 2, s.params = 124475904, s.fused_attention = true;
  const GpuStepPrediction p = predict_gpt_step(s, *h200);
  // Every gpt2-124m kernel outlasts its issue: the host is far ahead and the GPU waits only
  // for the step's first launch (at most a cuDNN call's issue).
  EXPECT_GT(p.host_issue_s, 0);
  EXPECT_LT(p.host_issue_s, 0.2 * p.busy_s);
  EXPECT_LE(p.launch_wait_s, GpuEfficiency{}.host_cudnn_s + 1e-12);
  EXPECT_DOUBLE_EQ(p.step_s, p.busy_s + p.launch_wait_s);
  EXPECT_NE(format_gpu_step(p, *h200, GpuEfficiency{}).find("launches are hidden"), std::string::npos);
  // A 2-layer, d = 64 model with 8 tokens per micro-batch: each kernel lasts about the 3 us
  // floor, shorter than its issue, so the host sets the pace and the step is its issue time.
  GptShape tiny;
  tiny.layers = 2, tiny.d_model = 64, tiny.heads = 2, tiny.vocab = 256, tiny.seq = 8, tiny.micro_batch = 1;
  tiny.accum_steps = 4, tiny.elem_bytes = 2, tiny.params = 120000, tiny.fused_attention = true;
  const GpuStepPrediction t = predict_gpt_step(tiny, *h200);
  EXPECT_GT(t.launch_wait_s, 0.3 * t.step_s);
  EXPECT_NEAR(t.step_s, t.host_issue_s, 0.1 * t.step_s);
  EXPECT_NE(format_gpu_step(t, *h200, GpuEfficiency{}).find("LAUNCH-BOUND"), std::string::npos);
}

TEST(GpuStepModel, GpuTable) {
  EXPECT_EQ(known_gpu_names(), "a100-40g, a100-80g, h100, h200");
  EXPECT_EQ(find_gpu("h300"), nullptr);
  EXPECT_DOUBLE_EQ(find_gpu("h200")->bf16_flops, find_gpu("h100")->bf16_flops);  // same chip
  EXPECT_GT(find_gpu("h200")->hbm_bytes_per_s, find_gpu("h100")->hbm_bytes_per_s);
  // Memory as nvidia-smi counts it (KINDS.md: 81559 MiB and 143771 MiB), not 80e9 bytes.
  EXPECT_DOUBLE_EQ(find_gpu("h100")->memory_bytes, 81559.0 * 1048576);
  EXPECT_DOUBLE_EQ(find_gpu("h200")->memory_bytes, 143771.0 * 1048576);
}

// NVIDIA's published dense (not 2:4 sparse) figures, per GPU: a sparse peak (1979 TFLOP/s
// for an H100) or a wrong bandwidth passed every test above, which compared parts only.
TEST(GpuStepModel, TheDatasheetsAreNvidiasDenseFigures) {
  struct Want {
    const char* name;
    double bf16, fp32, hbm, nvlink;
  };
  for (const Want& w : {Want{"a100-40g", 312e12, 19.5e12, 1.555e12, 300e9}, Want{"a100-80g", 312e12, 19.5e12, 2.039e12, 300e9},
                        Want{"h100", 989e12, 67e12, 3.35e12, 450e9}, Want{"h200", 989e12, 67e12, 4.8e12, 450e9}}) {
    const GpuSpec* g = find_gpu(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    EXPECT_NEAR(g->bf16_flops, w.bf16, 0.01 * w.bf16) << w.name;
    EXPECT_NEAR(g->fp32_flops, w.fp32, 0.01 * w.fp32) << w.name;
    EXPECT_NEAR(g->hbm_bytes_per_s, w.hbm, 0.01 * w.hbm) << w.name;
    EXPECT_NEAR(g->nvlink_bytes_per_s, w.nvlink, 0.01 * w.nvlink) << w.name;
  }
}

// The GEMM rows' FLOPs add up to the dense count, 6 (V d + 12 L d^2) a token, and fused
// attention's to its 2 + 5 causal-half matmuls; the DGELU epilogue (the trainer's choice
// outside deterministic mode) moves GELU's backward into fc proj's dx GEMM (the
// pre-activation read there, no kernel of its own); LayerNorm's dx reads the residual
// gradient it adds into; column sums over more than one chunk of rows launch a second
// kernel each.
TEST(GpuStepModel, Gpt2SmallsRowsAddUpToItsFlopsAndLaunches) {
  GptShape s;
  s.layers = 12, s.d_model = 768, s.heads = 12, s.vocab = 50304, s.seq = 1024, s.micro_batch = 16, s.accum_steps = 1;
  s.elem_bytes = 2, s.params = 124475904, s.fused_attention = true;
  const GpuSpec* h200 = find_gpu("h200");
  const double N = 16 * 1024.0, d = 768, L = 12, V = 50304, T = 1024;
  const GpuStepPrediction separate = predict_gpt_step(s, *h200);
  double dense = 0, attention = 0;
  for (const KernelCost& k : separate.kernels) {
    if (k.name.find("fused attention") != std::string::npos) attention += k.flops * static_cast<double>(k.calls);
    else dense += k.flops * static_cast<double>(k.calls);
  }
  EXPECT_NEAR(dense, 6 * (V * d + 12 * L * d * d) * N, 1e-9 * dense);
  EXPECT_NEAR(attention, 7 * 16 * 12 * T * T * 64 * L, 1e-9 * attention);  // (2 + 5) x B H T^2 hd, a half each
  EXPECT_DOUBLE_EQ(row(separate, "gelu bwd").bytes, 3 * 2 * N * 4 * d);
  s.dgelu_epilogue = true;
  const GpuStepPrediction fused = predict_gpt_step(s, *h200);
  for (const KernelCost& k : fused.kernels) EXPECT_NE(k.name, "gelu bwd");
  const KernelCost& dx = row(fused, "fc proj linear bwd (dx, DGELU epilogue)");
  const KernelCost& dw = row(fused, "fc proj linear bwd (dW)");
  EXPECT_EQ(dx.calls, 12);
  EXPECT_EQ(dw.calls, 12);
  EXPECT_DOUBLE_EQ(dx.bytes, dw.bytes + 2 * N * 4 * d);
  EXPECT_DOUBLE_EQ(dx.flops, 2 * N * 4 * d * d);
  EXPECT_EQ(fused.launches, separate.launches - 12);
  EXPECT_DOUBLE_EQ(row(fused, "layernorm bwd (dx, accumulated)").bytes, 4 * N * d * 2 + 8 * N);
  EXPECT_EQ(row(fused, "layernorm bwd (dx, accumulated)").calls, 24);
  EXPECT_EQ(row(fused, "layernorm bwd (dx)").calls, 1);
  EXPECT_EQ(row(fused, "layernorm bwd (sum of the chunks)").calls, 25);
  EXPECT_EQ(row(fused, "qkv bias grad (sum of the chunks)").calls, 12);
}

// A device is one of the table's parts by its exact CUDA name only: another part of the
// family has other rates and memory (an H100 PCIe was planned as the SXM part).
TEST(GpuStepModel, DevicesAreKnownByTheirExactNames) {
  EXPECT_EQ(gpu_of_device("NVIDIA H200"), find_gpu("h200"));
  EXPECT_EQ(gpu_of_device("cuda:3 (NVIDIA H100 80GB HBM3)"), find_gpu("h100"));
  EXPECT_EQ(gpu_of_device("NVIDIA A100-SXM4-40GB"), find_gpu("a100-40g"));
  EXPECT_EQ(gpu_of_device("NVIDIA A100-SXM4-80GB"), find_gpu("a100-80g"));
  for (const char* other : {"NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GH200 480GB",
                            "NVIDIA A100 80GB PCIe", "cuda:0 (NVIDIA H200 NVL)", "cpu", ""}) {
    EXPECT_EQ(gpu_of_device(other), nullptr) << other;
  }
}

}  // namespace
}  // namespace zdp::launcher
