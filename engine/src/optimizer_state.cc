// OptimizerState: the optimizer, its sharded state and the global gradient statistics.
#include "engine/src/optimizer_state.h"

#include <algorithm>

#include "zdp/checkpoint.h"
#include "zdp/log.h"

namespace zdp {
namespace {

// An error of the step's statistics, their all-reduce or its decision, named with the rank
// and step (`where`): those calls return theirs bare.
Status in_decision(const std::string& where, const Status& s) {
  return s.with_context(where + ": gradient norm and step decision");
}

// fnmatch(3) pattern matching exactly `name` (the optimizer's groups match by pattern).
std::string exact_pattern(const std::string& name) {
  std::string out;
  for (char ch : name) {
    if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<OptimizerState>> OptimizerState::create(EngineEnv& env, const EngineOptions& opt,
                                                                 const Layout& layout, const ParamRegistry& registry) {
  std::unique_ptr<OptimizerState> state(new OptimizerState(env, opt, layout));
  const OptimConfig& c = opt.optim;
  optim::OptimizerOptions o;
  o.kind = c.name;
  o.lr = c.lr;
  o.weight_decay = c.weight_decay;
  // Forced choices first (the first matching rule decides), then optim's by-name rule.
  optim::ParamGroupRule forced_off{"no_decay (forced)", {}, 0.0};
  optim::ParamGroupRule forced_on{"decay (forced)", {}, c.weight_decay};
  for (const Registration& r : registry.all()) {
    if (r.decay == Decay::kNoDecay) forced_off.patterns.push_back(exact_pattern(r.spec.name));
    if (r.decay == Decay::kDecay) forced_on.patterns.push_back(exact_pattern(r.spec.name));
  }
  if (!forced_off.patterns.empty()) o.groups.push_back(forced_off);
  if (!forced_on.patterns.empty()) o.groups.push_back(forced_on);
  o.groups.push_back(optim::no_decay_for_biases_and_norms());
  o.adamw = {c.beta1, c.beta2, c.eps};
  o.sgd.momentum = c.beta1;  // [optim] beta1 is SGD's momentum (config.h)
  o.sgd.dampening = c.dampening;
  o.sgd.kind = c.nesterov ? kernels::SgdMomentum::kNesterov : kernels::SgdMomentum::kClassic;
  o.schedule.decay = c.schedule;
  o.schedule.warmup_steps = c.warmup_steps;
  o.schedule.total_steps = opt.total_steps;
  o.schedule.final_lr_ratio = c.lr > 0 ? c.min_lr / c.lr : 0.0;  // so min_lr scales with lr
  o.lr_scaling = c.lr_scaling;
  o.global_batch = std::max<int64_t>(1, opt.global_batch);
  o.base_batch = c.base_batch > 0 ? c.base_batch : o.global_batch;
  o.seed = static_cast<uint64_t>(opt.seed);
  o.rounding = c.rounding == ParamRounding::kStochastic ? kernels::Rounding::kStochastic : kernels::Rounding::kNearest;
  // The optimizer addresses elements by their index among all parameter elements in
  // registration order (no padding): that index keys stochastic rounding and the decay
  // table, and unlike a flat offset it does not move with the world size or the stage's
  // bucket cuts, so every K and stage rounds an element alike.
  std::vector<optim::ParamExtent> extents;
  int64_t element = 0;
  for (const ParamPlacement& pl : layout.params()) {
    extents.push_back({pl.name, element, pl.numel});
    element += pl.numel;
  }
  element = 0;
  for (const Bucket& bk : layout.buckets()) {
    state->bucket_element_.push_back(element);
    element += bk.payload;
  }
  StatusOr<optim::Optimizer> made = optim::Optimizer::create(o, extents);
  if (!made.ok()) return made.status();
  state->optimizer_.emplace(std::move(*made));
  if (opt.compute_dtype == DType::kF16) {
    const LossScaleOptions& l = opt.loss_scale;
    ZDP_ASSIGN_OR_RETURN(
        optim::DynamicLossScale s,
        optim::DynamicLossScale::create({l.initial, l.growth_factor, l.backoff, l.growth_interval, l.min_scale}));
    state->scaler_.emplace(s);
  }
  return state;
}

Status OptimizerState::allocate(const BufferSizes& z) {
  ZDP_RETURN_IF_ERROR(env_.allocate(master_, z.master, MemCategory::kOptimizer, "fp32 master weights", false));
  // Empty (null) when the optimizer keeps no such state: SGD has no v, and no m without momentum.
  ZDP_RETURN_IF_ERROR(env_.allocate(exp_avg_, z.m, MemCategory::kOptimizer, "first moments", true));
  ZDP_RETURN_IF_ERROR(env_.allocate(exp_avg_sq_, z.v, MemCategory::kOptimizer, "second moments", true));
  ZDP_RETURN_IF_ERROR(env_.allocate(stats_, z.grad_stats, MemCategory::kWorkspace, "gradient statistics", true));
  if (z.norm_scratch > 0) {
    ZDP_RETURN_IF_ERROR(
        env_.allocate(check_workspace_, z.norm_scratch, MemCategory::kWorkspace, "norm scratch", false));
  }
  ZDP_ASSIGN_OR_RETURN(stats_reduced_, env_.device.create_event());
  if (env_.exec->cuda()) {
    // The step decision on the device, zeroed (no previous step was skipped), and a pinned
    // copy per step the host may not have learnt yet. With the decay table, the buffers
    // plan_buffers() leaves out: a few bytes, and the pinned ones are host memory.
    ZDP_RETURN_IF_ERROR(env_.allocate(decision_dev_, sizeof(kernels::StepDecision), MemCategory::kWorkspace,
                                      "step decision", true));
    StatusOr<DeviceBuffer> pinned = env_.device.allocate(static_cast<int64_t>(copied_.size() * sizeof(kernels::StepDecision)),
                                                         MemCategory::kWorkspace, MemSpace::kPinnedHost);
    if (!pinned.ok()) return pinned.status().with_context("pinned step decisions");
    decision_host_ = std::move(*pinned);
    for (auto& e : copied_) {
      ZDP_ASSIGN_OR_RETURN(e, env_.device.create_event());
    }
    // The one buffer plan_buffers() leaves out: it follows the optimizer's parameter groups.
    const auto& segments = optimizer_->decay_segments();
    const int64_t bytes = static_cast<int64_t>(segments.size() * sizeof(kernels::DecaySegment));
    ZDP_RETURN_IF_ERROR(
        env_.allocate(decay_table_, std::max<int64_t>(1, bytes), MemCategory::kWorkspace, "decay table", false));
    if (bytes > 0) {
      ZDP_RETURN_IF_ERROR(env_.device.memcpy(decay_table_.data(), segments.data(), static_cast<size_t>(bytes)));
    }
  }
  return Status::Ok();
}

Status OptimizerState::clear() {
  for (DeviceBuffer* b : {&master_, &exp_avg_, &exp_avg_sq_}) {
    if (!b->empty()) ZDP_RETURN_IF_ERROR(env_.exec->memset(b->data(), 0, b->bytes()));
  }
  return Status::Ok();
}

std::vector<const char*> OptimizerState::moment_suffixes() const {
  switch (optimizer_moments(opt_.optim)) {
    case 2: return {kExpAvgSuffix, kExpAvgSqSuffix};
    case 1: return {kMomentumBufferSuffix};
    default: return {};
  }
}

std::vector<OptimizerState::Moment> OptimizerState::moments() {
  std::vector<Moment> out;
  const std::vector<const char*> suffixes = moment_suffixes();
  DeviceBuffer* buffers[] = {&exp_avg_, &exp_avg_sq_};
  for (size_t i = 0; i < suffixes.size(); ++i) out.push_back({suffixes[i], buffers[i]});
  return out;
}

kernels::StepDecision* OptimizerState::decision() {
  return env_.exec->cuda() ? decision_dev_.as<kernels::StepDecision>() : &cpu_decision_;
}

Status OptimizerState::decide(const std::function<void*(int)>& reduced_slice, DType dtype, double inv_scale,
                              Timeline& timeline, const std::string& where) {
  Exec& exec = *env_.exec;
  const int buckets = static_cast<int>(layout_.buckets().size());
  if (opt_.deterministic) return decide_exact(reduced_slice, dtype, inv_scale, timeline, where);
  auto* stats_dev = stats_.as<kernels::GradStats>();
  for (int b = 0; b < buckets; ++b) {
    kernels::GradCheckArgs check{reduced_slice(b), dtype, layout_.buckets()[static_cast<size_t>(b)].slice_size(),
                                 static_cast<float>(inv_scale), stats_dev + b};
    ZDP_RETURN_IF_ERROR(in_decision(where, exec.grad_check(check, check_workspace_.data(), check_workspace_.bytes())));
  }
  ZDP_RETURN_IF_ERROR(in_decision(where, exec.comm_after_compute()));
  const int64_t stats_bytes = 2 * buckets * static_cast<int64_t>(sizeof(float));
  timeline.collective(TimelineEvent::Kind::kReduceStart, -1, CollectiveOp::kAllReduce, stats_bytes);
  ZDP_RETURN_IF_ERROR(in_decision(
      where, env_.comm.all_reduce(stats_dev, stats_dev, 2 * buckets, DType::kF32, ReduceOp::kSum, exec.comm(), -1)));
  timeline.collective(TimelineEvent::Kind::kReduceEnd, -1, CollectiveOp::kAllReduce, stats_bytes);
  ZDP_RETURN_IF_ERROR(in_decision(where, exec.comm().record(*stats_reduced_)));
  // The decision is computed where the statistics are: the compute stream waits for the
  // all-reduce (CUDA: on the GPU), and no value travels to the host and back.
  ZDP_RETURN_IF_ERROR(exec.compute_after(*stats_reduced_, where + ": gradient norm"));
  return in_decision(
      where, exec.decide(kernels::StepDecisionArgs{stats_dev, buckets, inv_scale, opt_.optim.grad_clip, decision()}));
}

Status OptimizerState::decide_exact(const std::function<void*(int)>& reduced_slice, DType dtype, double inv_scale,
                                    Timeline& timeline, const std::string& where) {
  // One exact record for all of this rank's slices; the int64 all-reduce adds the ranks'
  // records exactly, so neither the slice cut nor the ring's order shows in the sum.
  Exec& exec = *env_.exec;
  auto* record = stats_.as<kernels::ExactSumSq>();
  ZDP_RETURN_IF_ERROR(in_decision(where, exec.memset(record, 0, sizeof(kernels::ExactSumSq))));
  for (int b = 0; b < static_cast<int>(layout_.buckets().size()); ++b) {
    ZDP_RETURN_IF_ERROR(in_decision(where, exec.exact_sumsq(kernels::ExactSumSqArgs{
        reduced_slice(b), dtype, layout_.buckets()[static_cast<size_t>(b)].slice_size(),
        static_cast<float>(inv_scale), record})));
  }
  ZDP_RETURN_IF_ERROR(in_decision(where, exec.comm_after_compute()));
  const int64_t bytes = static_cast<int64_t>(sizeof(kernels::ExactSumSq));
  timeline.collective(TimelineEvent::Kind::kReduceStart, -1, CollectiveOp::kAllReduce, bytes);
  ZDP_RETURN_IF_ERROR(in_decision(where,
      env_.comm.all_reduce(record, record, kernels::kExactSumSqWords, DType::kI64, ReduceOp::kSum, exec.comm(), -1)));
  timeline.collective(TimelineEvent::Kind::kReduceEnd, -1, CollectiveOp::kAllReduce, bytes);
  ZDP_RETURN_IF_ERROR(in_decision(where, exec.comm().record(*stats_reduced_)));
  ZDP_RETURN_IF_ERROR(exec.compute_after(*stats_reduced_, where + ": gradient norm"));
  kernels::StepDecisionArgs args;
  args.exact = record;
  args.exact_records = 1;
  args.inv_scale = inv_scale;
  args.max_norm = opt_.optim.grad_clip;
  args.out = decision();
  return in_decision(where, exec.decide(args));
}

Status OptimizerState::update(int b, const OwnedRange& o, const void* grad, DType grad_dtype, void* param_out) {
  optim::SliceState s;
  s.count = o.count;
  // Padding follows a bucket's payload, so within bucket b the element index is the flat
  // offset shifted by one constant. Padding past the payload gets the next indices: its
  // values are zero and stay zero whatever they are keyed by.
  const Bucket& bk = layout_.buckets()[static_cast<size_t>(b)];
  s.global_offset = bucket_element_[static_cast<size_t>(b)] + (o.flat - bk.begin);
  s.master = master_.as<float>() + o.state;
  // Null where the optimizer keeps no such state (plan_buffers(): SGD has no v).
  s.m = exp_avg_.empty() ? nullptr : exp_avg_.as<float>() + o.state;
  s.v = exp_avg_sq_.empty() ? nullptr : exp_avg_sq_.as<float>() + o.state;
  s.grad = grad;
  s.grad_dtype = grad_dtype;
  s.param_out = param_out;
  s.param_dtype = opt_.compute_dtype;
  // The step this update takes: one after every step issued so far, unless the one step
  // not yet learnt was skipped (then alt_step; the kernel reads which from the decision).
  s.decision = decision();
  const int64_t t = steps_ + static_cast<int64_t>(pending_.size()) + 1;
  s.alt_step = steps_ + 1;
  Exec& exec = *env_.exec;
  Status u = optimizer_->update(env_.device.kind(), s, t, /*grad_scale=*/1.0f, decay_table_.as<kernels::DecaySegment>(),
                                exec.compute_handle());
  return u.ok() ? u : u.with_context("optimizer update of bucket " + std::to_string(b));
}

Status OptimizerState::issue(const std::string& where) {
  ++issued_;
  if (!env_.exec->cuda()) {  // computed inline on this thread: known now
    learn(cpu_decision_);
    return Status::Ok();
  }
  const int slot = static_cast<int>((issued_ - 1) % static_cast<int64_t>(copied_.size()));
  auto* host = decision_host_.as<kernels::StepDecision>() + slot;
  Stream& compute = env_.exec->compute();
  Status s = compute.memcpy_async(host, decision(), sizeof(kernels::StepDecision));
  if (s.ok()) s = compute.record(*copied_[static_cast<size_t>(slot)]);
  if (!s.ok()) return s.with_context(where + ": step decision copy");
  pending_.push_back(slot);
  return Status::Ok();
}

Status OptimizerState::settle(int keep, const std::string& where) {
  while (static_cast<int>(pending_.size()) > std::max(0, keep)) {
    const int slot = pending_.front();
    // Normally landed long ago (a step back): then the wait returns at once (and counts
    // as no host wait); it also reports a failure of the stream before the copy, which
    // would have skipped it.
    Status w = copied_[static_cast<size_t>(slot)]->wait(env_.timeout + std::chrono::seconds(30));
    if (!w.ok()) return w.with_context(where + ": the outcome of step " + std::to_string(steps_ + 1));
    learn(decision_host_.as<kernels::StepDecision>()[slot]);
    pending_.pop_front();
  }
  return Status::Ok();
}

void OptimizerState::learn(const kernels::StepDecision& d) {
  const optim::StepAction action = d.skip != 0 ? optim::StepAction::kSkipNonFinite : optim::StepAction::kApply;
  skips_in_a_row_ = d.skip != 0 ? skips_in_a_row_ + 1 : 0;
  if (d.skip != 0 && !scaler_) {
    // Named as the optimizer's step: skipped ones do not advance it, so after the first
    // skip it is not the trainer's step, and a run that skips every step kept printing
    // "step 4" for steps 4 to 30.
    ZDP_LOG(kWarn) << env_.who << ": non-finite gradient without fp16 loss scaling: update " << steps_ + 1
                   << " skipped (" << skips_in_a_row_ << (skips_in_a_row_ == 1 ? " step" : " steps")
                   << " in a row; the parameters stay as after update " << steps_ << ")";
  }
  if (action != optim::StepAction::kSkipNonFinite) ++steps_;
  if (scaler_) scaler_->update(action);
  last_ = StepStats{};
  last_.step = steps_;
  last_.skipped = d.skip != 0;
  last_.grad_norm = d.grad_norm;
  last_.clip_coef = d.clip_coef;
  last_.lr = d.skip != 0 ? 0.0 : lr_at_step(steps_);
  last_.loss_scale = loss_scale();
  has_last_ = true;
}

StatusOr<std::vector<float>> OptimizerState::gather_master(int p, const std::string& label) {
  const ParamPlacement& pl = layout_.params()[static_cast<size_t>(p)];
  std::vector<float> out(static_cast<size_t>(pl.numel));
  Exec& exec = *env_.exec;
  ZDP_RETURN_IF_ERROR(exec.synchronize(env_.who + ": gather_master"));
  if (!opt_.zero.shards_optimizer()) {
    ZDP_RETURN_IF_ERROR(env_.device.memcpy(out.data(), master_.as<float>() + pl.offset, out.size() * 4));
    return out;
  }
  ZDP_ASSIGN_OR_RETURN(DeviceBuffer whole,
                       env_.device.allocate(layout_.max_bucket_elems() * 4, MemCategory::kWorkspace));
  for (int b = pl.first_bucket; b <= pl.last_bucket; ++b) {
    const Bucket& bk = layout_.buckets()[static_cast<size_t>(b)];
    ZDP_RETURN_IF_ERROR(env_.comm.all_gather(master_.as<float>() + layout_.shard_offset(b), whole.data(),
                                             bk.slice_size(), DType::kF32, exec.comm(), b));
    ZDP_RETURN_IF_ERROR(exec.synchronize(env_.who + ": gather_master of " + label));
    const int64_t lo = std::max(pl.offset, bk.begin), hi = std::min(pl.offset + pl.numel, bk.end());
    ZDP_RETURN_IF_ERROR(env_.device.memcpy(out.data() + (lo - pl.offset), whole.as<float>() + (lo - bk.begin),
                                           static_cast<size_t>(hi - lo) * 4));
  }
  return out;
}

void OptimizerState::count_memory(int64_t* measured) const {
  for (const DeviceBuffer* b :
       {&master_, &exp_avg_, &exp_avg_sq_, &stats_, &check_workspace_, &decay_table_, &decision_dev_}) {
    if (!b->empty()) measured[static_cast<int>(b->category())] += b->bytes();
  }
}

}  // namespace zdp
