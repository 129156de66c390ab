// cuDNN's fused causal attention on the emulated GPU (testing/simt/emulated_gpu_device.h):
// kernels/fused_attention.h's FusedAttention on the host, so that the path the GPT takes on a
// GPU with cuDNN in bf16 and fp16 runs in CI: the log-sum-exp statistics kept in place of the
// probabilities, cuDNN's workspace from the device allocator, q, k, v read out of qkv and dq,
// dk, dv written into dqkv through strides, and train.deterministic reaching cuDNN.
//
// What it follows: the cudnn-frontend's checks (node/scaled_dot_product_flash_attention.h) and
// FlashAttention-2, the algorithm cuDNN's documentation names.
//  - Refusals (kUnavailable, as the frontend's GRAPH_NOT_SUPPORTED reaches zdp): on Hopper, a
//    head dim above 256 or not a multiple of 8; seq 1 (s_q = s_kv = 1 has no backward).
//  - Forward: S = scale Q K^T in fp32 under the causal mask; per query the statistics
//    max + log(sum exp(S - max)) in fp32; P = exp(S - max) rounded to the I/O type before
//    P V; O = P V / sum, rounded.
//  - Backward: D = rowsum(dO * O) in fp32 into the workspace (the frontend's compute_dot_do_o
//    pre-pass); P recomputed from the statistics; dS = P (dP - D); dV = P^T dO,
//    dK = scale dS^T Q in key order; dQ = scale dS K through the workspace. By default dQ is an
//    fp32 accumulator that tiles of 8 keys add to in an order that changes from call to call,
//    as a GPU's atomics do, so its bits vary from run to run; deterministic, dS is kept as
//    16-bit values in the dP scratch of cuDNN's deterministic engine and summed in key order.
//    The workspace is fused_attention_workspace_estimate's (the frontend's own sizing).
// What it checks at the call, each a failure that names the tensor (on a GPU: another
// buffer's bytes, or a fault): every tensor inside one live allocation of an emulated device,
// its address and row stride 16-byte aligned (Hopper's TMA loads need both); no output sharing
// bytes with an input, nor the workspace with any tensor; the workspace at least prepare()'s.
// The work itself is queued on the stream, as cuDNN's kernels are.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/fused_attention.h"

namespace zdp::kernels {

// What simt.h renames make_cudnn_attention and fused_attention_built to in the emulated
// sources: the emulated GPU has cuDNN's fused attention (this file's).
StatusOr<std::unique_ptr<FusedAttention>> make_cudnn_attention_emu(bool deterministic);
bool fused_attention_built_emu();

}  // namespace zdp::kernels

namespace zdp::testing {

// The emulated cuDNN's graphs run since the process started: tests ask whether a path
// really went through it.
struct CudnnAttentionRuns {
  int64_t forward = 0, backward = 0;
};
CudnnAttentionRuns cudnn_attention_runs();

}  // namespace zdp::testing
