// step(): wait for the reductions, the global gradient norm (sum of squares of the owned
// slices, one all-reduce), the skip decision on a non-finite gradient anywhere, the fused
// optimizer over the owned slices with unscaling and clipping folded into its gradient
// scale, and the per-bucket parameter all-gathers of stages 1-2.
#include "engine/src/engine_impl.h"
#include "zdp/log.h"

namespace zdp {

StatusOr<StepStats> Engine::Impl::step() {
  if (!finalized) return env.invalid("step(): before finalize()");
  ZDP_RETURN_IF_ERROR(env.failure.status());
  auto fail = [this](const Status& s) { return env.failure.fail(s); };
  const std::string where = env.who + ": step " + std::to_string(state->steps() + 1);
  const int open = params->open_scope();
  if (open >= 0)
    return env.invalid("step(): inside a scope of layer group " + std::to_string(open) + " (end it first)");
  if (grads->micro() != opt.accum_steps) {
    return env.invalid("step(): after " + std::to_string(grads->micro()) + " of " + std::to_string(opt.accum_steps) +
                       " micro-batches" +
                       (grads->ready_count() > 0 ? "; not marked ready in the current one: " + grads->missing() : ""));
  }
  timeline.compute(TimelineEvent::Kind::kStepBegin);
  if (!opt.zero.overlap) ZDP_RETURN_IF_ERROR(grads->launch_ready(state->steps() + 1));

  // 1. The reduced gradients, and their statistics over this rank's slices. The sums of
  // all ranks and micro-batches are averaged (and fp16's loss scale undone) through the
  // check's scale, so the all-reduced statistics describe the gradient of the global batch.
  const double inv_scale =
      1.0 / (static_cast<double>(env.world) * static_cast<double>(opt.accum_steps) * state->loss_scale());
  // The waits come first, so that the timeline separates them from the statistics (bucket
  // 0, waited for first, is the last one the backward order reduces anyway).
  ZDP_RETURN_IF_ERROR(fail(grads->wait_all(where)));
  timeline.compute(TimelineEvent::Kind::kReductionsDone);
  StatusOr<optim::GradScaleDecision> stats = state->grad_stats([this](int b) { return grads->reduced_slice(b); },
                                                               grads->reduced_dtype(), inv_scale, timeline, where);
  if (!stats.ok()) return fail(stats.status());
  const optim::GradScaleDecision decision = *stats;
  timeline.compute(TimelineEvent::Kind::kNormDone);

  StepStats out;
  out.grad_norm = decision.grad_norm;
  out.clip_coef = decision.clip_coef;
  if (decision.action == optim::StepAction::kSkipNonFinite) {
    // Every rank saw the same all-reduced flag, so every rank skips this step.
    if (state->scaler() == nullptr) {
      ZDP_LOG(kWarn) << where << ": non-finite gradient without fp16 loss scaling; step skipped";
    }
    state->finish_step(decision.action);
    grads->reset_step();
    timeline.compute(TimelineEvent::Kind::kOptimizerDone);
    timeline.compute(TimelineEvent::Kind::kStepEnd);
    timeline.end_iteration();
    out.step = state->steps();
    out.skipped = true;
    out.loss_scale = state->loss_scale();
    return out;
  }

  // 2. The fused optimizer over the owned ranges, each bucket's all-gather right after
  // its update (stages 1-2), so the gathers overlap the remaining updates.
  const int64_t t = state->steps() + 1;
  const float grad_scale = static_cast<float>(decision.clip_coef * inv_scale);
  for (int b = 0; b < static_cast<int>(layout.buckets().size()); ++b) {
    const OwnedRange o = owned_range(layout, opt, env.rank, b);
    Status u =
        state->update(b, o, grads->reduced(o.flat, o.state), grads->reduced_dtype(), params->owned(o), t, grad_scale);
    if (!u.ok()) return fail(u.with_context(where));
    if (opt.zero.shards_optimizer() && !opt.zero.shards_params())
      ZDP_RETURN_IF_ERROR(fail(params->gather_bucket(b, o)));
  }
  timeline.compute(TimelineEvent::Kind::kOptimizerDone);
  state->finish_step(decision.action);
  if (opt.zero.shards_params()) params->invalidate();
  // Without overlap_param_gather the next forward may read any parameter: order it after
  // every gather now.
  if (!opt.overlap_param_gather) ZDP_RETURN_IF_ERROR(fail(params->wait_all(where)));
  timeline.compute(TimelineEvent::Kind::kStepEnd);
  timeline.end_iteration();  // the stage-3 prefetch below serves the next iteration
  if (opt.overlap_param_gather && opt.zero.shards_params()) {
    ZDP_RETURN_IF_ERROR(fail(params->prefetch_after_step(state->steps())));
  }
  grads->reset_step();
  out.step = state->steps();
  out.lr = state->lr_at_step(t);
  out.loss_scale = state->loss_scale();
  return out;
}

}  // namespace zdp
