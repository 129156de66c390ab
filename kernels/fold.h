// Folding a micro-batch's gradient into an fp32 accumulation (or into the reduce-dtype
// buffer the reduction sends), out = round_out(in + acc): the engine's gradient
// accumulation. Same math on the CPU and the GPU.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace zdp::kernels {

struct FoldArgs {
  const void* in = nullptr;  // the trainer's gradient (fp32, bf16 or fp16)
  DType in_dtype = DType::kF32;
  const float* acc = nullptr;  // fp32 accumulation added to it, or nullptr (a plain cast)
  void* out = nullptr;         // may alias `in` (same dtype) or `acc` (fp32), element for element
  DType out_dtype = DType::kF32;
  int64_t count = 0;
};

// One element: the sum is formed in fp32 and rounded once into the output type.
template <typename I, typename O>
ZDP_HD O fold_element(I in, float acc) {
  return from_f32<O>(to_f32(in) + acc);
}

// Runs on the calling thread.
Status fold_cpu(const FoldArgs& args);
// Enqueues on `stream`; kUnavailable in builds without CUDA.
Status fold_cuda(const FoldArgs& args, cudaStream_t stream);
// Shared argument checks.
Status check_fold_args(const FoldArgs& args);

}  // namespace zdp::kernels
