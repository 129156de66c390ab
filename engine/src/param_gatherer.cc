// ParamGatherer: parameter views, stage-3 layer gathering and the post-step all-gathers.
#include "engine/src/param_gatherer.h"

#include <algorithm>

#include "engine/src/quantized_exchange.h"

namespace zdp {
namespace {

// The context of a wait for a bucket's all-gather. The comm stream runs one collective at a
// time, so the failure the wait reports may be an earlier one's (a reduce-scatter that
// timed out): the words say it was a wait, not that the gather failed.
std::string gather_wait(int bucket) {
  return ": waiting for the all-gather of bucket " + std::to_string(bucket) +
         " (the comm stream's failure that follows may be an earlier collective's)";
}

}  // namespace

StatusOr<std::unique_ptr<ParamGatherer>> ParamGatherer::create(EngineEnv& env, const EngineOptions& options,
                                                               const Layout& layout, Timeline& timeline,
                                                               QuantizedExchange& quant) {
  std::unique_ptr<ParamGatherer> g(new ParamGatherer(env, options, layout, timeline, quant));
  for (size_t b = 0; b < layout.buckets().size(); ++b) {
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Event> e, env.device.create_event());
    g->gathered_.push_back(std::move(e));
  }
  g->pending_.assign(layout.buckets().size(), 0);
  for (const ParamPlacement& pl : layout.params()) {
    if (g->layer_ids_.empty() || g->layer_ids_.back() != pl.layer) g->layer_ids_.push_back(pl.layer);
  }
  g->scope_depth_.assign(g->layer_ids_.size(), 0);
  return g;
}

Status ParamGatherer::allocate(const BufferSizes& z) {
  if (!opt_.zero.shards_params()) {
    ZDP_RETURN_IF_ERROR(env_.allocate(full_, z.params, MemCategory::kParams, "parameters", false));
  } else {
    ZDP_RETURN_IF_ERROR(env_.allocate(shard_, z.params, MemCategory::kParams, "parameter shard", false));
  }
  if (z.param_gather.count > 0) {
    // Over plan: more groups gathered at once than the prefetch and the declared nesting.
    ZDP_RETURN_IF_ERROR(gather_slots_.init(
        env_.device, env_.who + ": gathered layers", z.param_gather.slot_bytes, z.param_gather.count,
        MemCategory::kBuckets,
        "more layer groups are held at once than zero.prefetch_layers (" + std::to_string(opt_.zero.prefetch_layers) +
            ") and EngineOptions::nested_layer_scopes (" + std::to_string(opt_.nested_layer_scopes) +
            ") plan for: layer scopes open inside one another (raise nested_layer_scopes to their depth), or "
            "groups used out of the order of registration"));
  }
  return Status::Ok();
}

void* ParamGatherer::owned(const OwnedRange& o) {
  return opt_.zero.shards_params() ? elem_ptr(shard_.data(), o.state, opt_.compute_dtype)
                                   : elem_ptr(full_.data(), o.flat, opt_.compute_dtype);
}

Status ParamGatherer::gather_bucket(int b, const OwnedRange& o) {
  Exec& exec = *env_.exec;
  const DType cdt = opt_.compute_dtype;
  ZDP_RETURN_IF_ERROR(exec.comm_after_compute());
  if (quant_.gathers()) {
    ZDP_RETURN_IF_ERROR(quant_.all_gather(b, owned(o), elem_ptr(full_.data(), bucket(b).begin, cdt), o.count));
  } else {
    const int64_t bytes = bucket(b).size * static_cast<int64_t>(dtype_size(cdt));
    timeline_.collective(TimelineEvent::Kind::kGatherStart, b, CollectiveOp::kAllGather, bytes);
    ZDP_RETURN_IF_ERROR(
        env_.comm.all_gather(owned(o), elem_ptr(full_.data(), bucket(b).begin, cdt), o.count, cdt, exec.comm(), b));
    timeline_.collective(TimelineEvent::Kind::kGatherEnd, b, CollectiveOp::kAllGather, bytes);
  }
  ZDP_RETURN_IF_ERROR(exec.comm().record(*gathered_[static_cast<size_t>(b)]));
  pending_[static_cast<size_t>(b)] = 1;
  return Status::Ok();
}

