// The engine's own kernels of one rank's training step on a GPU, which the per-kernel
// step model (gpu_step_model.h) adds to the model's and the world-size table
// (plan_cost.h) prices per world size and stage. From the engine's code
// (engine/src/grad_reducer.cc, optimizer_state.cc, engine_step.cc), with local gradient
// accumulation (zero.accumulate = "local", or "sharded" at stages 2-3) outside
// deterministic mode:
//   - before the last micro-batch, each bucket's gradient goes into the fp32 accumulation
//     once all its parameters are ready: copied (the first micro-batch: compute dtype read,
//     fp32 written), then added (compute dtype and fp32 read, fp32 written);
//   - in the last micro-batch, each bucket's gradient plus its accumulation is rounded
//     once into the reduce dtype the reduction sends (a cast without accumulation; nothing
//     when the reduce dtype is the compute dtype and nothing accumulates). Sharded
//     accumulation casts every micro-batch's bucket instead (its adds run on the
//     communication stream, not here);
//   - the gradient statistics (sum of squares, non-finite flag) of each bucket's reduced
//     slice: 1/K of the gradient at every stage (the ranks' sums are all-reduced), a
//     second launch a bucket folding the blocks' partial sums; the step decision (one
//     thread) and its 32-byte copy to the host;
//   - the optimizer (AdamW, SGD) once per bucket over the rank's owned range: the whole
//     bucket at stage 0, its 1/K slice at stages 1-3, reading the fp32 master and moments
//     and the gradient at the reduce dtype, writing them and the compute-dtype parameters.
// Every row runs once per step (KernelCost::per_step) and is priced by the roofline rule
// one launch at a time (a bucket of 2 KiB is a launch, not 2 KiB of bandwidth).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/gpu_step_model.h"

namespace zdp::launcher {

struct EngineKernelShape {
  std::vector<int64_t> bucket_elems;  // the layout's buckets, padded (MemoryPlan::bucket_elems)
  int64_t world = 1;
  int stage = 0;
  int64_t accum_steps = 1;
  int64_t compute_bytes = 2;  // the trainer's gradients (model.dtype)
  int64_t reduce_bytes = 4;   // zero.reduce_dtype: what the optimizer reads (int8/int4 reduce in fp32)
  int64_t optimizer_moments = 2;  // fp32 tensors besides the master (buffer_plan.cc optimizer_moments)
  bool adamw = true;              // names the optimizer's row
  bool sharded_accumulation = false;
  // train.deterministic: the gradients are gathered and summed on the communication
  // stream (grad_reducer_ordered.cc), so no accumulation or fold runs here.
  bool deterministic = false;
};

// The rows, in the order the step runs them; empty without buckets.
std::vector<KernelCost> engine_kernels(const EngineKernelShape& s, const GpuSpec& gpu, const GpuEfficiency& eff);

// Their time (the rows' sum) and, of it, the optimizer's.
struct EngineKernelTimes {
  double total_s = 0;
  double optimizer_s = 0;
};
EngineKernelTimes engine_kernel_times(const EngineKernelShape& s, const GpuSpec& gpu, const GpuEfficiency& eff);

}  // namespace zdp::launcher
