// The layer operations the reference models are written in, on the engine's device:
// linear layers (forward and backward) as GEMMs through kernels/gemm.h, and the fused
// kernels of kernels/ (CPU loops on the trainer's thread, or CUDA launches on the
// engine's compute stream). Activations are row-major [rows, features] in the compute
// dtype; a model calls these and never branches on the device itself.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "kernels/attention_softmax.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/fused_attention.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "kernels/loss_sum.h"
#include "trainer/models/kernel_regions.h"
#include "trainer/models/upload_ring.h"
#include "zdp/config.h"
#include "zdp/device.h"

namespace zdp::trainer {

using kernels::LossSumArgs;

class Ops {
 public:
  // kInvalidArgument for a dtype the device's GEMM cannot take (the CPU's OpenBLAS takes
  // fp32 only). `deterministic` (train.deterministic): cuBLASLt's algorithm is pinned to
  // the shape (kernels::make_cublaslt_gemm's `pinned`) and cuDNN's attention backward is its
  // deterministic one; on the CPU, OpenBLAS runs on one thread in this process (its
  // results depend on the thread count). `attention` (model.attention): whether attention
  // may, must or must not run fused (use_fused_attention()).
  static StatusOr<std::unique_ptr<Ops>> create(Device& device, DType dtype, bool deterministic = false,
                                               AttentionImpl attention = AttentionImpl::kAuto);
  // Where the work goes: the engine's compute stream, which exists once the engine is
  // finalized. REQUIRES: called before any operation; `stream` outlives the Ops.
  // `host_wait`: the longest the host waits for it (a download, a workspace's release,
  // the first-use timings); longer than the collective timeout, so that a collective's own
  // error comes first (engine/src/exec.h's rule; 5 minutes was the default timeout itself).
  void set_stream(Stream& stream, std::chrono::milliseconds host_wait = std::chrono::minutes(10)) {
    stream_ = &stream;
    host_wait_ = host_wait;
  }
  // Profiling runs with profile.kernels: the models mark their kernel regions through
  // region() and end_region() (kernel_regions.h); without a timer both do nothing.
  // REQUIRES: `timer` outlives its use (nullptr detaches it).
  void set_kernel_timer(KernelTimer* timer) { timer_ = timer; }
  void region(KernelRegion r) {
    if (timer_) timer_->enter(r);
  }
  void end_region() {
    if (timer_) timer_->leave();
  }

  DType dtype() const { return dtype_; }
  size_t elem_bytes() const { return dtype_size(dtype_); }
  Device& device() { return device_; }
  bool on_gpu() const { return device_.kind() == DeviceKind::kCuda; }
  // The libraries whose kernels decide the bits of a micro-batch's gradient, beyond the
  // arithmetic zdp's own kernels fix: on the CPU, OpenBLAS's build and chosen core; on a
  // GPU, its model, cuBLASLt's and cuDNN's versions. Ranks that differ here compute other
  // bits (train.deterministic compares them across ranks: trainer/loop/same_arithmetic.h).
  // cuDNN's version only with `fused_attention` (the model runs it; else it is not loaded).
  std::string arithmetic_libraries(bool fused_attention) const;

  // A device buffer of `count` elements of `dtype` (activations: MemCategory::kOther).
  StatusOr<DeviceBuffer> alloc(int64_t count, DType dtype);
  StatusOr<DeviceBuffer> alloc_bytes(int64_t bytes);
  // What alloc_bytes(bytes) takes from the device (never less than 64 bytes).
  static int64_t allocation_bytes(int64_t bytes) { return std::max<int64_t>(bytes, 64); }
  // Host -> device and device -> host copies ordered on the compute stream. An upload
  // never waits for the GPU (GPUs: through a pinned ring, upload_ring.h; `src` may be
  // reused at once); a download waits for the copy (the host reads the result next).
  Status upload(void* dst, const void* src, size_t bytes);
  Status download(void* dst, const void* src, size_t bytes);
  // Adds the mean of `count` losses into `sink` on the compute stream (kernels/loss_sum.h).
  Status loss_sum(const float* losses, int64_t count, LossSumArgs sink);
  // The mean of `count` losses, read back (a wait; evaluation).
  StatusOr<double> mean_loss(const float* losses, int64_t count);

