// Gradients: the views the trainer writes, readiness counting per bucket, accumulation
// over micro-batches, and each bucket's reduction on the communication stream as soon as
// the layout's backward order allows. Local accumulation folds every micro-batch but the
// last into a full fp32 buffer and reduces once; sharded accumulation (stages 2-3)
// reduce-scatters every micro-batch and adds the slice into the fp32 gradient shard.
#include "engine/src/engine_impl.h"

namespace zdp {

void* Engine::Impl::grad_in_bucket(int b) {
  const Bucket& bk = bucket(b);
  if (opt.stage <= 1) return elem_ptr(grads_full.data(), bk.begin, cdt());
  const GradGroup& g = groups[static_cast<size_t>(buckets[static_cast<size_t>(b)].group)];
  return elem_ptr(grad_slots.data(g.slot), bk.begin - g.begin, cdt());
}

void* Engine::Impl::reduced_grad(int64_t flat, int64_t state) {
  if (opt.stage >= 2) return elem_ptr(grads_shard.data(), state, reduced_dtype());
  return elem_ptr(reduce_full.empty() ? grads_full.data() : reduce_full.data(), flat, rdt());
}

void* Engine::Impl::reduced_slice(int b) { return reduced_grad(layout.slice_begin(b, rank), layout.shard_offset(b)); }

void* Engine::Impl::grad_ptr(int p) {
  if (!view_allowed("grad", p)) return nullptr;
  const ParamPlacement& pl = placement(p);
  if (opt.stage <= 1) return elem_ptr(grads_full.data(), pl.offset, cdt());
  GradGroup& g = groups[static_cast<size_t>(group_of_param[static_cast<size_t>(p)])];
  if (g.slot < 0) {
    StatusOr<int> slot = grad_slots.acquire(static_cast<int>(&g - groups.data()));
    stamp(TimelineEvent::Kind::kCommWaitBegin, g.first_bucket, CollectiveOp::kReduceScatter);
    Status s = slot.ok() ? exec->compute_after(grad_slots.event(*slot), "waiting for a free gradient staging buffer")
                         : slot.status();
    stamp(TimelineEvent::Kind::kCommWaitEnd, g.first_bucket, CollectiveOp::kReduceScatter);
    // The reduction sends whole buckets: zero the padding at the end of each.
    for (int b = g.first_bucket; s.ok() && b <= g.last_bucket; ++b) {
      const Bucket& bk = bucket(b);
      s = exec->memset(elem_ptr(grad_slots.data(*slot), bk.begin + bk.payload - g.begin, cdt()), 0,
                       bk.padding() * static_cast<int64_t>(dtype_size(cdt())));
    }
    if (!s.ok()) {
      defer(s.with_context(who + ": step " + std::to_string(steps + 1) + ": grad(" + param_label(p) + ")"));
      return nullptr;
    }
    g.slot = *slot;
  }
  return elem_ptr(grad_slots.data(g.slot), pl.offset - g.begin, cdt());
}

Status Engine::Impl::grad_ready(int p) {
  if (!finalized) return invalid("grad_ready(): before finalize()");
  ZDP_RETURN_IF_ERROR(failure);
  if (p < 0 || p >= static_cast<int>(registered.size())) return invalid("grad_ready(): no parameter #" + std::to_string(p));
  const std::string call = "grad_ready(" + param_label(p) + ")";
  const std::string at = " in micro-batch " + std::to_string(micro) + " of step " + std::to_string(steps + 1);
  if (micro >= opt.accum_steps) {
    return invalid(call + ": all " + std::to_string(opt.accum_steps) + " micro-batches of step " +
                   std::to_string(steps + 1) + " are complete; call step()");
  }
  if (ready[static_cast<size_t>(p)]) return invalid(call + ": called twice" + at);
  const ParamPlacement& pl = placement(p);
  GradGroup& g = groups[static_cast<size_t>(group_of_param[static_cast<size_t>(p)])];
  if (opt.stage >= 2 && g.slot < 0) return invalid(call + ": grad() was not called for it" + at);
  ready[static_cast<size_t>(p)] = 1;
  ++ready_count;

  if (!last_micro() && !sharded_accum()) {
    // Fold this micro-batch's gradient into the fp32 accumulation (the first one copies).
    float* acc = accum.as<float>() + pl.offset;
    kernels::FoldArgs fold{elem_ptr(grad_in_bucket(pl.first_bucket), pl.offset - bucket(pl.first_bucket).begin, cdt()), cdt(),
                  micro == 0 ? nullptr : acc, acc, DType::kF32, pl.numel};
    Status s = exec->fold(fold);
    if (s.ok() && opt.stage >= 2 && --g.unfolded == 0) {
      s = exec->record_compute(grad_slots.event(g.slot));
      grad_slots.release(g.slot);
      g.slot = -1;
    }
    if (!s.ok()) return fail(s.with_context(who + ": " + call));
  } else {
    for (int b = pl.first_bucket; b <= pl.last_bucket; ++b) --buckets[static_cast<size_t>(b)].pending;
    if (opt.overlap) ZDP_RETURN_IF_ERROR(launch_ready_buckets());
  }

  if (ready_count == static_cast<int>(registered.size())) {  // the micro-batch is complete
    if (sharded_accum() && !last_micro()) {
      // Its reductions all issued (without overlap: now), the next micro-batch reduces anew.
      if (!opt.overlap) ZDP_RETURN_IF_ERROR(launch_ready_buckets());
      reset_reductions();
    }
    ++micro;
    ready.assign(registered.size(), 0);
    ready_count = 0;
    for (GradGroup& gg : groups) gg.unfolded = gg.params;
  }
  return Status::Ok();
}

Status Engine::Impl::launch_ready_buckets() {
  // Strictly in the layout's backward order, whatever order the trainer completes them
  // in: every rank then issues the same collectives in the same order.
  while (launch_cursor < launch_order.size()) {
    const int b = launch_order[launch_cursor];
    if (buckets[static_cast<size_t>(b)].pending > 0) break;
    Status s = launch_bucket(b);
    if (!s.ok()) {
      const int64_t bytes = bucket(b).size * static_cast<int64_t>(dtype_size(rdt()));
      return fail(s.with_context(who + ": step " + std::to_string(steps + 1) + ": reduction of bucket " +
                                 std::to_string(b) + " (" + format_bytes(bytes) + ")"));
    }
    ++launch_cursor;
  }
  return Status::Ok();
}

Status Engine::Impl::launch_bucket(int b) {
  const Bucket& bk = bucket(b);
  BucketState& st = buckets[static_cast<size_t>(b)];
  GradGroup& g = groups[static_cast<size_t>(st.group)];
  void* in = grad_in_bucket(b);
  const float* acc = opt.accum_steps > 1 && !sharded_accum() ? accum.as<float>() + bk.begin : nullptr;

  // The reduction's input in the reduce dtype: the trainer's buffer itself when nothing
  // needs adding or casting, else the sum rounded once into the reduce dtype.
  void* send = in;
  int staging = -1;
  if (opt.stage <= 1) {
    send = reduced_grad(bk.begin, 0);
  } else if (rdt() != cdt() || acc != nullptr) {
    ZDP_ASSIGN_OR_RETURN(staging, reduce_slots.acquire(b));
    stamp(TimelineEvent::Kind::kCommWaitBegin, b, CollectiveOp::kReduceScatter);
    ZDP_RETURN_IF_ERROR(exec->compute_after(reduce_slots.event(staging), "reduce staging"));
    stamp(TimelineEvent::Kind::kCommWaitEnd, b, CollectiveOp::kReduceScatter);
    send = reduce_slots.data(staging);
  }
  if (send != in || acc != nullptr) ZDP_RETURN_IF_ERROR(exec->fold(kernels::FoldArgs{in, cdt(), acc, send, rdt(), bk.size}));

  ZDP_RETURN_IF_ERROR(exec->comm_after_compute());
  Stream& stream = exec->comm();
  const CollectiveOp op = opt.stage == 0 ? CollectiveOp::kAllReduce : CollectiveOp::kReduceScatter;
  const int64_t bytes = bk.size * static_cast<int64_t>(dtype_size(rdt()));
  trace(TimelineEvent::Kind::kReduceStart, b, op, bytes);
  if (opt.stage == 0) {
    ZDP_RETURN_IF_ERROR(comm.all_reduce(send, send, bk.size, rdt(), ReduceOp::kSum, stream, b));
  } else {
    // Stage 1 reduces in place (its slice of the full buffer); stages 2-3 into the shard,
    // or with sharded accumulation in place too, the slice then added into the fp32 shard
    // (the first micro-batch's copied) on the same stream.
    const bool in_place = opt.stage == 1 || sharded_accum();
    void* recv = in_place ? elem_ptr(send, rank * bk.slice_size(), rdt()) : reduced_slice(b);
    ZDP_RETURN_IF_ERROR(comm.reduce_scatter(send, recv, bk.slice_size(), rdt(), ReduceOp::kSum, stream, b));
    if (sharded_accum()) {
      float* shard = static_cast<float*>(reduced_slice(b));
      ZDP_RETURN_IF_ERROR(exec->fold_on_comm(
          kernels::FoldArgs{recv, rdt(), micro == 0 ? nullptr : shard, shard, DType::kF32, bk.slice_size()}));
    }
  }
  ZDP_RETURN_IF_ERROR(stream.record(*st.reduced));
  trace(TimelineEvent::Kind::kReduceEnd, b, op, bytes);
  st.launched = true;
  if (staging >= 0) {
    ZDP_RETURN_IF_ERROR(stream.record(reduce_slots.event(staging)));
    reduce_slots.release(staging);
  }
  if (opt.stage >= 2 && --g.unlaunched == 0) {
    // The group's staging buffer is free once its last reader is done: the reduction
    // when it sent the buffer itself, else the fold on the compute stream.
    ZDP_RETURN_IF_ERROR(send == in ? stream.record(grad_slots.event(g.slot))
                                   : exec->record_compute(grad_slots.event(g.slot)));
    grad_slots.release(g.slot);
    g.slot = -1;
  }
  return Status::Ok();
}

}  // namespace zdp