Status ParamGatherer::wait_all(const std::string& where) {
  for (size_t b = 0; b < pending_.size(); ++b) {
    if (!pending_[b]) continue;
    ZDP_RETURN_IF_ERROR(env_.exec->compute_after(*gathered_[b], where + gather_wait(b)));
    pending_[b] = 0;
  }
  return Status::Ok();
}

Status ParamGatherer::restore_from_masters(const float* master, int64_t steps, const std::string& where) {
  Exec& exec = *env_.exec;
  const DType cdt = opt_.compute_dtype;
  const bool stochastic = opt_.optim.rounding == ParamRounding::kStochastic && cdt != DType::kF32 && steps > 0;
  int64_t first_element = 0;  // of the bucket, among all parameter elements (OptimizerState::update's key)
  for (int b = 0; b < static_cast<int>(layout_.buckets().size()); ++b) {
    const OwnedRange o = owned_range(layout_, opt_, env_.rank, b);
    void* dst = owned(o);
    const Bucket& bk = bucket(b);
    if (stochastic) {
      ZDP_RETURN_IF_ERROR(round_stochastic(master + o.state, dst, o.count, static_cast<uint64_t>(steps),
                                           static_cast<uint64_t>(first_element + (o.flat - bk.begin)), where));
    } else {
      ZDP_RETURN_IF_ERROR(exec.cast(kernels::CastArgs{master + o.state, DType::kF32, dst, cdt, o.count}));
    }
    first_element += bk.payload;
    if (opt_.zero.shards_optimizer() && !opt_.zero.shards_params()) {
      ZDP_RETURN_IF_ERROR(exec.comm_after_compute());
      ZDP_RETURN_IF_ERROR(
          env_.comm.all_gather(dst, elem_ptr(full_.data(), bucket(b).begin, cdt), o.count, cdt, exec.comm(), b));
    }
  }
  ZDP_RETURN_IF_ERROR(exec.synchronize(where + ": parameter all-gather"));
  std::fill(pending_.begin(), pending_.end(), 0);
  if (opt_.zero.shards_params()) invalidate();
  return Status::Ok();
}

// On the host, where the bits are drawn as the CPU twin of the update draws them: a CUDA
// engine copies the owned masters out and the rounded parameters back (once per load).
Status ParamGatherer::round_stochastic(const float* master, void* dst, int64_t count, uint64_t step,
                                       uint64_t first_index, const std::string& where) {
  Exec& exec = *env_.exec;
  kernels::StochasticCastArgs a;
  a.dst_dtype = opt_.compute_dtype;
  a.count = count;
  a.seed = static_cast<uint64_t>(opt_.seed);
  a.step = step;
  a.first_index = first_index;
  if (!exec.cuda()) {
    a.src = master;
    a.dst = dst;
    return kernels::cast_stochastic_cpu(a);
  }
  std::vector<float> host_master(static_cast<size_t>(count));
  std::vector<uint16_t> host_param(static_cast<size_t>(count));
  ZDP_RETURN_IF_ERROR(exec.copy(host_master.data(), master, count * static_cast<int64_t>(sizeof(float))));
  ZDP_RETURN_IF_ERROR(exec.synchronize(where + ": masters to the host for stochastic rounding"));
  a.src = host_master.data();
  a.dst = host_param.data();
  ZDP_RETURN_IF_ERROR(kernels::cast_stochastic_cpu(a));
  ZDP_RETURN_IF_ERROR(exec.copy(dst, host_param.data(), count * static_cast<int64_t>(sizeof(uint16_t))));
  return exec.synchronize(where + ": stochastically rounded parameters to the device");
}

int ParamGatherer::index_of(int layer) const {
  const auto it = std::lower_bound(layer_ids_.begin(), layer_ids_.end(), layer);
  return it != layer_ids_.end() && *it == layer ? static_cast<int>(it - layer_ids_.begin()) : -1;
}

int ParamGatherer::open_scope() const {
  for (size_t li = 0; li < scope_depth_.size(); ++li) {
    if (scope_depth_[li] > 0) return layer_ids_[li];
  }
  return -1;
}

