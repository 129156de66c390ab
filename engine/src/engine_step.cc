// step_async(): wait for the reductions, the global gradient norm and the skip decision
// (statistics of the owned slices, one all-reduce, kernels::decide_step: all on the
// device), the fused optimizer over the owned slices reading that decision (unscaling and
// clipping folded into its gradient scale), and the per-bucket parameter all-gathers of
// stages 1-2. On CUDA none of it waits on the host: the host learns each step's outcome
// later (OptimizerState::settle), when step_stats() asks or a later step needs it.
//
// The norm path (statistics -> all-reduce -> decision) is the one place a deterministic
// mode would change the reduction order: kernels/grad_check.h fixes the order inside a
// slice, kernels/step_decision.h the order over buckets.
#include "engine/src/engine_impl.h"

namespace zdp {

Status Engine::Impl::step_async() {
  ZDP_RETURN_IF_ERROR(env.context_alive("step()"));
  if (!finalized) return env.invalid("step(): before finalize()");
  ZDP_RETURN_IF_ERROR(env.failure.status());
  auto fail = [this](const Status& s) { return env.failure.fail(s); };
  const int open = params->open_scope();
  if (open >= 0)
    return env.invalid("step(): inside a scope of layer group " + std::to_string(open) + " (end it first)");
  if (grads->micro() != opt.accum_steps) {
    return env.invalid("step(): after " + std::to_string(grads->micro()) + " of " + std::to_string(opt.accum_steps) +
                       " micro-batches" +
                       (grads->ready_count() > 0 ? "; not marked ready in the current one: " + grads->missing() : ""));
  }
  const std::string where = env.who + ": step " + std::to_string(state->step_label());
  timeline.compute(TimelineEvent::Kind::kStepBegin);
  if (!opt.zero.overlap) ZDP_RETURN_IF_ERROR(grads->launch_ready(state->step_label()));

  // 0. What the host must know before issuing this step: the outcome of every step but
  // the previous one (normally landed long ago: no wait), and with fp16 loss scaling the
  // previous one's too, since this step's scale depends on it (the trainer's
  // loss_scale() call in backward has waited for it already).
  ZDP_RETURN_IF_ERROR(fail(state->settle(state->scaler() ? 0 : 1, where)));

  // 1. The reduced gradients, their statistics over this rank's slices and the step's
  // decision. The sums of all ranks and micro-batches are averaged (and fp16's loss
  // scale undone) through the check's scale, so the all-reduced statistics describe the
  // gradient of the global batch.
  const double inv_scale =
      1.0 / (static_cast<double>(env.world) * static_cast<double>(opt.accum_steps) * state->loss_scale());
  // The waits come first, so that the timeline separates them from the statistics (bucket
  // 0, waited for first, is the last one the backward order reduces anyway).
  ZDP_RETURN_IF_ERROR(fail(grads->wait_all(where)));
  timeline.compute(TimelineEvent::Kind::kReductionsDone);
  ZDP_RETURN_IF_ERROR(fail(state->decide([this](int b) { return grads->reduced_slice(b); }, grads->reduced_dtype(),
                                         inv_scale, timeline, where)));
  timeline.compute(TimelineEvent::Kind::kNormDone);

  // 2. The fused optimizer over the owned ranges (a no-op when the decision skips: every
  // rank saw the same all-reduced flag), each bucket's all-gather right after its update
  // (stages 1-2), so the gathers overlap the remaining updates. A skipped step gathers
  // unchanged parameters, which costs a step's gathers once and keeps the host out of it.
  if (opt.zero.shards_params()) ZDP_RETURN_IF_ERROR(fail(params->wait_prefetched(where)));
  for (int b = 0; b < static_cast<int>(layout.buckets().size()); ++b) {
    const OwnedRange o = owned_range(layout, opt, env.rank, b);
    Status u = state->update(b, o, grads->reduced(o.flat, o.state), grads->reduced_dtype(), params->owned(o));
    if (!u.ok()) return fail(u.with_context(where));
    if (opt.zero.shards_optimizer() && !opt.zero.shards_params())
      ZDP_RETURN_IF_ERROR(fail(params->gather_bucket(b, o)));
  }
  timeline.compute(TimelineEvent::Kind::kOptimizerDone);
  ZDP_RETURN_IF_ERROR(fail(state->issue(where)));
  if (opt.zero.shards_params()) params->invalidate();
  // Without overlap_param_gather the next forward may read any parameter: order it after
  // every gather now (CUDA: on the GPU).
  if (!opt.overlap_param_gather) ZDP_RETURN_IF_ERROR(fail(params->wait_all(where)));
  timeline.compute(TimelineEvent::Kind::kStepEnd);
  timeline.end_iteration();  // the stage-3 prefetch below serves the next iteration
  if (opt.overlap_param_gather && opt.zero.shards_params()) {
    ZDP_RETURN_IF_ERROR(fail(params->prefetch_after_step(state->step_label() - 1)));
  }
  grads->reset_step();
  return Status::Ok();
}

StatusOr<StepStats> Engine::Impl::step_stats() {
  ZDP_RETURN_IF_ERROR(env.context_alive("step_stats()"));
  if (!finalized) return env.invalid("step_stats(): before finalize()");
  ZDP_RETURN_IF_ERROR(env.failure.status());
  ZDP_RETURN_IF_ERROR(env.failure.fail(state->settle(0, env.who + ": step_stats()")));
  // A failure of either stream reaches the host here at the latest. Both are read: on the
  // CPU the compute stream never waits on the communication stream (host waits do), so the
  // post-step all-gathers' or stage 3's prefetch's failure showed on the latter only, and
  // a step that ended the run reported success.
  for (Stream* stream : {&env.exec->compute(), &env.exec->comm()}) {
    const Status streams = stream->error();
    if (!streams.ok()) return env.failure.fail(streams.with_context(env.who + ": step_stats()"));
  }
  const StepStats* last = state->last_stats();
  if (last == nullptr) return env.invalid("step_stats(): no step yet");
  return *last;
}

}  // namespace zdp
