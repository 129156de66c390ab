// plan_memory(): the buffers finalize() will allocate (Engine::Impl::build),
// computed from the parameter list alone. It builds the engine's layout and sizes the
// buffers with the engine's own rules (buffer_plan.h), which the engine's parts use too;
// tests/multiproc/memory_plan_test.cc holds the plan to the byte against the device
// accounting of real engines.
#include "zdp/memory_plan.h"

#include <limits>

#include "engine/src/buffer_plan.h"
#include "engine/src/zero_memory.h"

namespace zdp {

int64_t ParamDecl::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    // A product past int64 (a shape no layout accepts) saturates instead of wrapping.
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

int64_t MemoryPlan::bytes(MemCategory category) const {
  switch (category) {
    case MemCategory::kParams: return states.params;
    case MemCategory::kGrads: return states.grads + states.reduce_copy + states.accum + states.error_feedback;
    case MemCategory::kOptimizer: return states.master + states.m + states.v;
    case MemCategory::kBuckets:
      return buffers.grad_staging + buffers.reduce_staging + buffers.param_gather + buffers.ordered + buffers.wire;
    case MemCategory::kWorkspace: return buffers.workspace;
    default: return 0;
  }
}

StatusOr<MemoryPlan> memory_plan_of_layout(const Layout& layout, const EngineOptions& options, DeviceKind device) {
  MemoryPlan plan;
  plan.stage = options.zero.stage;
  plan.world_size = layout.options().world_size;
  plan.psi = layout.payload_elems();
  plan.padded_elems = layout.total_elems();
  plan.shard_elems = layout.shard_elems();
  for (const Bucket& b : layout.buckets()) {
    plan.bucket_elems.push_back(b.size);
    plan.bucket_params.emplace_back(b.first_param, b.last_param);
  }
  if (options.zero.shards_params()) plan.group_elems = layer_group_elems(layout);
  ZDP_ASSIGN_OR_RETURN(
      const ZeroMemory formula,
      zero_memory_formula(plan.psi, plan.world_size, options.zero.stage,
                          static_cast<int>(dtype_size(options.compute_dtype)), optimizer_moments(options.optim)));
  plan.formula = static_cast<int64_t>(formula.total());

  const BufferSizes z = plan_buffers(layout, options, device);
  plan.states.params = z.params;
  plan.states.grads = z.grads;
  plan.states.reduce_copy = z.reduce_copy;
  plan.states.accum = z.accum;
  plan.states.master = z.master;
  plan.states.m = z.m;
  plan.states.v = z.v;
  plan.buffers.grad_staging = z.grad_staging.bytes();
  plan.buffers.reduce_staging = z.reduce_staging.bytes();
  plan.buffers.param_gather = z.param_gather.bytes();
  plan.gather_slots = z.param_gather.count;
  plan.buffers.ordered = z.ordered_gather + z.ordered_partials;
  plan.states.error_feedback = z.error_feedback;
  plan.buffers.wire = z.reduce_wire.bytes() + z.gather_wire.bytes();
  plan.buffers.workspace = z.grad_stats + z.norm_scratch;
  return plan;
}

StatusOr<MemoryPlan> plan_memory(const std::vector<ParamDecl>& params, const EngineOptions& options, int world_size,
                                 DeviceKind device) {
  ZDP_RETURN_IF_ERROR(options.validate());
  if (world_size < 1) {
    return Status(StatusCode::kInvalidArgument,
                  "plan_memory: world size " + std::to_string(world_size) + " is not >= 1");
  }
  std::vector<ParamSpec> specs;
  specs.reserve(params.size());
  for (const ParamDecl& p : params) specs.push_back(ParamSpec{p.name, p.shape, p.layer});
  StatusOr<Layout> made = make_layout(specs, engine_layout_options(options, world_size));
  if (!made.ok()) return made.status().with_context("plan_memory: layout");
  ZDP_RETURN_IF_ERROR(check_layout_for_options(*made, options).with_context("plan_memory"));
  return memory_plan_of_layout(*made, options, device);
}

}  // namespace zdp
