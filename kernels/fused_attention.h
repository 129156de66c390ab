// Causal self-attention fused into one kernel per pass (flash attention): cuDNN's fused
// scaled-dot-product attention, driven through its header-only C++ frontend. Nothing of
// size seq x seq is written: the forward keeps, per (sample, head, query), the log-sum-exp
// of its scaled scores (fp32 "stats"), from which the backward recomputes the
// probabilities. The layout is the one trainer/models/attention.h documents:
//   qkv  [batch x seq, 3 d] (row-major): q, k, v of head h at columns h hd, d + h hd, 2d + h hd
//   out  [batch x seq, d]: head h at columns h hd
//   stats [batch, heads, seq] fp32
// with d = heads x head_dim, scale 1/sqrt(head_dim) and the causal (top-left) mask: query
// i sees keys 0..i. cuDNN reads q, k, v straight out of qkv through strides and writes
// dq, dk, dv into dqkv the same way (no permute kernels).
//
// bf16 and fp16 only (cuDNN's fused attention has no fp32 engine), on the GPU only: the
// batched-GEMM path of trainer/models/attention.cc is the fallback and the CPU twin of
// the batched path the reference (tests/gpu/fused_attention_gpu_test.cc compares all three).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common.h"

namespace zdp::kernels {

struct FusedAttentionShape {
  int64_t batch = 0, seq = 0, heads = 0, head_dim = 0;
  DType dtype = DType::kBF16;
};

struct FusedAttentionArgs {
  FusedAttentionShape shape;
  float scale = 1.0f;            // 1 / sqrt(head_dim)
  const void* qkv = nullptr;
  void* out = nullptr;
  float* stats = nullptr;        // written: batch x heads x seq
};

struct FusedAttentionBackwardArgs {
  FusedAttentionShape shape;
  float scale = 1.0f;
  const void* qkv = nullptr;
  const void* out = nullptr;     // the forward's output
  const void* dout = nullptr;    // [batch x seq, d]
  const float* stats = nullptr;  // the forward's
  void* dqkv = nullptr;          // [batch x seq, 3 d], every element overwritten
};

// "fused attention bf16 batch 16 x seq 1024 x 12 heads x hd 64": names a shape in errors.
std::string describe(const FusedAttentionShape& s);
// kInvalidArgument for a non-positive dimension, an fp32 dtype or a shape whose element
// count overflows the int64 strides cuDNN takes (2^62); names the field.
Status check_fused_attention_shape(const FusedAttentionShape& s);

// The device workspace cuDNN's graphs of `s` are expected to take (what prepare() will
// return, estimated: the planner and the profile's planned memory count it before any GPU
// is touched). The backward's larger need decides: its fp32 softmax sums, plus either the
// fp32 dQ accumulator (batch x heads x seq x head_dim), or, deterministic, the bf16 dP
// scratch of cuDNN 9's deterministic engine (batch x heads x seq x seq, each seq rounded
// up to 64: cudnn-frontend 1.32, scaled_dot_product_flash_attention.h, "use_dp_workspace").
int64_t fused_attention_workspace_estimate(const FusedAttentionShape& s, bool deterministic);

// Whether this build has the fused path (CUDA, cuDNN 9's headers and the cudnn-frontend
// headers at configure time). A machine may still lack libcudnn (make_cudnn_attention)
// and cuDNN refuse a shape (prepare()).
bool fused_attention_built();

class FusedAttention {
 public:
  virtual ~FusedAttention() = default;
  // Builds the forward and backward graphs of `s` (cached: a shape is built once; the
  // first build of a shape takes cuDNN ~0.1-1 s) and returns the workspace bytes the
  // larger of them needs. kUnavailable when cuDNN has no engine for the shape on this GPU
  // (the caller falls back to the batched path); another code is an error.
  virtual StatusOr<int64_t> prepare(const FusedAttentionShape& s) = 0;
  // Enqueued on `stream`; prepare()s the shape first if needed. `workspace` holds at
  // least prepare()'s bytes (device memory the caller owns; null when it needs none).
  virtual Status forward(const FusedAttentionArgs& a, void* workspace, int64_t workspace_bytes, cudaStream_t stream) = 0;
  virtual Status backward(const FusedAttentionBackwardArgs& a, void* workspace, int64_t workspace_bytes,
                          cudaStream_t stream) = 0;
};

// cuDNN's execution plans for one shape's forward and backward graphs, every one that
// builds (the heuristics' lists, mode A then fallback), over the buffers given at creation:
// a tuning aid, for bench/fused_attention_gpu_bench to time each.
class FusedAttentionPlans {
 public:
  struct Plan {
    bool backward = false;
    int64_t index = 0;      // in its graph's list of plans
    std::string name;       // cuDNN's engine and knobs
    int64_t workspace = 0;  // bytes it needs
    bool heuristic = false; // the plan FusedAttention runs: the heuristics' first that builds
  };
  virtual ~FusedAttentionPlans() = default;
  virtual const std::vector<Plan>& plans() const = 0;
  // Enqueues `plan` on `stream`; `workspace` holds at least plan.workspace bytes.
  virtual Status run(const Plan& plan, void* workspace, cudaStream_t stream) = 0;
};
// kUnavailable in builds without the fused path, where cuDNN cannot be loaded or where it
// refuses the shape; kInvalidArgument when the two arguments' shapes differ.
StatusOr<std::unique_ptr<FusedAttentionPlans>> make_cudnn_attention_plans(const FusedAttentionArgs& forward,
                                                                          const FusedAttentionBackwardArgs& backward,
                                                                          bool deterministic);

// cuDNN on the current CUDA device (one cudnnHandle_t; not thread-safe: one per stream or
// thread). `deterministic` (train.deterministic): the backward runs cuDNN's deterministic
// algorithm (no atomics: the same bits every run on one GPU kind and cuDNN version).
// kUnavailable in builds without the fused path (fused_attention_built() false), naming why.
StatusOr<std::unique_ptr<FusedAttention>> make_cudnn_attention(bool deterministic);
// "cuDNN 91400" when libcudnn loads; empty when it does not or the build has no fused path.
std::string cudnn_library_version();
// Names this build's CUDA runtime for cuDNN's frontend shim (CUDNN_FRONTEND_CUDART_LIB_NAME,
// "libcudart.so.13"; a value already set stands), which would take libcudart.so.12 over .13
// when both are on the library path. Call while the process runs one thread (setenv may
// move the environment under another thread's getenv): zdp::init does, before its threads;
// the first cuDNN use calls it too, for programs without zdp::init. No-op without the
// fused path. Set at static initialisation, it reached every program dp-launch started.
void prepare_cudnn_environment();

}  // namespace zdp::kernels
