// plan_memory(): the buffers Engine::Impl::allocate() (engine_buffers.cc) will allocate,
// computed from the parameter list alone. The layout rules are shared with the engine
// (engine_layout_options, joins_previous_bucket); the buffer list mirrors allocate() and
// engine.h "Memory per stage", and tests/multiproc/memory_plan_test.cc holds the two to
// the byte against the device accounting of real engines.
#include <algorithm>
#include <cmath>

#include "engine_impl.h"
#include "kernels/grad_check.h"
#include "zdp/memory_plan.h"
#include "zero_memory.h"

namespace zdp {

LayoutOptions engine_layout_options(const EngineOptions& options, int world_size) {
  LayoutOptions lo;
  lo.world_size = world_size;
  lo.bucket_elems = std::max<int64_t>(
      1, std::llround(options.bucket_mb * 1024.0 * 1024.0 / static_cast<double>(dtype_size(options.compute_dtype))));
  lo.align_elems = kAlignElems;
  // Stage 3 gathers one layer group alone, so no bucket may hold two of them. Stages 2-3
  // stage the trainer's gradients per run of buckets that parameters connect; cut
  // anywhere, parameters straddling buckets would chain every bucket into one run (the
  // whole gradient, twice), so layer groups bound the runs there too.
  lo.boundary = options.stage >= 2 ? BucketBoundary::kLayerGroups : BucketBoundary::kAnywhere;
  return lo;
}

bool joins_previous_bucket(const Layout& layout, int b) {
  if (b <= 0) return false;
  const Bucket& previous = layout.buckets()[static_cast<size_t>(b - 1)];
  return layout.params()[static_cast<size_t>(previous.last_param)].last_bucket >= b;
}

int64_t ParamDecl::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t MemoryPlan::bytes(MemCategory category) const {
  switch (category) {
    case MemCategory::kParams: return params;
    case MemCategory::kGrads: return grads + reduce_copy + accum;
    case MemCategory::kOptimizer: return master + m + v;
    case MemCategory::kBuckets: return grad_staging + reduce_staging + param_gather;
    case MemCategory::kWorkspace: return workspace;
    default: return 0;
  }
}

int64_t MemoryPlan::total() const {
  return model_states() + grad_staging + reduce_staging + param_gather + workspace;
}

StatusOr<MemoryPlan> plan_memory(const std::vector<ParamDecl>& params, const EngineOptions& options, int world_size,
                                 DeviceKind device) {
  ZDP_RETURN_IF_ERROR(options.validate());
  if (world_size < 1) {
    return Status(StatusCode::kInvalidArgument, "plan_memory: world size " + std::to_string(world_size) + " is not >= 1");
  }
  std::vector<ParamSpec> specs;
  specs.reserve(params.size());
  for (const ParamDecl& p : params) specs.push_back(ParamSpec{p.name, p.shape, p.layer});
  StatusOr<Layout> made = make_layout(specs, engine_layout_options(options, world_size));
  if (!made.ok()) return made.status().with_context("plan_memory: layout");
  const Layout& layout = *made;

  MemoryPlan plan;
  plan.stage = options.stage;
  plan.world_size = world_size;
  plan.psi = layout.payload_elems();
  plan.padded_elems = layout.total_elems();
  plan.shard_elems = layout.shard_elems();
  for (const Bucket& b : layout.buckets()) plan.bucket_elems.push_back(b.size);
  ZDP_ASSIGN_OR_RETURN(const ZeroMemory formula, zero_memory_formula(plan.psi, world_size, options.stage,
                                                                     static_cast<int>(dtype_size(options.compute_dtype))));
  plan.formula = static_cast<int64_t>(formula.params + formula.grads + formula.master + formula.m + formula.v);

  // engine_buffers.cc allocate(), buffer by buffer.
  const int64_t T = layout.total_elems(), S = layout.shard_elems();
  const int64_t c = static_cast<int64_t>(dtype_size(options.compute_dtype));
  const int64_t r = static_cast<int64_t>(dtype_size(options.reduce_dtype));
  const int stage = options.stage;
  const bool cast = options.reduce_dtype != options.compute_dtype;
  plan.params = (stage < 3 ? T : S) * c;
  if (stage <= 1) {
    plan.grads = T * c;
    plan.reduce_copy = cast ? T * r : 0;
  } else {
    plan.grads = S * r;
  }
  plan.accum = options.accum_steps > 1 ? T * 4 : 0;
  const int64_t state = (stage == 0 ? T : S) * 4;
  plan.master = plan.m = plan.v = state;
  const int64_t buckets = static_cast<int64_t>(layout.buckets().size());
  plan.workspace = std::max<int64_t>(1, buckets) * static_cast<int64_t>(sizeof(kernels::GradStats));
  if (device == DeviceKind::kCuda) {
    plan.workspace += std::max<int64_t>(1, kernels::grad_check_workspace_bytes(layout.max_bucket_elems() / world_size));
  }
  if (stage >= 2) {
    int64_t largest_group = 0, group_begin = 0;
    for (int b = 0; b < static_cast<int>(buckets); ++b) {
      const Bucket& bk = layout.buckets()[static_cast<size_t>(b)];
      if (!joins_previous_bucket(layout, b)) group_begin = bk.begin;
      largest_group = std::max(largest_group, bk.end() - group_begin);
    }
    plan.grad_staging = 2 * largest_group * c;
    if (cast || options.accum_steps > 1) plan.reduce_staging = 2 * layout.max_bucket_elems() * r;
  }
  if (stage == 3) {
    int64_t largest_layer = 0;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (i > 0 && specs[i].layer == specs[i - 1].layer) continue;
      const auto [first, end] = layout.layer_buckets(specs[i].layer);
      plan.group_elems.push_back(layout.buckets()[static_cast<size_t>(end - 1)].end() -
                                 layout.buckets()[static_cast<size_t>(first)].begin);
      largest_layer = std::max(largest_layer, plan.group_elems.back());
    }
    plan.param_gather = (1 + options.prefetch_layers) * largest_layer * c;
  }
  return plan;
}

}  // namespace zdp
