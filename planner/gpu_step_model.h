// A per-kernel roofline PREDICTION of one GPU's training step for the GPT reference model
// (trainer/models/gpt.cc as it runs on a GPU today: cuBLASLt GEMMs with the bias + GELU
// forward epilogue and, outside deterministic mode, the DGELU backward one, bias gradients
// as column-sum kernels, attention either fused (cuDNN's flash attention: one kernel
// forward, one backward, nothing seq x seq in memory) or with the scores materialised and
// multiplied by strided-batched GEMMs, one kernel per layernorm (one with the residual add
// fused in), softmax and cross-entropy, AdamW once per step). Each kernel's time is
//   max(FLOPs / (peak x matmul efficiency), bytes / (HBM bandwidth x memory efficiency),
//       the minimum time of one launch)
// summed over the step, on one GPU, plus the time the GPU waits for the host to issue the
// launches: the host issues each kernel in turn at an assumed cost per call (a plain
// kernel, a cuBLASLt matmul, a cuDNN graph), runs ahead of the GPU with no sync inside the
// step, and a kernel starts when both it has been issued and the previous one has ended.
// Communication is left to plan_cost.h. Pure arithmetic, nothing is measured
// (gpu_step_model_test checks it against hand-computed numbers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/internal/gpu_datasheets.h"
#include "trainer/models/kernel_regions.h"