// Buffers stay held from a prefetch to the end of the scope that uses them, so another
// prefetch never evicts them; released ones are lent again least recently released first
// (the layers furthest behind the pass).
StatusOr<int> ParamGatherer::gather_layer(int li, bool prefetch) {
  const int cached = gather_slots_.find(li);
  if (cached >= 0) {
    gather_slots_.hold(cached);
    return cached;
  }
  if (prefetch && gather_slots_.held_count() == gather_slots_.size()) return -1;
  ZDP_ASSIGN_OR_RETURN(const int slot, gather_slots_.acquire(li));
  // Whoever read the buffer last (the compute stream) must be done; and the shard the
  // gather sends was written by the optimizer on the compute stream.
  Exec& exec = *env_.exec;
  const DType cdt = opt_.compute_dtype;
  ZDP_RETURN_IF_ERROR(exec.comm().wait(gather_slots_.event(slot)));
  ZDP_RETURN_IF_ERROR(exec.comm_after_compute());
  const auto [first, end] = layout_.layer_buckets(layer_ids_[static_cast<size_t>(li)]);
  const int64_t base = bucket(first).begin;
  for (int b = first; b < end; ++b) {
    const Bucket& bk = bucket(b);
    void* own = elem_ptr(shard_.data(), layout_.shard_offset(b), cdt);
    void* out = elem_ptr(gather_slots_.data(slot), bk.begin - base, cdt);
    if (quant_.gathers()) {
      ZDP_RETURN_IF_ERROR(quant_.all_gather(b, own, out, bk.slice_size()));
    } else {
      const int64_t bytes = bk.size * static_cast<int64_t>(dtype_size(cdt));
      timeline_.collective(TimelineEvent::Kind::kGatherStart, b, CollectiveOp::kAllGather, bytes);
      ZDP_RETURN_IF_ERROR(env_.comm.all_gather(own, out, bk.slice_size(), cdt, exec.comm(), b));
      timeline_.collective(TimelineEvent::Kind::kGatherEnd, b, CollectiveOp::kAllGather, bytes);
    }
    ZDP_RETURN_IF_ERROR(exec.comm().record(*gathered_[static_cast<size_t>(b)]));
  }
  return slot;
}

Status ParamGatherer::enter(int layer, bool forward) {
  const int li = index_of(layer);
  if (li < 0) return Status::Ok();  // a layer group without parameters: nothing to gather
  if (!opt_.zero.shards_params()) {
    // Stages 0-2 gather nothing, but count the scope: step() and save_checkpoint() inside
    // one are refused at every stage, not first when a config moves to stage 3.
    ++scope_depth_[static_cast<size_t>(li)];
    return Status::Ok();
  }
  const std::string what = env_.who + ": stage 3: layer group " + std::to_string(layer);
  if (scope_depth_[static_cast<size_t>(li)] == 0) {
    StatusOr<int> slot = gather_layer(li, false);
    if (!slot.ok()) return env_.failure.fail(slot.status().with_context(what + ": all-gather"));
    const auto [first, end] = layout_.layer_buckets(layer);
    timeline_.compute(TimelineEvent::Kind::kCommWaitBegin, first, CollectiveOp::kAllGather);
    for (int b = first; b < end; ++b) {
      ZDP_RETURN_IF_ERROR(env_.failure.fail(env_.exec->compute_after(
          *gathered_[static_cast<size_t>(b)], what + gather_wait(b))));
    }
    timeline_.compute(TimelineEvent::Kind::kCommWaitEnd, first, CollectiveOp::kAllGather);
  }
  ++scope_depth_[static_cast<size_t>(li)];
  const int direction = forward ? 1 : -1;
  for (int k = 1; k <= opt_.zero.prefetch_layers; ++k) {
    const int next = li + direction * k;
    if (next < 0 || next >= static_cast<int>(layer_ids_.size())) break;
    StatusOr<int> slot = gather_layer(next, true);
    if (!slot.ok()) {
      return env_.failure.fail(slot.status().with_context(what + ": prefetch of layer group " +
                                                          std::to_string(layer_ids_[static_cast<size_t>(next)])));
    }
  }
  return Status::Ok();
}