  // y[rows, out] = x[rows, in] w[out, in]^T + b (b may be null) [+ residual[rows, out]]:
  // the residual is added in the GEMM (GemmArgs::c_in: cuBLASLt's beta * C, read once in its
  // epilogue), in place of a kernel that reads y and the residual again and writes y.
  Status linear(const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t in, int64_t out,
                const void* residual = nullptr);
  // From dy[rows, out]: dw[out, in] = dy^T x and db[out] = column sums of dy (overwritten;
  // db skipped when null); dx[rows, in] = dy w, overwritten or accumulated (skipped when null).
  Status linear_backward(const void* x, const void* w, const void* dy, void* dx, kernels::OutputMode dx_mode, void* dw,
                         void* db, int64_t rows, int64_t in, int64_t out);
  // y[rows, out] = gelu(x w^T + b), the pre-activation kept in pre[rows, out] for backward:
  // on GPUs one GEMM with cuBLASLt's GELU_AUX_BIAS epilogue, on the CPU linear() then gelu().
  Status linear_gelu(const void* x, const void* w, const void* b, void* pre, void* y, int64_t rows, int64_t in, int64_t out);
  // Backward of linear(x = gelu(pre)): dw, db as linear_backward; dpre[rows, in] = (dy w) *
  // gelu'(pre) (overwritten) and dpre_bias[in] = its column sums, the gradient of the bias
  // of the layer that produced pre: the GEMMs, GELU's backward (on GPUs cuBLASLt's DGELU
  // epilogue where it ran faster at the shape's first use, outside deterministic mode),
  // then bias_grad (not cuBLASLt's DGELU_BGRAD and BGRADB epilogues: kernels/bias_grad.h
  // says why).
  Status linear_backward_gelu(const void* x, const void* w, const void* dy, const void* pre, void* dpre, void* dpre_bias,
                              void* dw, void* db, int64_t rows, int64_t in, int64_t out);
  // Whether a shape's first use chose cuBLASLt's DGELU epilogue (what kernels.json
  // records for the planner's fc proj rows); false before any use, on the CPU and in
  // deterministic mode.
  bool chose_dgelu_epilogue() const;
  // dw[out, in] = dy^T x alone, stored as `dw_dtype` (fp32 or the compute dtype): the tied
  // LM head keeps its share of the embedding's gradient in fp32 until the embedding adds its own.
  Status weight_grad(const void* x, const void* dy, void* dw, DType dw_dtype, int64_t rows, int64_t in, int64_t out);
  // C (m x n, column-major) = alpha op(A) op(B) + beta C in the compute dtype: the attention GEMMs.
  Status gemm(kernels::GemmArgs args) { return gemm_to(args, dtype_); }

  Status gelu(const void* x, void* y, int64_t count);
  Status gelu_backward(const void* x, const void* dy, void* dx, int64_t count);
  Status layernorm(const kernels::LayerNormArgs& a);
  // Supplies the GPU's scratch for the partial sums (a.partials) when the caller gave none.
  Status layernorm_backward(kernels::LayerNormBackwardArgs a);
  // Whether causal attention of shape `s` (s.dtype: the compute dtype) runs fused
  // (kernels/fused_attention.h), decided once per shape: kAuto: on a GPU, in bf16/fp16, in
  // a build with cuDNN and when cuDNN accepts the shape, else false (a GPU's refusal is
  // logged once); kFused: the same conditions, each missing one an error naming it;
  // kBatched: false. Takes the workspace the shape needs (MemCategory::kWorkspace).
  StatusOr<bool> use_fused_attention(const kernels::FusedAttentionShape& s);
  // REQUIRES: use_fused_attention(a.shape) returned true.
  Status fused_attention(const kernels::FusedAttentionArgs& a);
  Status fused_attention_backward(const kernels::FusedAttentionBackwardArgs& a);
  Status causal_softmax(const kernels::CausalSoftmaxArgs& a);
  Status causal_softmax_backward(const kernels::CausalSoftmaxBackwardArgs& a);
  Status cross_entropy(const kernels::CrossEntropyArgs& a);
  Status squared_error(const kernels::SquaredErrorArgs& a);
  Status embedding(const kernels::EmbeddingArgs& a);
  Status embedding_backward(const kernels::EmbeddingBackwardArgs& a);

