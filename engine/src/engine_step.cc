// step(): wait for the reductions, the global gradient norm (sum of squares of the owned
// slices, one all-reduce), the skip decision on a non-finite gradient anywhere, the fused
// optimizer over the owned slices with unscaling and clipping folded into its gradient
// scale, and the per-bucket parameter all-gathers of stages 1-2.
#include <cmath>

#include "engine/src/engine_impl.h"
#include "zdp/log.h"

namespace zdp {
namespace {

// Where step() stands, for errors: "rank 1: step 12".
std::string step_label(const std::string& who, int64_t step) { return who + ": step " + std::to_string(step); }

}  // namespace

StatusOr<StepStats> Engine::Impl::step() {
  if (!finalized) return invalid("step(): before finalize()");
  ZDP_RETURN_IF_ERROR(failure);
  const std::string where = step_label(who, steps + 1);
  for (size_t li = 0; li < scope_depth.size(); ++li) {
    if (scope_depth[li] > 0) {
      return invalid("step(): inside a scope of layer group " + std::to_string(layer_ids[li]) + " (end it first)");
    }
  }
  if (micro != opt.accum_steps) {
    std::string missing;
    for (size_t p = 0; p < ready.size() && missing.size() < 200; ++p) {
      if (!ready[p]) missing += (missing.empty() ? "" : ", ") + param_label(static_cast<int>(p));
    }
    return invalid("step(): after " + std::to_string(micro) + " of " + std::to_string(opt.accum_steps) +
                   " micro-batches" + (ready_count > 0 ? "; not marked ready in the current one: " + missing : ""));
  }
  stamp(TimelineEvent::Kind::kStepBegin);
  if (!opt.overlap) ZDP_RETURN_IF_ERROR(launch_ready_buckets());

  // 1. The reduced gradients, and their statistics over this rank's slices. The sums of
  // all ranks and micro-batches are averaged (and fp16's loss scale undone) through the
  // check's scale, so the all-reduced statistics describe the gradient of the global batch.
  const double inv_scale = 1.0 / (static_cast<double>(world) * static_cast<double>(opt.accum_steps) *
                                  (scaler ? scaler->scale() : 1.0));
  // The waits come first, so that the timeline separates them from the statistics (bucket
  // 0, waited for first, is the last one the backward order reduces anyway).
  auto* stats_dev = stats.as<kernels::GradStats>();
  for (int b = 0; b < num_buckets(); ++b) {
    Status s = exec->compute_after(*buckets[static_cast<size_t>(b)].reduced,
                                   where + ": reduction of bucket " + std::to_string(b));
    if (!s.ok()) return fail(s);
  }
  stamp(TimelineEvent::Kind::kReductionsDone);
  for (int b = 0; b < num_buckets(); ++b) {
    kernels::GradCheckArgs check{reduced_slice(b), reduced_dtype(), bucket(b).slice_size(), static_cast<float>(inv_scale),
                                 stats_dev + b};
    ZDP_RETURN_IF_ERROR(fail(exec->grad_check(check, check_workspace.data(), check_workspace.bytes())));
  }
  ZDP_RETURN_IF_ERROR(fail(exec->comm_after_compute()));
  const int64_t stats_bytes = 2 * num_buckets() * static_cast<int64_t>(sizeof(float));
  trace(TimelineEvent::Kind::kReduceStart, -1, CollectiveOp::kAllReduce, stats_bytes);
  ZDP_RETURN_IF_ERROR(fail(comm.all_reduce(stats_dev, stats_dev, 2 * num_buckets(), DType::kF32, ReduceOp::kSum,
                                           exec->comm(), -1)));
  trace(TimelineEvent::Kind::kReduceEnd, -1, CollectiveOp::kAllReduce, stats_bytes);
  ZDP_RETURN_IF_ERROR(fail(exec->synchronize(where + ": gradient norm")));
  std::vector<kernels::GradStats> host(static_cast<size_t>(num_buckets()));
  ZDP_RETURN_IF_ERROR(fail(device.memcpy(host.data(), stats_dev, host.size() * sizeof(kernels::GradStats))));
  double sum_sq = 0.0;
  float nonfinite = 0.0f;
  for (const kernels::GradStats& g : host) {  // bucket order: the same sum on every rank
    sum_sq += g.sum_sq;
    nonfinite += g.nonfinite;
  }
  const optim::GradScaleDecision decision =
      optim::decide_grad_scale(kernels::GradStats{static_cast<float>(sum_sq), nonfinite}, 1.0, opt.optim.grad_clip);
  stamp(TimelineEvent::Kind::kNormDone);

  StepStats out;
  out.grad_norm = decision.grad_norm;
  out.clip_coef = decision.clip_coef;
  if (decision.action == optim::StepAction::kSkipNonFinite) {
    // Every rank saw the same all-reduced flag, so every rank skips this step.
    if (scaler) {
      scaler->update(decision.action);
    } else {
      ZDP_LOG(kWarn) << where << ": non-finite gradient without fp16 loss scaling; step skipped";
    }
    reset_step_state();
    stamp(TimelineEvent::Kind::kOptimizerDone);
    stamp(TimelineEvent::Kind::kStepEnd);
    ++calls;
    out.step = steps;
    out.skipped = true;
    out.loss_scale = scaler ? scaler->scale() : 1.0;
    return out;
  }

  // 2. The fused optimizer over the owned ranges, each bucket's all-gather right after
  // its update (stages 1-2), so the gathers overlap the remaining updates.
  const int64_t t = steps + 1;
  const float grad_scale = static_cast<float>(decision.clip_coef * inv_scale);
  for (int b = 0; b < num_buckets(); ++b) {
    const OwnedRange o = owned(b);
    optim::SliceState s;
    s.count = o.count;
    s.global_offset = o.flat;
    s.master = master.as<float>() + o.state;
    // Null where the optimizer keeps no such state (plan_buffers(): SGD has no v).
    s.m = exp_avg.empty() ? nullptr : exp_avg.as<float>() + o.state;
    s.v = exp_avg_sq.empty() ? nullptr : exp_avg_sq.as<float>() + o.state;
    s.grad = reduced_grad(o.flat, o.state);
    s.grad_dtype = reduced_dtype();
    s.param_out = opt.stage < 3 ? elem_ptr(params_full.data(), o.flat, cdt()) : elem_ptr(params_shard.data(), o.state, cdt());
    s.param_dtype = cdt();
    Status u = optimizer->update(device.kind(), s, t, grad_scale, decay_table.as<kernels::DecaySegment>(),
                                 exec->compute_handle());
    if (!u.ok()) return fail(u.with_context(where + ": optimizer update of bucket " + std::to_string(b)));
    if (opt.stage == 1 || opt.stage == 2) {
      BucketState& st = buckets[static_cast<size_t>(b)];
      ZDP_RETURN_IF_ERROR(fail(exec->comm_after_compute()));
      const int64_t bytes = bucket(b).size * static_cast<int64_t>(dtype_size(cdt()));
      trace(TimelineEvent::Kind::kGatherStart, b, CollectiveOp::kAllGather, bytes);
      ZDP_RETURN_IF_ERROR(fail(comm.all_gather(s.param_out, elem_ptr(params_full.data(), bucket(b).begin, cdt()),
                                               o.count, cdt(), exec->comm(), b)));
      ZDP_RETURN_IF_ERROR(fail(exec->comm().record(*st.gathered)));
      trace(TimelineEvent::Kind::kGatherEnd, b, CollectiveOp::kAllGather, bytes);
      st.gather_pending = true;
    }
  }
  stamp(TimelineEvent::Kind::kOptimizerDone);
  steps = t;
  if (scaler) scaler->update(decision.action);
  if (opt.stage == 3) invalidate_gathered();
  if (!opt.overlap_param_gather) {
    // The next forward may read any parameter: order it after every gather now.
    for (int b = 0; b < num_buckets(); ++b) {
      BucketState& st = buckets[static_cast<size_t>(b)];
      if (!st.gather_pending) continue;
      ZDP_RETURN_IF_ERROR(fail(exec->compute_after(*st.gathered, where + ": all-gather of bucket " + std::to_string(b))));
      st.gather_pending = false;
    }
  }
  stamp(TimelineEvent::Kind::kStepEnd);
  ++calls;  // the stage-3 prefetch below serves the next iteration
  if (opt.overlap_param_gather && opt.stage == 3) ZDP_RETURN_IF_ERROR(fail(prefetch_after_step()));
  reset_step_state();
  out.step = steps;
  out.lr = optimizer->lr_at_step(t);
  out.loss_scale = scaler ? scaler->scale() : 1.0;
  return out;
}

}  // namespace zdp
