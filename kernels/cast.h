// Element-wise casts between fp32 and bf16/fp16 (round to nearest even), and scaling in
// place (e.g. unscaling gradients by 1 / loss_scale). One fp32 rounding each, so the CPU
// and the GPU give the same bits.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace zdp::kernels {

struct CastArgs {
  const void* src = nullptr;
  DType src_dtype = DType::kF32;
  void* dst = nullptr;  // must not overlap src unless dst == src and the dtypes match
  DType dst_dtype = DType::kBF16;
  int64_t count = 0;
};

struct ScaleArgs {
  void* data = nullptr;  // updated in place
  DType dtype = DType::kF32;
  int64_t count = 0;
  float scale = 1.0f;
};

// dst = cast(src): decode to fp32, round into the destination type.
template <typename S, typename D>
ZDP_HD D cast_element(S x) {
  return from_f32<D>(to_f32(x));
}

// x * scale in fp32, rounded back into T.
template <typename T>
ZDP_HD T scale_element(T x, float scale) {
  return from_f32<T>(to_f32(x) * scale);
}

// fp32 -> bf16 or fp16 rounded stochastically exactly as the optimizer's update rounds
// its output (kernels/slice_update.h, optim.rounding = "stochastic"): element k with the
// Philox bits of (seed, step, first_index + k) (kernels/philox.h). What the engine needs
// when it rounds a checkpoint's masters back into the parameters: the bits the run had
// after that optimizer step. CPU only (the engine rounds on the host: once per load).
struct StochasticCastArgs {
  const float* src = nullptr;
  void* dst = nullptr;
  DType dst_dtype = DType::kBF16;  // bf16 or fp16
  int64_t count = 0;
  uint64_t seed = 0;
  uint64_t step = 0;         // the optimizer step that wrote the parameters (t, from 1)
  uint64_t first_index = 0;  // element index (among all parameter elements) of src[0]
};

// Any of fp32, bf16, fp16 to any of them (same dtype copies).
Status cast_cpu(const CastArgs& args);
Status cast_stochastic_cpu(const StochasticCastArgs& args);
Status scale_cpu(const ScaleArgs& args);

// CUDA launchers on `stream`; kUnavailable in builds without CUDA.
Status cast_cuda(const CastArgs& args, cudaStream_t stream);
Status scale_cuda(const ScaleArgs& args, cudaStream_t stream);

// Shared argument checks of both launchers.
Status check_cast_args(const CastArgs& args);
Status check_scale_args(const ScaleArgs& args);

}  // namespace zdp::kernels
