// A made-up GPU with round numbers and efficiencies of one half, for checking the GPU step
// model (gpu_step_model_test) and the comparison with a profile (profile_compare_test)
// against hand-computed numbers: no launch floor and no host issue cost unless a test
// sets one.
#pragma once

#include "planner/gpu_step_model.h"

namespace zdp::launcher::testing {

// 1 TFLOP/s bf16, 0.5 fp32, `hbm_bytes_per_s` of memory bandwidth.
inline GpuSpec round_gpu(double hbm_bytes_per_s) {
  GpuSpec g;
  g.name = "round", g.description = "round numbers";
  g.bf16_flops = 1e12, g.fp32_flops = 0.5e12, g.hbm_bytes_per_s = hbm_bytes_per_s;
  return g;
}

inline GpuEfficiency halves() {
  GpuEfficiency e;
  e.matmul = 0.5, e.attention_matmul = 0.25, e.memory = 0.5, e.launch_s = 0;
  e.host_kernel_s = 0, e.host_gemm_s = 0, e.host_cudnn_s = 0;
  return e;
}

}  // namespace zdp::launcher::testing