namespace zdp::launcher {

// The GPU table lives with the devices (runtime/internal/gpu_datasheets.h): dp-train's
// MFU reads the same peaks.
using zdp::find_gpu;
using zdp::GpuSpec;
using zdp::known_gpu_names;

// What fraction of the datasheet each kind of work reaches; the defaults are assumptions
// stated in gpu_step_model.cc (and replaced by a lent GPU's profile when one exists).
// The defaults are what dp-train's gpt2-124m reached on an H200 (stop 26: `dp-launch plan
// --from-profile` of the GPU check's profiled run, the efficiencies it implies), so the
// plan of that config predicts the step it measured; for other models and GPUs they are
// the best figures at hand. A large square GEMM alone reaches 80% (788 TFLOP/s, 8192^3).
struct GpuEfficiency {
  double matmul = 0.666;           // all of gpt2-124m's GEMMs together: 42-82% by shape
  double attention_matmul = 0.50;  // the attention GEMMs (k or m = head_dim 64, thin): assumed, not profiled
  // cuDNN's fused causal attention, of the FLOPs it executes (the causal half): forward
  // 26%, backward 21% of the bf16 peak at head_dim 64.
  double fused_attention = 0.224;
  double memory = 0.416;  // zdp's memory-bound kernels together: residual add 76% of 4.8 TB/s, cross-entropy 26%
  double launch_s = 3e-6;        // the least time one kernel takes on the GPU
  // The host's time to issue one call (the CPU side only). Assumptions, of the order
  // NVIDIA gives for a launch through the runtime API (a few microseconds; the CUDA Graphs
  // material quotes 2-5 us) and above it for the libraries, which check their arguments and
  // look up a cached plan before launching: a cuBLASLt matmul with a cached heuristic, a
  // cuDNN frontend graph's execute. A lent GPU's profile replaces them.
  double host_kernel_s = 3e-6;
  double host_gemm_s = 8e-6;
  double host_cudnn_s = 15e-6;
};

// Which efficiency a kernel's FLOPs run at (GpuEfficiency's matmul, attention_matmul or
// fused_attention); its bytes always run at `memory`.
enum class ComputeClass : int { kMatmul = 0, kAttentionMatmul, kFusedAttention };
double compute_efficiency(const GpuEfficiency& eff, ComputeClass c);

struct GptShape {
  int64_t layers = 0, d_model = 0, heads = 0, vocab = 0, seq = 0;
  int64_t micro_batch = 1, accum_steps = 1;
  int64_t elem_bytes = 2;  // 2 for bf16/fp16, 4 for fp32 (then fp32_flops is the peak)
  int64_t params = 0;      // psi: the optimizer's traffic, and llm.c's MFU count (6 psi a token)
  bool optimizer = true;   // false: no optimizer step (a forward + backward timed alone)
  // fp32 state tensors besides the master: 2 for AdamW (m, v), 1 for SGD with momentum, 0
  // without (engine/src/buffer_plan.cc optimizer_moments).
  int64_t optimizer_moments = 2;
  bool adamw = true;  // names the optimizer's row
  bool fused_attention = false;  // cuDNN's fused attention (trainer: Ops::use_fused_attention)
  // fc proj's dx GEMM applies GELU's derivative in its epilogue (cuBLASLt's DGELU, the
  // pre-activation read) instead of a GELU backward kernel after it: what the trainer
  // times against the kernel at first use (Ops::input_grad_through_gelu) and took on a
  // lent H200 (docs/gpu-notes.md); never in deterministic mode.
  bool dgelu_epilogue = false;
  // The engine's kernels (engine_kernels.h): the layout's buckets (empty: one bucket of
  // `params`), the rank's world and stage, the reduce dtype's bytes, and sharded
  // accumulation (zero.accumulate = "sharded" at stages 2-3).
  std::vector<int64_t> buckets;
  int64_t world = 1;
  int stage = 0;
  int64_t reduce_bytes = 4;
  bool sharded_accumulation = false;
  bool deterministic = false;  // train.deterministic: the folds run on the communication stream
};
// The trainer's rule (Ops::input_grad_through_gelu): not in deterministic mode, and the
// epilogue needs fc's width (4 d) a multiple of 8.
inline bool plans_dgelu_epilogue(bool deterministic, int64_t d_model) { return !deterministic && (4 * d_model) % 8 == 0; }

// One kind of kernel over the whole step: `calls` launches of the same cost.
struct KernelCost {
  std::string name;
  int64_t calls = 0;
  double flops = 0;  // per call
  double bytes = 0;  // per call, read + written
  double time_s = 0; // all calls
  std::string bound; // "compute", "memory" or "launch"
  double issue_s = 0;      // the host's time to issue one call
  bool per_step = false;   // runs once per step (after the micro-batches), not per micro-batch
  // The trainer's region that runs it (trainer/models/kernel_regions.h): what a profile
  // with profile.kernels measured for it (planner/profile_compare.h).
  trainer::KernelRegion region = trainer::KernelRegion::kAdamW;
  ComputeClass compute = ComputeClass::kMatmul;
};

struct GpuStepPrediction {
  std::vector<KernelCost> kernels;  // in the order the step runs them
  double busy_s = 0;        // the kernels' times summed
  double host_issue_s = 0;  // the host's time to issue every launch of the step
  double launch_wait_s = 0; // time the GPU waits for the host's next launch (simulate_issue)
  double step_s = 0;        // busy_s + launch_wait_s
  double model_flops = 0;  // the trainer's count (6 psi + attention) per step, for MFU
  double tokens_per_s = 0;
  double mfu = 0;          // model_flops / step_s / the dtype's peak
  // The same step by llm.c's count (train_gpt2.cu gpt2_estimate_mfu): 6 flops per
  // parameter (all psi) and token plus attention's 6 L T d (the causal half), 6% below the
  // trainer's (PaLM's) count for gpt2-124m: what llm.c's MFU figures compare with.
  double mfu_llmc = 0;
  int64_t launches = 0;
};

// The time of one kernel from its FLOPs and bytes (the rule above); `*bound` names the
// term that won. `matmul_eff` is the efficiency that applies to its FLOPs.
double kernel_time_s(double flops, double bytes, double peak_flops, double matmul_eff, const GpuSpec& gpu,
                     const GpuEfficiency& eff, std::string* bound);

// The GPU's end time of the step when the host issues `kernels` (the per-micro-batch ones
// `micro_batches` times in order, then the per-step ones) while the GPU runs them: launch i
// is issued at host time h_i = h_(i-1) + its issue cost, and starts at max(h_i, the end of
// launch i-1). For a run of n equal kernels (time t, issue cost c) from host clock h and GPU
// clock g this is max(g + n t, h + c + n t, h + n c + t). The step starts idle (the
// previous step's loss read-back synchronised the host with the GPU).
double simulate_issue(const std::vector<KernelCost>& kernels, int64_t micro_batches, double* host_s);

GpuStepPrediction predict_gpt_step(const GptShape& shape, const GpuSpec& gpu, const GpuEfficiency& eff = {});

struct EngineKernelShape;
// The engine's side of `shape` (engine_kernels.h).
EngineKernelShape engine_shape(const GptShape& shape);

// The table `dp-launch plan --gpu` prints: one line per kernel kind, its share of the step,
// then step time, tokens/s and MFU, headed as a prediction.
std::string format_gpu_step(const GpuStepPrediction& p, const GpuSpec& gpu, const GpuEfficiency& eff);

}  // namespace zdp::launcher
