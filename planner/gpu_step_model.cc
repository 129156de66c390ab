// The per-kernel GPU step model (gpu_step_model.h): the GPT step's kernels with their
// FLOPs and bytes, and the table `dp-launch plan --gpu` prints.
#include "planner/gpu_step_model.h"

#include <algorithm>
#include <cstdio>

#include "kernels/common.h"
#include "planner/engine_kernels.h"

namespace zdp::launcher {

using trainer::KernelRegion;
using trainer::region_name;

double compute_efficiency(const GpuEfficiency& eff, ComputeClass c) {
  switch (c) {
    case ComputeClass::kAttentionMatmul: return eff.attention_matmul;
    case ComputeClass::kFusedAttention: return eff.fused_attention;
    case ComputeClass::kMatmul: break;
  }
  return eff.matmul;
}

double kernel_time_s(double flops, double bytes, double peak_flops, double matmul_eff, const GpuSpec& gpu,
                     const GpuEfficiency& eff, std::string* bound) {
  const double compute = flops > 0 ? flops / (peak_flops * matmul_eff) : 0.0;
  const double memory = bytes > 0 ? bytes / (gpu.hbm_bytes_per_s * eff.memory) : 0.0;
  const double t = std::max({compute, memory, eff.launch_s});
  if (bound) *bound = t == compute ? "compute" : (t == memory ? "memory" : "launch");
  return t;
}

double simulate_issue(const std::vector<KernelCost>& kernels, int64_t micro_batches, double* host_s) {
  double h = 0, g = 0;  // host and GPU clocks
  auto run = [&](const KernelCost& k, int64_t n) {
    if (n <= 0) return;
    const double t = k.time_s / static_cast<double>(k.calls), c = k.issue_s, dn = static_cast<double>(n);
    g = std::max({g + dn * t, h + c + dn * t, h + dn * c + t});
    h += dn * c;
  };
  for (int64_t m = 0; m < micro_batches; ++m) {
    for (const KernelCost& k : kernels) {
      if (!k.per_step) run(k, k.calls / micro_batches);
    }
  }
  for (const KernelCost& k : kernels) {
    if (k.per_step) run(k, k.calls);
  }
  if (host_s) *host_s = h;
  return g;
}

EngineKernelShape engine_shape(const GptShape& s) {
  EngineKernelShape e;
  e.bucket_elems = s.buckets.empty() ? std::vector<int64_t>{s.params} : s.buckets;
  e.world = s.world, e.stage = s.stage, e.accum_steps = s.accum_steps;
  e.compute_bytes = s.elem_bytes, e.reduce_bytes = s.reduce_bytes;
  e.optimizer_moments = s.optimizer_moments, e.adamw = s.adamw;
  e.sharded_accumulation = s.sharded_accumulation, e.deterministic = s.deterministic;
  return e;
}

GpuStepPrediction predict_gpt_step(const GptShape& s, const GpuSpec& gpu, const GpuEfficiency& eff) {
  GpuStepPrediction p;
  const double peak = s.elem_bytes >= 4 ? gpu.fp32_flops : gpu.bf16_flops;
  const double e = static_cast<double>(s.elem_bytes);
  const double N = static_cast<double>(s.micro_batch * s.seq), d = static_cast<double>(s.d_model);
  const double T = static_cast<double>(s.seq), V = static_cast<double>(s.vocab);
  const double hd = d / static_cast<double>(s.heads);
  const int64_t L = s.layers, K = s.accum_steps;
  // Attention: strided batches over the larger of (samples, heads), one call per index of
  // the smaller (trainer/models/attention.cc).
  const int64_t loops = std::min(s.micro_batch, s.heads), batch = std::max(s.micro_batch, s.heads);
  const double nb = static_cast<double>(batch);
  const double scores = static_cast<double>(s.micro_batch * s.heads) * T * T;  // elements of P per micro-batch

  auto add_at = [&](KernelRegion region, const std::string& name, int64_t calls_per_micro, double flops, double bytes,
                    ComputeClass compute, double issue_s) {
    KernelCost k{name, calls_per_micro * K, flops, bytes, 0.0, "", issue_s, false, region, compute};
    const double one = kernel_time_s(flops, bytes, peak, compute_efficiency(eff, compute), gpu, eff, &k.bound);
    k.time_s = one * static_cast<double>(k.calls);
    p.kernels.push_back(k);
  };
  // A GEMM (cuBLASLt) when it has FLOPs, else a plain kernel of zdp's.
  auto add_as = [&](KernelRegion region, const std::string& name, int64_t calls_per_micro, double flops, double bytes,
                    bool attention = false) {
    add_at(region, name, calls_per_micro, flops, bytes, attention ? ComputeClass::kAttentionMatmul : ComputeClass::kMatmul,
           flops > 0 ? eff.host_gemm_s : eff.host_kernel_s);
  };
  // A kernel that is a region of its own, named as the region.
  auto add = [&](KernelRegion region, int64_t calls_per_micro, double flops, double bytes, bool attention = false) {
    add_as(region, region_name(region), calls_per_micro, flops, bytes, attention);
  };
  // Fused attention computes the causal half of the scores only: per (sample, head)
  // forward S = Q K^T and O = P V, 2 T^2 hd FLOPs each over the half; backward recomputes
  // S and runs dP, dV, dQ, dK: 5 of them. It reads q, k, v (and o, do) once and writes o
  // (dq, dk, dv), plus the fp32 log-sum-exp per query, and in backward the fp32 dQ
  // accumulator cuDNN keeps in its workspace (read and written once).
  const double bh = static_cast<double>(s.micro_batch * s.heads);
  const double half_matmul = bh * T * T * hd;  // 2 T^2 hd / 2 per (sample, head)
  const double lse = 4 * bh * T;
  // A linear layer [N, in] -> [N, out]: forward, then backward's dx and dweight GEMMs (each
  // the forward's FLOPs), and with a bias its gradient (kernels/bias_grad.h: dy read once,
  // db written). `extra_fwd` elements per token more move in the forward: the fc layer's
  // GELU rides on it (GELU_AUX_BIAS: the pre-activation written too, 4d), and fc proj's
  // GEMM adds the block's residual (GemmArgs::c_in: x_mid read, d). GELU's backward is a
  // kernel of its own in fc proj's backward (below).
  auto linear = [&](KernelRegion fwd, KernelRegion bwd, const char* name, double in, double out, int64_t per_micro,
                    bool bias, double extra_fwd) {
    const double flops = 2 * N * in * out, bytes = e * (N * in + in * out + N * out);
    add(fwd, per_micro, flops, bytes + e * N * extra_fwd);
    add(bwd, 2 * per_micro, flops, bytes);
    if (bias) add_as(bwd, std::string(name) + " bias grad", per_micro, 0, e * (N * out + out));
  };

  add(KernelRegion::kEmbeddingFwd, 1, 0, 4 * N + 3 * N * d * e);
  add(KernelRegion::kLayernormFwd, L + 1, 0, 2 * N * d * e + 8 * N);
  linear(KernelRegion::kQkvFwd, KernelRegion::kQkvBwd, "qkv", d, 3 * d, L, true, 0);
  if (s.fused_attention) {
    add_at(KernelRegion::kFusedAttentionFwd, region_name(KernelRegion::kFusedAttentionFwd), L, 2 * half_matmul, e * 4 * N * d + lse, ComputeClass::kFusedAttention,
           eff.host_cudnn_s);
  } else {
    add(KernelRegion::kAttentionScoresFwd, L * loops, 2 * nb * T * T * hd, e * (2 * nb * T * hd + nb * T * T), true);
    add(KernelRegion::kSoftmaxFwd, L, 0, 2 * scores * e);
    add(KernelRegion::kAttentionValuesFwd, L * loops, 2 * nb * T * T * hd, e * (nb * T * T + 2 * nb * T * hd), true);
  }
  linear(KernelRegion::kProjFwd, KernelRegion::kProjBwd, "attn proj", d, d, L, true, 0);
  add(KernelRegion::kResidualLayernormFwd, L, 0, 4 * N * d * e + 8 * N);  // reads x, residual; writes sum, y
  linear(KernelRegion::kFcFwd, KernelRegion::kFcBwd, "fc", d, 4 * d, L, false, 4 * d);  // its bias grad: below
  linear(KernelRegion::kFcProjFwd, KernelRegion::kFcProjBwd, "fc proj", 4 * d, d, L, true, d);  // + the residual
  // In fc proj's backward (Ops::linear_backward_gelu): GELU's backward over fc's output
  // (the pre-activation and the gradient read, the gradient written in place), or, with
  // the DGELU epilogue, its dx GEMM reading the pre-activation instead (moved from the
  // linear's two backward GEMMs above into a row of its own); then fc's bias gradient.
  if (s.dgelu_epilogue) {
    const auto gemms = std::find_if(p.kernels.begin(), p.kernels.end(), [](const KernelCost& k) {
      return k.name == region_name(KernelRegion::kFcProjBwd);
    });
    gemms->calls /= 2, gemms->time_s /= 2, gemms->name = "fc proj linear bwd (dW)";
    const double flops = gemms->flops, dx_bytes = gemms->bytes + e * N * 4 * d;
    add_as(KernelRegion::kFcProjBwd, "fc proj linear bwd (dx, DGELU epilogue)", L, flops, dx_bytes);
  } else {
    add_as(KernelRegion::kFcProjBwd, "gelu bwd", L, 0, 3 * e * N * 4 * d);
  }
  add_as(KernelRegion::kFcProjBwd, "fc bias grad", L, 0, e * (N * 4 * d + 4 * d));
  linear(KernelRegion::kLmHeadFwd, KernelRegion::kLmHeadBwd, "lm head", d, V, 1, false, 0);
  add(KernelRegion::kCrossEntropy, 1, 0, 2 * N * V * e);
  if (s.fused_attention) {
    add_at(KernelRegion::kFusedAttentionBwd, region_name(KernelRegion::kFusedAttentionBwd), L, 5 * half_matmul, e * 8 * N * d + lse + 2 * 4 * N * d, ComputeClass::kFusedAttention,
           eff.host_cudnn_s);
  } else {
    add(KernelRegion::kAttentionBwdGemms, 4 * L * loops, 2 * nb * T * T * hd, e * (2 * nb * T * hd + nb * T * T),
        true);
    add(KernelRegion::kSoftmaxBwd, L, 0, 3 * scores * e);
  }
  // LayerNorm's dx: the blocks' 2 L add into the residual stream's gradient (kAccumulate:
  // dx read too), the final one writes it.
  add_as(KernelRegion::kLayernormBwd, "layernorm bwd (dx, accumulated)", 2 * L, 0, 4 * N * d * e + 8 * N);
  add_as(KernelRegion::kLayernormBwd, "layernorm bwd (dx)", 1, 0, 3 * N * d * e + 8 * N);
  add_as(KernelRegion::kLayernormBwd, "layernorm bwd (dweight, dbias)", 2 * L + 1, 0, 2 * N * d * e + 8 * N);
  // The column sums (LayerNorm's dweight and dbias, the bias gradients) run in chunks of
  // rows, and over more than one chunk a second kernel adds the chunks' fp32 partials in
  // order (kernels/cuda/column_sum.cuh): its own launches.
  const double chunks = static_cast<double>(kernels::column_sum_chunks(static_cast<int64_t>(N)));
  if (chunks > 1) {
    add_as(KernelRegion::kLayernormBwd, "layernorm bwd (sum of the chunks)", 2 * L + 1, 0,
           2 * d * (chunks * 4 + e));
    // qkv, attn proj, fc and fc proj: 3d + d + 4d + d columns a layer.
    add_as(KernelRegion::kQkvBwd, "qkv bias grad (sum of the chunks)", L, 0, 3 * d * (chunks * 4 + e));
    add_as(KernelRegion::kProjBwd, "attn proj bias grad (sum of the chunks)", L, 0, d * (chunks * 4 + e));
    add_as(KernelRegion::kFcProjBwd, "fc bias grad (sum of the chunks)", L, 0, 4 * d * (chunks * 4 + e));
    add_as(KernelRegion::kFcProjBwd, "fc proj bias grad (sum of the chunks)", L, 0, d * (chunks * 4 + e));
  }
  // kernels/embedding.h: the token index read (offsets, order), dout read for dwte's rows
  // and again for dwpe's sums over the batch, dwpe written, and the whole tied V x d table
  // written from the LM head's fp32 gradient (dwte_base read, dwte written).
  add(KernelRegion::kEmbeddingBwd, 1, 0, 8 * N + 2 * N * d * e + T * d * e + V * d * (4 + e));
  // The engine's own kernels once per step (engine_kernels.h): the gradient accumulation
  // and folds, the statistics and decision, the optimizer (its region is the profile's
  // "adamw" whichever optimizer runs).
  if (s.optimizer) {
    for (const KernelCost& k : engine_kernels(engine_shape(s), gpu, eff)) p.kernels.push_back(k);
  }

  for (const KernelCost& k : p.kernels) {
    p.busy_s += k.time_s;
    p.launches += k.calls;
  }
  // The GPU's end of the step with the host issuing the launches; never below busy_s.
  const double end = simulate_issue(p.kernels, K, &p.host_issue_s);
  p.launch_wait_s = std::max(0.0, end - p.busy_s);
  p.step_s = p.busy_s + p.launch_wait_s;
  // The trainer's count (trainer/models/gpt.cc flops_per_sample; PaLM's, appendix B): 6
  // flops per weight of the dense layers (the blocks' linears, the tied LM head; not the
  // position table, a lookup) and token, plus attention's 12 L T d per token.
  const double params = V * d + static_cast<double>(L) * 12.0 * d * d;
  const double per_sample = T * (6.0 * params + 12.0 * static_cast<double>(L) * T * d);
  p.model_flops = per_sample * static_cast<double>(s.micro_batch * K);
  const double tokens = N * static_cast<double>(K);
  p.tokens_per_s = p.step_s > 0 ? tokens / p.step_s : 0;
  p.mfu = p.step_s > 0 ? p.model_flops / p.step_s / peak : 0;
  const double llmc_per_token = 6.0 * static_cast<double>(s.params) + 6.0 * static_cast<double>(L) * T * d;
  p.mfu_llmc = p.step_s > 0 ? llmc_per_token * tokens / p.step_s / peak : 0;
  return p;
}

std::string format_gpu_step(const GpuStepPrediction& p, const GpuSpec& gpu, const GpuEfficiency& eff) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line),
                "GPU step model (a PREDICTION, nothing measured): one %s, per-kernel roofline\n"
                "  kernel time = max(FLOPs / (peak x %.0f%%, attention GEMMs %.0f%%, fused attention %.0f%%), "
                "bytes / (%.2f TB/s x %.0f%%), %.0f us)\n",
                gpu.description.c_str(), 100 * eff.matmul, 100 * eff.attention_matmul, 100 * eff.fused_attention,
                gpu.hbm_bytes_per_s / 1e12,
                100 * eff.memory, eff.launch_s * 1e6);
  out += line;
  std::snprintf(line, sizeof(line), "  %-38s %7s %10s %10s %9s %6s  %s\n", "kernel", "calls", "GFLOP/call", "MB/call",
                "ms/step", "share", "bound");
  out += line;
  for (const KernelCost& k : p.kernels) {
    std::snprintf(line, sizeof(line), "  %-38s %7lld %10.3f %10.2f %9.3f %5.1f%%  %s\n", k.name.c_str(),
                  static_cast<long long>(k.calls), k.flops / 1e9, k.bytes / 1e6, k.time_s * 1e3,
                  p.step_s > 0 ? 100 * k.time_s / p.step_s : 0.0, k.bound.c_str());
    out += line;
  }
  std::snprintf(line, sizeof(line),
                "  host issue %.2f ms per step (assumed %.0f / %.0f / %.0f us per kernel / cuBLASLt / cuDNN call, no "
                "sync inside the step): the GPU waits %.3f ms for launches, %s\n",
                p.host_issue_s * 1e3, eff.host_kernel_s * 1e6, eff.host_gemm_s * 1e6, eff.host_cudnn_s * 1e6,
                p.launch_wait_s * 1e3,
                p.launch_wait_s <= 0.01 * p.step_s ? "launches are hidden behind the GPU's work"
                                                   : "LAUNCH-BOUND: a CUDA graph of the micro-batch would save this");
  out += line;
  std::snprintf(line, sizeof(line),
                "  predicted step %.1f ms (%lld launches), %.0f tokens/s, MFU %.1f%% (model FLOPs %.3g per step, "
                "PaLM's count; %.1f%% by llm.c's 6 psi + 6 L T d per token)\n",
                p.step_s * 1e3, static_cast<long long>(p.launches), p.tokens_per_s, 100 * p.mfu, p.model_flops,
                100 * p.mfu_llmc);
  out += line;
  return out;
}

}  // namespace zdp::launcher
