// A micro-batch's mean loss added into a running double where the losses are (device
// memory on CUDA), so that a trainer never reads a loss back inside a step:
//   *sum = (first ? 0 : *sum) + (losses[0] + ... + losses[count - 1]) / count / divide_by
// (dp-train: divide_by = accum_steps, so *sum ends the step as the mean over its
// micro-batches), and with `rounded`, *rounded = (float)*sum afterwards (what the last
// micro-batch hands to the fp32 all-reduce over ranks). The host reads the result when
// it logs, from memory written earlier.
//
// Summation order: the CPU adds the losses in index order in double (the order dp-train
// has always used, so CPU runs keep their bits); the GPU adds them in one block, each
// thread a strided partial in double, then the partials folded by halving: deterministic,
// but a different order, so a GPU loss differs from the CPU's by rounding: for these sums
// of positive terms at most ~(n + n/256 + 14) x 2^-53 relative (tests/gpu/
// small_kernels_gpu_test.cc), in practice often not at all. The loss is only reported,
// never trained on.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace zdp::kernels {

struct LossSumArgs {
  const float* losses = nullptr;  // one per row (cross-entropy per token, squared error per sample)
  int64_t count = 0;              // >= 1
  double divide_by = 1.0;         // > 0
  double* sum = nullptr;          // updated in place
  bool first = false;             // the step's first micro-batch: *sum starts from 0
  float* rounded = nullptr;       // optional: receives (float)*sum
};

Status loss_sum_cpu(const LossSumArgs& args);
// Enqueues the sum on `stream`. kUnavailable in builds without CUDA.
Status loss_sum_cuda(const LossSumArgs& args, cudaStream_t stream);

}  // namespace zdp::kernels