 private:
  Ops(Device& device, DType dtype, bool deterministic, AttentionImpl attention)
      : device_(device), dtype_(dtype), deterministic_(deterministic), attention_(attention) {}
  // Why attention of `s` cannot run fused ("" when it can), after making the cuDNN
  // attention object and preparing the shape; an error other than a refusal is returned.
  StatusOr<std::string> fused_refusal(const kernels::FusedAttentionShape& s);
  cudaStream_t cuda_stream() { return stream_ ? static_cast<cudaStream_t>(stream_->native_handle()) : nullptr; }
  Status gemm_to(kernels::GemmArgs args, DType c_dtype);
  // A column of `rows` ones in the compute dtype: on the CPU db = dy^T ones is a GEMM too.
  StatusOr<const void*> ones(int64_t rows);
  // db[out] = the column sums of dy[rows, out]: kernels/bias_grad.h on GPUs, that GEMM on
  // the CPU (OpenBLAS's threads).
  Status bias_grad(const void* dy, void* db, int64_t rows, int64_t out);
  // Runs a GEMM with a fused epilogue on the GPU: true when done, false when cuBLASLt has
  // no algorithm for it (remembered per epilogue and shape; the caller then runs the
  // unfused ops).
  StatusOr<bool> try_fused(const kernels::GemmArgs& g);
  // dpre = (dy w) * gelu'(pre), the way linear_backward_gelu says (decided per shape).
  Status input_grad_through_gelu(const void* w, const void* dy, const void* pre, void* dpre, int64_t rows, int64_t in,
                                 int64_t out);
  // The mean wall time of `run` over a few runs on the stream, from an idle stream.
  StatusOr<double> seconds_per_run(const std::function<Status()>& run);
  // `floats` fp32 scratch, grown on demand and kept (the sizes repeat every micro-batch).
  StatusOr<float*> scratch(int64_t floats);
  // Frees `old` once the work queued on the stream is done (it may still read it).
  Status release_after_queued_work(DeviceBuffer& old);

  Device& device_;
  Stream* stream_ = nullptr;
  std::chrono::milliseconds host_wait_ = std::chrono::minutes(10);
  KernelTimer* timer_ = nullptr;
  DType dtype_;
  std::unique_ptr<kernels::Gemm> gemm_;
  DeviceBuffer gemm_workspace_;
  DeviceBuffer ones_;
  int64_t ones_rows_ = 0;
  std::set<std::tuple<int, int64_t, int64_t, int64_t>> unfused_;  // (epilogue, m, n, k) cuBLASLt has no plan for
  std::map<std::tuple<int64_t, int64_t, int64_t>, bool> dgelu_fused_;  // (rows, in, out): DGELU epilogue faster
  DeviceBuffer scratch_;
  int64_t scratch_floats_ = 0;
  std::unique_ptr<UploadRing> uploads_;  // GPUs: made by the first upload
  bool deterministic_;
  AttentionImpl attention_;
  std::unique_ptr<kernels::FusedAttention> fused_;  // made by the first use_fused_attention on a GPU
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int>, bool> fused_shapes_;  // decided shapes
  DeviceBuffer attention_workspace_;
  int64_t attention_workspace_bytes_ = 0;
};

}  // namespace zdp::trainer