void ParamGatherer::exit(int layer) {
  const int li = index_of(layer);
  if (li < 0 || scope_depth_[static_cast<size_t>(li)] == 0) return;
  if (--scope_depth_[static_cast<size_t>(li)] > 0) return;
  const int slot = gather_slots_.find(li);
  if (slot < 0) return;
  // The buffer is free once the compute work issued inside the scope has read it.
  Status s = env_.exec->record_compute(gather_slots_.event(slot));
  if (!s.ok()) env_.defer(s.with_context(env_.who + ": stage 3: release of layer group " + std::to_string(layer)));
  gather_slots_.release(slot);
}

int ParamGatherer::open_scopes() const {
  int open = 0;
  for (int depth : scope_depth_) open += depth;
  return open;
}

Status ParamGatherer::wait_prefetched(const std::string& where) {
  for (int slot = 0; slot < gather_slots_.size(); ++slot) {
    const int li = gather_slots_.key(slot);
    if (!gather_slots_.held(slot) || li < 0) continue;
    const auto [first, end] = layout_.layer_buckets(layer_ids_[static_cast<size_t>(li)]);
    for (int b = first; b < end; ++b) {
      ZDP_RETURN_IF_ERROR(env_.exec->compute_after(*gathered_[static_cast<size_t>(b)], where + gather_wait(b)));
    }
  }
  return Status::Ok();
}

void ParamGatherer::invalidate() {
  // No scope is open at step() or a load, so what is still held was prefetched; the last
  // writer of those buffers was a gather on the comm stream, which orders the next one anyway.
  for (int slot = 0; slot < gather_slots_.size(); ++slot) {
    if (gather_slots_.held(slot)) gather_slots_.release(slot);
  }
  gather_slots_.forget_released();
}

Status ParamGatherer::prefetch_after_step(int64_t steps) {
  const int n = std::min<int>(std::max(1, opt_.zero.prefetch_layers), static_cast<int>(layer_ids_.size()));
  for (int li = 0; li < n; ++li) {
    StatusOr<int> slot = gather_layer(li, true);
    if (!slot.ok()) {
      return slot.status().with_context(env_.who + ": stage 3: prefetch after step " + std::to_string(steps));
    }
  }
  return Status::Ok();
}

StatusOr<void*> ParamGatherer::view(int p, const std::string& label) {
  const DType cdt = opt_.compute_dtype;
  const ParamPlacement& pl = layout_.params()[static_cast<size_t>(p)];
  if (!opt_.zero.shards_params()) {
    for (int b = pl.first_bucket; b <= pl.last_bucket; ++b) {
      if (!pending_[static_cast<size_t>(b)]) continue;
      timeline_.compute(TimelineEvent::Kind::kCommWaitBegin, b, CollectiveOp::kAllGather);
      Status s =
          env_.exec->compute_after(*gathered_[static_cast<size_t>(b)],
                                   env_.who + ": param(" + label + "): all-gather of bucket " + std::to_string(b));
      timeline_.compute(TimelineEvent::Kind::kCommWaitEnd, b, CollectiveOp::kAllGather);
      ZDP_RETURN_IF_ERROR(s);
      pending_[static_cast<size_t>(b)] = 0;
    }
    return elem_ptr(full_.data(), pl.offset, cdt);
  }
  // Inside an open scope only: a layer group that is merely prefetched also holds its slot,
  // but its all-gather may still be writing it, and only entering the scope orders the
  // compute stream after it.
  const int li = index_of(pl.layer);
  if (li < 0 || scope_depth_[static_cast<size_t>(li)] == 0) return static_cast<void*>(nullptr);
  const int slot = gather_slots_.find(li);
  if (slot < 0 || !gather_slots_.held(slot)) {
    return env_.invalid("param(" + label + "): layer group " + std::to_string(pl.layer) +
                        " is in scope but holds no gathered buffer");
  }
  const int64_t base = bucket(layout_.layer_buckets(pl.layer).first).begin;
  return elem_ptr(gather_slots_.data(slot), pl.offset - base, cdt);
}

void ParamGatherer::count_memory(int64_t* measured) const {
  for (const DeviceBuffer* b : {&full_, &shard_}) {
    if (!b->empty()) measured[static_cast<int>(b->category())] += b->bytes();
  }
  measured[static_cast<int>(MemCategory::kBuckets)] += gather_slots_.slot_bytes() * gather_slots_.size();
}

}  // namespace zdp
