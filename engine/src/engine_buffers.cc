// The layout, the optimizer and the buffers each stage keeps (engine.h lists them), the
// per-step bookkeeping, and reading the sharded fp32 masters back (gather_master).
#include <algorithm>
#include <cmath>

#include "engine/src/engine_impl.h"

namespace zdp {
namespace {

// fnmatch(3) pattern matching exactly `name` (the optimizer's groups match by pattern).
std::string exact_pattern(const std::string& name) {
  std::string out;
  for (char ch : name) {
    if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

optim::LrDecay lr_decay(LrSchedule schedule) {
  switch (schedule) {
    case LrSchedule::kCosine: return optim::LrDecay::kCosine;
    case LrSchedule::kLinear: return optim::LrDecay::kLinear;
    default: return optim::LrDecay::kConstant;
  }
}

}  // namespace

optim::LrScaling lr_scaling_of(LrScalingRule rule) {
  switch (rule) {
    case LrScalingRule::kLinear: return optim::LrScaling::kLinear;
    case LrScalingRule::kSqrt: return optim::LrScaling::kSqrt;
    default: return optim::LrScaling::kNone;
  }
}

Status Engine::Impl::build_layout() {
  std::vector<ParamSpec> specs;
  for (const Registration& r : registered) specs.push_back(r.spec);
  StatusOr<Layout> made = make_layout(specs, engine_layout_options(opt, world));
  if (!made.ok()) return made.status().with_context("layout");
  layout = std::move(*made);

  buckets.clear();
  buckets.resize(static_cast<size_t>(num_buckets()));
  groups.clear();
  for (int b = 0; b < num_buckets(); ++b) {
    const Bucket& bk = bucket(b);
    // A bucket joins the previous group when a parameter straddles the boundary.
    if (!joins_previous_bucket(layout, b)) groups.push_back(GradGroup{b, b, bk.begin, 0, 0});
    GradGroup& g = groups.back();
    g.last_bucket = b;
    g.size = bk.end() - g.begin;
    g.params = bk.last_param - bucket(g.first_bucket).first_param + 1;
    BucketState& st = buckets[static_cast<size_t>(b)];
    st.params = bk.last_param - bk.first_param + 1;
    st.group = static_cast<int>(groups.size()) - 1;
    ZDP_ASSIGN_OR_RETURN(st.reduced, device.create_event());
    ZDP_ASSIGN_OR_RETURN(st.gathered, device.create_event());
  }
  group_of_param.assign(registered.size(), 0);
  for (size_t p = 0; p < registered.size(); ++p) {
    group_of_param[p] = buckets[static_cast<size_t>(placement(static_cast<int>(p)).first_bucket)].group;
  }
  launch_order = layout.backward_bucket_order();
  layer_ids.clear();
  for (const Registration& r : registered) {
    if (layer_ids.empty() || layer_ids.back() != r.spec.layer) layer_ids.push_back(r.spec.layer);
  }
  scope_depth.assign(layer_ids.size(), 0);
  return Status::Ok();
}

Status Engine::Impl::build_optimizer() {
  const OptimConfig& c = opt.optim;
  optim::OptimizerOptions o;
  o.kind = c.name == OptimizerKind::kSgd ? optim::OptimizerKind::kSgd : optim::OptimizerKind::kAdamW;
  o.lr = c.lr;
  o.weight_decay = c.weight_decay;
  // Forced choices first (the first matching rule decides), then optim's by-name rule.
  optim::ParamGroupRule forced_off{"no_decay (forced)", {}, 0.0};
  optim::ParamGroupRule forced_on{"decay (forced)", {}, c.weight_decay};
  for (const Registration& r : registered) {
    if (r.decay == Decay::kNoDecay) forced_off.patterns.push_back(exact_pattern(r.spec.name));
    if (r.decay == Decay::kDecay) forced_on.patterns.push_back(exact_pattern(r.spec.name));
  }
  if (!forced_off.patterns.empty()) o.groups.push_back(forced_off);
  if (!forced_on.patterns.empty()) o.groups.push_back(forced_on);
  o.groups.push_back(optim::no_decay_for_biases_and_norms());
  o.adamw = {c.beta1, c.beta2, c.eps};
  o.sgd.momentum = c.beta1;  // [optim] beta1 is SGD's momentum (config.h)
  o.schedule.decay = lr_decay(c.schedule);
  o.schedule.warmup_steps = c.warmup_steps;
  o.schedule.total_steps = opt.total_steps;
  o.schedule.final_lr_ratio = c.lr > 0 ? c.min_lr / c.lr : 0.0;  // so min_lr scales with lr
  o.lr_scaling = lr_scaling_of(c.lr_scaling);
  o.global_batch = std::max<int64_t>(1, opt.global_batch);
  o.base_batch = c.base_batch > 0 ? c.base_batch : o.global_batch;
  o.seed = static_cast<uint64_t>(opt.seed);
  std::vector<optim::ParamExtent> extents;
  for (const ParamPlacement& pl : layout.params()) extents.push_back({pl.name, pl.offset, pl.numel});
  StatusOr<optim::Optimizer> made = optim::Optimizer::create(o, extents);
  if (!made.ok()) return made.status();
  optimizer.emplace(std::move(*made));
  if (cdt() == DType::kF16) {
    const LossScaleOptions& l = opt.loss_scale;
    ZDP_ASSIGN_OR_RETURN(optim::DynamicLossScale s, optim::DynamicLossScale::create(
                                                        {l.initial, l.growth_factor, l.backoff, l.growth_interval,
                                                         l.min_scale}));
    scaler.emplace(s);
  }
  return Status::Ok();
}

Status Engine::Impl::allocate() {
  // Every size comes from plan_buffers(), the rules plan_memory() reports (engine_buffer_plan.h).
  const BufferSizes z = plan_buffers(layout, opt, device.kind());
  auto alloc = [&](DeviceBuffer& buffer, int64_t bytes, MemCategory category, const char* what, bool zero) {
    StatusOr<DeviceBuffer> b = device.allocate(bytes, category);
    if (!b.ok()) return b.status().with_context(what);
    buffer = std::move(*b);
    return zero && bytes > 0 ? exec->memset(buffer.data(), 0, bytes) : Status::Ok();
  };
  if (opt.stage < 3) {
    ZDP_RETURN_IF_ERROR(alloc(params_full, z.params, MemCategory::kParams, "parameters", false));
  } else {
    ZDP_RETURN_IF_ERROR(alloc(params_shard, z.params, MemCategory::kParams, "parameter shard", false));
  }
  if (opt.stage <= 1) {
    // Zeroed once: the trainer never writes the padding, and the reductions send it.
    ZDP_RETURN_IF_ERROR(alloc(grads_full, z.grads, MemCategory::kGrads, "gradients", true));
    if (z.reduce_copy > 0) {
      ZDP_RETURN_IF_ERROR(alloc(reduce_full, z.reduce_copy, MemCategory::kGrads, "reduce buffer", true));
    }
  } else {
    ZDP_RETURN_IF_ERROR(alloc(grads_shard, z.grads, MemCategory::kGrads, "gradient shard", true));
  }
  if (z.accum > 0) ZDP_RETURN_IF_ERROR(alloc(accum, z.accum, MemCategory::kGrads, "accumulation", true));
  ZDP_RETURN_IF_ERROR(alloc(master, z.master, MemCategory::kOptimizer, "fp32 master weights", false));
  // Empty (null) when the optimizer keeps no such state: SGD has no v, and no m without momentum.
  ZDP_RETURN_IF_ERROR(alloc(exp_avg, z.m, MemCategory::kOptimizer, "first moments", true));
  ZDP_RETURN_IF_ERROR(alloc(exp_avg_sq, z.v, MemCategory::kOptimizer, "second moments", true));
  ZDP_RETURN_IF_ERROR(alloc(stats, z.grad_stats, MemCategory::kWorkspace, "gradient statistics", true));
  if (z.norm_scratch > 0) {
    ZDP_RETURN_IF_ERROR(alloc(check_workspace, z.norm_scratch, MemCategory::kWorkspace, "norm scratch", false));
  }
  if (exec->cuda()) {
    // The one buffer plan_buffers() leaves out: it follows the optimizer's parameter groups.
    const auto& segments = optimizer->decay_segments();
    const int64_t bytes = static_cast<int64_t>(segments.size() * sizeof(kernels::DecaySegment));
    ZDP_RETURN_IF_ERROR(alloc(decay_table, std::max<int64_t>(1, bytes), MemCategory::kWorkspace, "decay table", false));
    if (bytes > 0) ZDP_RETURN_IF_ERROR(device.memcpy(decay_table.data(), segments.data(), static_cast<size_t>(bytes)));
  }
  auto pool = [&](SlotPool& slots, const SlotSizes& size, const char* what) {
    if (size.count == 0) return Status::Ok();
    return slots.init(device, who + ": " + what, size.slot_bytes, size.count, MemCategory::kBuckets);
  };
  ZDP_RETURN_IF_ERROR(pool(grad_slots, z.grad_staging, "gradient staging"));
  ZDP_RETURN_IF_ERROR(pool(reduce_slots, z.reduce_staging, "reduce staging"));
  ZDP_RETURN_IF_ERROR(pool(gather_slots, z.param_gather, "gathered layers"));
  return exec->synchronize(who + ": buffer initialisation");
}

void Engine::Impl::reset_step_state() {
  ready.assign(registered.size(), 0);
  ready_count = 0;
  micro = 0;
  reset_reductions();
  for (GradGroup& g : groups) g.unfolded = g.params;
}

void Engine::Impl::reset_reductions() {
  launch_cursor = 0;
  for (BucketState& st : buckets) {
    st.pending = st.params;
    st.launched = false;
  }
  for (GradGroup& g : groups) g.unlaunched = g.last_bucket - g.first_bucket + 1;
}

StatusOr<std::vector<float>> Engine::Impl::gather_master(int p) {
  if (!finalized) return invalid("gather_master(): before finalize()");
  if (p < 0 || p >= static_cast<int>(registered.size())) return invalid("gather_master(): no parameter #" + std::to_string(p));
  const ParamPlacement& pl = placement(p);
  std::vector<float> out(static_cast<size_t>(pl.numel));
  ZDP_RETURN_IF_ERROR(exec->synchronize(who + ": gather_master"));
  if (opt.stage == 0) {
    ZDP_RETURN_IF_ERROR(device.memcpy(out.data(), master.as<float>() + pl.offset, out.size() * 4));
    return out;
  }
  ZDP_ASSIGN_OR_RETURN(DeviceBuffer whole, device.allocate(layout.max_bucket_elems() * 4, MemCategory::kWorkspace));
  for (int b = pl.first_bucket; b <= pl.last_bucket; ++b) {
    const Bucket& bk = bucket(b);
    ZDP_RETURN_IF_ERROR(comm.all_gather(master.as<float>() + layout.shard_offset(b), whole.data(), bk.slice_size(),
                                        DType::kF32, exec->comm(), b));
    ZDP_RETURN_IF_ERROR(exec->synchronize(who + ": gather_master of " + param_label(p)));
    const int64_t lo = std::max(pl.offset, bk.begin), hi = std::min(pl.offset + pl.numel, bk.end());
    ZDP_RETURN_IF_ERROR(device.memcpy(out.data() + (lo - pl.offset), whole.as<float>() + (lo - bk.begin),
                                      static_cast<size_t>(hi - lo) * 4));
  }
  return out;
}

}  // namespace zdp
