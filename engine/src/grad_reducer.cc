// GradReducer: gradient views, readiness, accumulation and per-bucket reductions.
#include "engine/src/grad_reducer.h"

#include "engine/src/param_registry.h"
#include "engine/src/quantized_exchange.h"

namespace zdp {

StatusOr<std::unique_ptr<GradReducer>> GradReducer::create(EngineEnv& env, const EngineOptions& options,
                                                           const Layout& layout, const ParamRegistry& registry,
                                                           Timeline& timeline, QuantizedExchange& quant) {
  std::unique_ptr<GradReducer> r(new GradReducer(env, options, layout, registry, timeline, quant));
  const int num_buckets = static_cast<int>(layout.buckets().size());
  r->buckets_.resize(static_cast<size_t>(num_buckets));
  for (int b = 0; b < num_buckets; ++b) {
    const Bucket& bk = r->bucket(b);
    // A bucket joins the previous group when a parameter straddles the boundary.
    if (!joins_previous_bucket(layout, b)) r->groups_.push_back(GradGroup{b, b, bk.begin, 0});
    GradGroup& g = r->groups_.back();
    g.last_bucket = b;
    g.size = bk.end() - g.begin;
    BucketState& st = r->buckets_[static_cast<size_t>(b)];
    st.params = bk.last_param - bk.first_param + 1;
    st.group = static_cast<int>(r->groups_.size()) - 1;
    ZDP_ASSIGN_OR_RETURN(st.reduced, env.device.create_event());
  }
  r->group_of_param_.assign(static_cast<size_t>(registry.size()), 0);
  for (int p = 0; p < registry.size(); ++p) {
    const int first = layout.params()[static_cast<size_t>(p)].first_bucket;
    r->group_of_param_[static_cast<size_t>(p)] = r->buckets_[static_cast<size_t>(first)].group;
  }
  r->launch_.order = layout.backward_bucket_order();
  r->ordered_.sum = OrderedSum(static_cast<int64_t>(env.world) * options.accum_steps);
  return r;
}

Status GradReducer::allocate(const BufferSizes& z) {
  if (!opt_.zero.shards_grads()) {
    // Zeroed once: the trainer never writes the padding, and the reductions send it.
    ZDP_RETURN_IF_ERROR(env_.allocate(mem_.full, z.grads, MemCategory::kGrads, "gradients", true));
    if (z.reduce_copy > 0) {
      ZDP_RETURN_IF_ERROR(env_.allocate(mem_.reduce_full, z.reduce_copy, MemCategory::kGrads, "reduce buffer", true));
    }
  } else {
    ZDP_RETURN_IF_ERROR(env_.allocate(mem_.shard, z.grads, MemCategory::kGrads, "gradient shard", true));
  }
  if (z.accum > 0) ZDP_RETURN_IF_ERROR(env_.allocate(mem_.accum, z.accum, MemCategory::kGrads, "accumulation", true));
  if (z.ordered_gather > 0) {
    ZDP_RETURN_IF_ERROR(
        env_.allocate(mem_.gathered, z.ordered_gather, MemCategory::kBuckets, "deterministic gather", false));
    ZDP_RETURN_IF_ERROR(
        env_.allocate(mem_.partials, z.ordered_partials, MemCategory::kBuckets, "deterministic partial sums", false));
  }
  if (z.grad_staging.count > 0) {
    ZDP_RETURN_IF_ERROR(mem_.grad_slots.init(env_.device, env_.who + ": gradient staging", z.grad_staging.slot_bytes,
                                             z.grad_staging.count, MemCategory::kBuckets));
  }
  if (z.reduce_staging.count > 0) {
    ZDP_RETURN_IF_ERROR(mem_.reduce_slots.init(env_.device, env_.who + ": reduce staging", z.reduce_staging.slot_bytes,
                                               z.reduce_staging.count, MemCategory::kBuckets));
  }
  return Status::Ok();
}

void GradReducer::reset_step() {
  micro_.ready.assign(static_cast<size_t>(registry_.size()), 0);
  micro_.viewed.assign(static_cast<size_t>(registry_.size()), 0);
  micro_.ready_count = 0;
  micro_.index = 0;
  reset_reductions();
  ordered_.sum.reset();
  ordered_.ops_micro = -1;
}

void GradReducer::reset_reductions() {
  launch_.next = 0;
  for (BucketState& st : buckets_) st.pending = st.params;
  for (GradGroup& g : groups_) g.unhanded = g.last_bucket - g.first_bucket + 1;
}

float* GradReducer::accum_at(int64_t flat) {
  return (accumulates_in_reduce_copy(opt_) ? mem_.reduce_full.as<float>() : mem_.accum.as<float>()) + flat;
}

Status GradReducer::fold_bucket(int b) {
  const Bucket& bk = bucket(b);
  float* acc = accum_at(bk.begin);
  return env_.exec->fold(
      kernels::FoldArgs{in_bucket(b), opt_.compute_dtype, micro_.index == 0 ? nullptr : acc, acc, DType::kF32, bk.size});
}

std::string GradReducer::missing() const {
  std::string out;
  for (size_t p = 0; p < micro_.ready.size() && out.size() < 200; ++p) {
    if (!micro_.ready[p]) out += (out.empty() ? "" : ", ") + registry_.label(static_cast<int>(p));
  }
  return out;
}

DType GradReducer::reduced_dtype() const { return sharded_accum() ? DType::kF32 : opt_.zero.reduce_dtype; }

void* GradReducer::in_bucket(int b) {
  const Bucket& bk = bucket(b);
  if (!opt_.zero.shards_grads()) return elem_ptr(mem_.full.data(), bk.begin, opt_.compute_dtype);
  const GradGroup& g = groups_[static_cast<size_t>(buckets_[static_cast<size_t>(b)].group)];
  return elem_ptr(mem_.grad_slots.data(g.slot), bk.begin - g.begin, opt_.compute_dtype);
}

void* GradReducer::reduced(int64_t flat, int64_t state) {
  if (opt_.zero.shards_grads()) return elem_ptr(mem_.shard.data(), state, reduced_dtype());
  return elem_ptr(mem_.reduce_full.empty() ? mem_.full.data() : mem_.reduce_full.data(), flat, opt_.zero.reduce_dtype);
}

void* GradReducer::reduced_slice(int b) { return reduced(layout_.slice_begin(b, env_.rank), layout_.shard_offset(b)); }

StatusOr<void*> GradReducer::view(int p, int64_t step) {
  const DType cdt = opt_.compute_dtype;
  const ParamPlacement& pl = layout_.params()[static_cast<size_t>(p)];
  if (!opt_.zero.shards_grads()) {
    // grad_ready() checks that this micro-batch asked for the view: without it the buffer
    // still held the last step's reduced sum, applied again silently (stages 2-3 refused
    // it already). A view after grad_ready() stays allowed here: the buffer is the
    // parameter's, and reading the gradient before step() is how tests inspect it.
    if (micro_.index < opt_.accum_steps && !micro_.ready[static_cast<size_t>(p)]) {
      micro_.viewed[static_cast<size_t>(p)] = 1;
    }
    if (ordered_.full_in_flight) {
      // Deterministic mode sends every micro-batch from this buffer: the next one may
      // overwrite it once the previous one's gathers have read it. A wait for the gradient
      // side, so not tagged kAllGather (TimelineEvent: the parameters' gathers), which the
      // profiler counted as gather wait.
      timeline_.compute(TimelineEvent::Kind::kCommWaitBegin, launch_.order.front(), CollectiveOp::kReduceScatter);
      Status s = wait_all("step " + std::to_string(step) + ": grad(" + registry_.label(p) + ")");
      timeline_.compute(TimelineEvent::Kind::kCommWaitEnd, launch_.order.front(), CollectiveOp::kReduceScatter);
      if (!s.ok()) return env_.failure.fail(s.with_context(env_.who));
      ordered_.full_in_flight = false;
    }
    return elem_ptr(mem_.full.data(), pl.offset, cdt);
  }
  // Stages 2-3: the staging buffer is this micro-batch's, until its group is folded or
  // reduced; a view after that would take a slot that nothing releases.
  const std::string call = "grad(" + registry_.label(p) + ")";
  if (micro_.index >= opt_.accum_steps) {
    return env_.invalid(call + ": all " + std::to_string(opt_.accum_steps) + " micro-batches of step " +
                        std::to_string(step) + " are complete; call step()");
  }
  if (micro_.ready[static_cast<size_t>(p)]) {
    return env_.invalid(call + ": called after grad_ready() in micro-batch " + std::to_string(micro_.index) +
                        " of step " + std::to_string(step));
  }
  micro_.viewed[static_cast<size_t>(p)] = 1;
  GradGroup& g = groups_[static_cast<size_t>(group_of_param_[static_cast<size_t>(p)])];
  if (g.slot < 0) {
    StatusOr<int> slot = mem_.grad_slots.acquire(static_cast<int>(&g - groups_.data()));
    timeline_.compute(TimelineEvent::Kind::kCommWaitBegin, g.first_bucket, CollectiveOp::kReduceScatter);
    Status s =
        slot.ok() ? env_.exec->compute_after(mem_.grad_slots.event(*slot), "waiting for a free gradient staging buffer")
                  : slot.status();
    timeline_.compute(TimelineEvent::Kind::kCommWaitEnd, g.first_bucket, CollectiveOp::kReduceScatter);
    // The reduction sends whole buckets: zero the padding at the end of each.
    for (int b = g.first_bucket; s.ok() && b <= g.last_bucket; ++b) {
      const Bucket& bk = bucket(b);
      s = env_.exec->memset(elem_ptr(mem_.grad_slots.data(*slot), bk.begin + bk.payload - g.begin, cdt), 0,
                            bk.padding() * static_cast<int64_t>(dtype_size(cdt)));
    }
    if (!s.ok())
      return s.with_context(env_.who + ": step " + std::to_string(step) + ": grad(" + registry_.label(p) + ")");
    g.slot = *slot;
  }
  return elem_ptr(mem_.grad_slots.data(g.slot), pl.offset - g.begin, cdt);
}

Status GradReducer::mark_ready(int p, int64_t step) {
  const std::string call = "grad_ready(" + registry_.label(p) + ")";
  const std::string at = " in micro-batch " + std::to_string(micro_.index) + " of step " + std::to_string(step);
  if (micro_.index >= opt_.accum_steps) {
    return env_.invalid(call + ": all " + std::to_string(opt_.accum_steps) + " micro-batches of step " +
                        std::to_string(step) + " are complete; call step()");
  }
  if (micro_.ready[static_cast<size_t>(p)]) return env_.invalid(call + ": called twice" + at);
  const ParamPlacement& pl = layout_.params()[static_cast<size_t>(p)];
  GradGroup& g = groups_[static_cast<size_t>(group_of_param_[static_cast<size_t>(p)])];
  // Without its own grad() the range holds what it held: stages 0-1 the last step's
  // reduced sum, stages 2-3 what the slot's last user left (applied silently).
  if (!micro_.viewed[static_cast<size_t>(p)] || (opt_.zero.shards_grads() && g.slot < 0)) {
    return env_.invalid(call + ": grad() was not called for it" + at);
  }
  micro_.ready[static_cast<size_t>(p)] = 1;
  ++micro_.ready_count;

  for (int b = pl.first_bucket; b <= pl.last_bucket; ++b) --buckets_[static_cast<size_t>(b)].pending;
  if (!last_micro() && !reduces_every_micro()) {
    // Fold this micro-batch's gradient into the fp32 accumulation (the first one copies),
    // a whole bucket at a time once all its parameters are ready: one launch a bucket
    // instead of one a parameter (gpt2-124m: 10 instead of 148, most of them too small
    // to be more than a launch), the padding's zeros included.
    for (int b = pl.first_bucket; b <= pl.last_bucket; ++b) {
      if (buckets_[static_cast<size_t>(b)].pending > 0) continue;
      Status s = fold_bucket(b);
      if (s.ok() && opt_.zero.shards_grads() && --g.unhanded == 0) {
        s = env_.exec->record_compute(mem_.grad_slots.event(g.slot));
        mem_.grad_slots.release(g.slot);
        g.slot = -1;
      }
      if (!s.ok()) return env_.failure.fail(s.with_context(env_.who + ": " + call));
    }
  } else if (opt_.zero.overlap) {
    ZDP_RETURN_IF_ERROR(launch_ready(step));
  }

  if (micro_.ready_count == registry_.size()) {  // the micro-batch is complete
    if (!last_micro()) {
      // Its reductions all issued (without overlap: now), or its buckets all folded: the
      // next micro-batch counts anew.
      if (reduces_every_micro() && !opt_.zero.overlap) ZDP_RETURN_IF_ERROR(launch_ready(step));
      reset_reductions();
      ordered_.full_in_flight = opt_.deterministic && !opt_.zero.shards_grads();
    }
    ++micro_.index;
    micro_.ready.assign(static_cast<size_t>(registry_.size()), 0);
    micro_.viewed.assign(static_cast<size_t>(registry_.size()), 0);
    micro_.ready_count = 0;
  }
  return Status::Ok();
}

Status GradReducer::launch_ready(int64_t step) {
  // Strictly in the layout's backward order, whatever order the trainer completes them
  // in: every rank then issues the same collectives in the same order.
  while (launch_.next < launch_.order.size()) {
    const int b = launch_.order[launch_.next];
    if (buckets_[static_cast<size_t>(b)].pending > 0) break;
    Status s = launch(b);
    if (!s.ok()) {
      const int64_t bytes = bucket(b).size * static_cast<int64_t>(dtype_size(opt_.zero.reduce_dtype));
      return env_.failure.fail(s.with_context(env_.who + ": step " + std::to_string(step) + ": reduction of bucket " +
                                              std::to_string(b) + " (" + format_bytes(bytes) + ")"));
    }
    ++launch_.next;
  }
  return Status::Ok();
}

Status GradReducer::launch(int b) {
  if (opt_.deterministic) return launch_ordered(b);
  const DType cdt = opt_.compute_dtype, rdt = opt_.zero.reduce_dtype;
  Exec& exec = *env_.exec;
  const Bucket& bk = bucket(b);
  BucketState& st = buckets_[static_cast<size_t>(b)];
  GradGroup& g = groups_[static_cast<size_t>(st.group)];
  void* in = in_bucket(b);
  // (With the accumulation in the reduce copy, `acc` and `send` below are one range: the
  // fold is in place.)
  const float* acc = opt_.accum_steps > 1 && !sharded_accum() ? accum_at(bk.begin) : nullptr;

  // The reduction's input in the reduce dtype: the trainer's buffer itself when nothing
  // needs adding or casting, else the sum rounded once into the reduce dtype.
  void* send = in;
  int staging = -1;
  if (!opt_.zero.shards_grads()) {
    send = reduced(bk.begin, 0);
  } else if (rdt != cdt || acc != nullptr) {
    ZDP_ASSIGN_OR_RETURN(staging, mem_.reduce_slots.acquire(b));
    timeline_.compute(TimelineEvent::Kind::kCommWaitBegin, b, CollectiveOp::kReduceScatter);
    ZDP_RETURN_IF_ERROR(exec.compute_after(mem_.reduce_slots.event(staging), "reduce staging"));
    timeline_.compute(TimelineEvent::Kind::kCommWaitEnd, b, CollectiveOp::kReduceScatter);
    send = mem_.reduce_slots.data(staging);
  }
  if (send != in || acc != nullptr) ZDP_RETURN_IF_ERROR(exec.fold(kernels::FoldArgs{in, cdt, acc, send, rdt, bk.size}));

  Stream& stream = exec.comm();
  if (quant_.reduces()) {
    // Quantized (stages 1-3; reduce dtype fp32): stage 1 sums in place into its slice of
    // the full buffer, stages 2-3 into the fp32 shard (added into with sharded accumulation).
    float* out = !opt_.zero.shards_grads() ? static_cast<float*>(send) + env_.rank * bk.slice_size()
                                           : static_cast<float*>(reduced_slice(b));
    ZDP_RETURN_IF_ERROR(
        quant_.reduce_scatter(b, static_cast<const float*>(send), out, sharded_accum() && micro_.index > 0));
  } else {
    ZDP_RETURN_IF_ERROR(reduce_full_precision(b, send));
  }
  ZDP_RETURN_IF_ERROR(stream.record(*st.reduced));
  if (staging >= 0) {
    ZDP_RETURN_IF_ERROR(stream.record(mem_.reduce_slots.event(staging)));
    mem_.reduce_slots.release(staging);
  }
  if (opt_.zero.shards_grads() && --g.unhanded == 0) {
    // The group's staging buffer is free once its last reader is done: the reduction
    // when it sent the buffer itself, else the fold on the compute stream.
    ZDP_RETURN_IF_ERROR(send == in ? stream.record(mem_.grad_slots.event(g.slot))
                                   : exec.record_compute(mem_.grad_slots.event(g.slot)));
    mem_.grad_slots.release(g.slot);
    g.slot = -1;
  }
  return Status::Ok();
}

Status GradReducer::reduce_full_precision(int b, void* send) {
  const DType rdt = opt_.zero.reduce_dtype;
  Exec& exec = *env_.exec;
  const Bucket& bk = bucket(b);
  Stream& stream = exec.comm();
  ZDP_RETURN_IF_ERROR(exec.comm_after_compute());
  const CollectiveOp op = opt_.zero.shards_optimizer() ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  const int64_t bytes = bk.size * static_cast<int64_t>(dtype_size(rdt));
  timeline_.collective(TimelineEvent::Kind::kReduceStart, b, op, bytes);
  if (!opt_.zero.shards_optimizer()) {
    ZDP_RETURN_IF_ERROR(env_.comm.all_reduce(send, send, bk.size, rdt, ReduceOp::kSum, stream, b));
  } else {
    // Stage 1 reduces in place (its slice of the full buffer); stages 2-3 into the shard,
    // or with sharded accumulation in place too, the slice then added into the fp32 shard
    // (the first micro-batch's copied) on the same stream.
    const bool in_place = !opt_.zero.shards_grads() || sharded_accum();
    void* recv = in_place ? elem_ptr(send, env_.rank * bk.slice_size(), rdt) : reduced_slice(b);
    ZDP_RETURN_IF_ERROR(env_.comm.reduce_scatter(send, recv, bk.slice_size(), rdt, ReduceOp::kSum, stream, b));
    if (sharded_accum()) {
      float* shard = static_cast<float*>(reduced_slice(b));
      ZDP_RETURN_IF_ERROR(exec.fold_on_comm(
          kernels::FoldArgs{recv, rdt, micro_.index == 0 ? nullptr : shard, shard, DType::kF32, bk.slice_size()}));
    }
  }
  timeline_.collective(TimelineEvent::Kind::kReduceEnd, b, op, bytes);
  return Status::Ok();
}

Status GradReducer::wait_all(const std::string& where) {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Status s = env_.exec->compute_after(*buckets_[b].reduced, where + ": reduction of bucket " + std::to_string(b));
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

void GradReducer::count_memory(int64_t* measured) const {
  for (const DeviceBuffer* b : {&mem_.full, &mem_.reduce_full, &mem_.shard, &mem_.accum, &mem_.gathered, &mem_.partials}) {
    if (!b->empty()) measured[static_cast<int>(b->category())] += b->bytes();
  }
  for (const SlotPool* pool : {&mem_.grad_slots, &mem_.reduce_slots}) {
    measured[static_cast<int>(MemCategory::kBuckets)] += pool->slot_bytes() * pool->size();
  }
}

}  // namespace zdp
