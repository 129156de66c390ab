// The step decision and the loss sum on the GPU (kernels/step_decision.h,
// kernels/loss_sum.h): each a single launch on the caller's stream, no host involvement.
#include "kernels/cuda/common.cuh"
#include "kernels/loss_sum.h"
#include "kernels/step_decision.h"

namespace zdp::kernels {

Status check_step_decision(const StepDecisionArgs& a);  // step_decision_cpu.cc
Status check_loss_sum(const LossSumArgs& a);

namespace {

// One thread: the decision reads every bucket's statistics in order (a few hundred at
// most), which no parallel split could do in the same order.
__global__ void decide_kernel(StepDecisionArgs a) { decide_step(a); }

constexpr int kLossThreads = 256;

__global__ void __launch_bounds__(kLossThreads) loss_sum_kernel(LossSumArgs a) {
  __shared__ double partial[kLossThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < a.count; i += kLossThreads) s += a.losses[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int half = kLossThreads / 2; half >= 1; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *a.sum = (a.first ? 0.0 : *a.sum) + partial[0] / static_cast<double>(a.count) / a.divide_by;
    if (a.rounded != nullptr) *a.rounded = static_cast<float>(*a.sum);
  }
}

}  // namespace

Status decide_step_cuda(const StepDecisionArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_step_decision(a));
  decide_kernel<<<1, 1, 0, stream>>>(a);
  return cuda::check_launch("decide_step_cuda");
}

Status loss_sum_cuda(const LossSumArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_loss_sum(a));
  loss_sum_kernel<<<1, kLossThreads, 0, stream>>>(a);
  return cuda::check_launch("loss_sum_cuda");
}

}  // namespace zdp::kernels
