// What every fused optimizer update over one slice of the flat parameter buffer takes besides
// its own state and hyper-parameters (AdamWArgs and SgdArgs derive from it): the slice, the
// fp32 master weights, the gradient, the compute-dtype output and its rounding, the step, lr,
// weight decay (default and segment table) and the gradient scale. Also the argument check
// and the gradient/output type dispatch that the CPU and CUDA launchers of every optimizer share.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common.h"

namespace zdp::kernels {

struct SliceUpdateArgs {
  // The slice: `count` elements starting at global element `global_offset` of the flat
  // buffer (the index that keys stochastic rounding and the decay table).
  int64_t count = 0;
  int64_t global_offset = 0;
  float* master = nullptr;  // fp32 master weights, updated in place
  const void* grad = nullptr;
  DType grad_dtype = DType::kF32;  // fp32, bf16 or fp16
  // The updated parameter in the compute dtype (fp32, bf16 or fp16); nullptr writes none.
  void* param_out = nullptr;
  DType param_dtype = DType::kBF16;
  Rounding rounding = Rounding::kNearest;  // kStochastic needs param_dtype bf16 or fp16
  uint64_t seed = 0;                       // stochastic rounding key (same on every rank)

  // Hyper-parameters of this step (the schedule and batch scaling are applied by optim/).
  int64_t step = 1;  // t, counted from 1
  float lr = 1e-3f;
  float weight_decay = 0.0f;  // for elements outside every segment
  // Multiplies the gradient before anything else: 1 / loss_scale x clip coefficient.
  float grad_scale = 1.0f;
  // Sorted, disjoint segments of global indices with their own weight decay (host
  // memory for the CPU launcher, device memory for the CUDA launcher); may be empty.
  // The CPU launcher checks the table; the CUDA one cannot read it, so upload a table
  // that validate_segments() accepted (optim::Optimizer's is).
  const DecaySegment* segments = nullptr;
  int64_t num_segments = 0;
};

// Checks the shared fields (ranges, dtypes, null master/grad, step >= 1, finite lr,
// weight_decay and grad_scale, the table pointer); messages start with "<op>: ".
Status check_slice_update(const SliceUpdateArgs& args, const char* op);

// Calls fn(G{}, P{}) with the storage types of the gradient and of the output (NoOutput
// when param_out is null); kInvalidArgument naming "<op> grad" or "<op> param" otherwise.
template <typename Fn>
Status dispatch_update_types(const SliceUpdateArgs& a, const char* op, Fn&& fn) {
  const std::string grad_what = std::string(op) + " grad", param_what = std::string(op) + " param";
  return dispatch_float(a.grad_dtype, grad_what.c_str(), [&](auto g) -> Status {
    if (!a.param_out) return fn(g, NoOutput{});
    return dispatch_float(a.param_dtype, param_what.c_str(), [&](auto p) -> Status { return fn(g, p); });
  });
}

}  // namespace zdp::kernels
