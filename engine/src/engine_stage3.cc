// Parameter views: stage 3 gathers each layer group into a lent buffer before use
// (prefetching the next groups in the pass's direction) and releases it after; a
// released group stays valid until its buffer is lent again or the parameters change, so
// backward finds the last forward layers still gathered. Stages 0-2 with
// overlap_param_gather order each view after its own buckets' all-gathers.
#include <algorithm>

#include "engine/src/engine_impl.h"

namespace zdp {
namespace {

// Index of `layer` in the ascending list of layer groups, or -1.
int index_of(const std::vector<int>& ids, int layer) {
  const auto it = std::lower_bound(ids.begin(), ids.end(), layer);
  return it != ids.end() && *it == layer ? static_cast<int>(it - ids.begin()) : -1;
}

// A held buffer holding layer group `li`: the one that still holds it, or a lent one into
// which its all-gathers are issued. Buffers stay held from a prefetch to the end of the
// scope that uses them, so another prefetch never evicts them; released ones are lent
// again least recently released first (the layers furthest behind the pass).
// `prefetch`: give up (-1) rather than grow the pool.
StatusOr<int> gather_layer(Engine::Impl& m, int li, bool prefetch) {
  const int cached = m.gather_slots.find(li);
  if (cached >= 0) {
    m.gather_slots.hold(cached);
    return cached;
  }
  if (prefetch && m.gather_slots.held_count() == m.gather_slots.size()) return -1;
  ZDP_ASSIGN_OR_RETURN(const int slot, m.gather_slots.acquire(li));
  // Whoever read the buffer last (the compute stream) must be done; and the shard the
  // gather sends was written by the optimizer on the compute stream.
  ZDP_RETURN_IF_ERROR(m.exec->comm().wait(m.gather_slots.event(slot)));
  ZDP_RETURN_IF_ERROR(m.exec->comm_after_compute());
  const auto [first, end] = m.layout.layer_buckets(m.layer_ids[static_cast<size_t>(li)]);
  const int64_t base = m.bucket(first).begin;
  for (int b = first; b < end; ++b) {
    const Bucket& bk = m.bucket(b);
    const int64_t bytes = bk.size * static_cast<int64_t>(dtype_size(m.cdt()));
    m.trace(TimelineEvent::Kind::kGatherStart, b, CollectiveOp::kAllGather, bytes);
    ZDP_RETURN_IF_ERROR(m.comm.all_gather(elem_ptr(m.params_shard.data(), m.layout.shard_offset(b), m.cdt()),
                                          elem_ptr(m.gather_slots.data(slot), bk.begin - base, m.cdt()),
                                          bk.slice_size(), m.cdt(), m.exec->comm(), b));
    ZDP_RETURN_IF_ERROR(m.exec->comm().record(*m.buckets[static_cast<size_t>(b)].gathered));
    m.trace(TimelineEvent::Kind::kGatherEnd, b, CollectiveOp::kAllGather, bytes);
  }
  return slot;
}

}  // namespace

Status Engine::Impl::enter_layer(int layer, Pass pass) {
  const int li = index_of(layer_ids, layer);
  if (li < 0) return Status::Ok();  // a layer group without parameters: nothing to gather
  const std::string what = who + ": stage 3: layer group " + std::to_string(layer);
  if (scope_depth[static_cast<size_t>(li)] == 0) {
    StatusOr<int> slot = gather_layer(*this, li, false);
    if (!slot.ok()) return fail(slot.status().with_context(what + ": all-gather"));
    const auto [first, end] = layout.layer_buckets(layer);
    stamp(TimelineEvent::Kind::kCommWaitBegin, first, CollectiveOp::kAllGather);
    for (int b = first; b < end; ++b) {
      ZDP_RETURN_IF_ERROR(fail(exec->compute_after(*buckets[static_cast<size_t>(b)].gathered,
                                                   what + ": all-gather of bucket " + std::to_string(b))));
    }
    stamp(TimelineEvent::Kind::kCommWaitEnd, first, CollectiveOp::kAllGather);
  }
  ++scope_depth[static_cast<size_t>(li)];
  const int direction = pass == Pass::kForward ? 1 : -1;
  for (int k = 1; k <= opt.prefetch_layers; ++k) {
    const int next = li + direction * k;
    if (next < 0 || next >= static_cast<int>(layer_ids.size())) break;
    StatusOr<int> slot = gather_layer(*this, next, true);
    if (!slot.ok()) return fail(slot.status().with_context(what + ": prefetch of layer group " +
                                                           std::to_string(layer_ids[static_cast<size_t>(next)])));
  }
  return Status::Ok();
}

void Engine::Impl::exit_layer(int layer) {
  const int li = index_of(layer_ids, layer);
  if (li < 0 || scope_depth[static_cast<size_t>(li)] == 0) return;
  if (--scope_depth[static_cast<size_t>(li)] > 0) return;
  const int slot = gather_slots.find(li);
  if (slot < 0) return;
  // The buffer is free once the compute work issued inside the scope has read it.
  Status s = exec->record_compute(gather_slots.event(slot));
  if (!s.ok()) defer(s.with_context(who + ": stage 3: release of layer group " + std::to_string(layer)));
  gather_slots.release(slot);
}

void Engine::Impl::invalidate_gathered() {
  // No scope is open at step(), so what is still held was prefetched; the last writer of
  // those buffers was a gather on the comm stream, which orders the next one anyway.
  for (int slot = 0; slot < gather_slots.size(); ++slot) {
    if (gather_slots.held(slot)) gather_slots.release(slot);
  }
  gather_slots.forget_released();
}

Status Engine::Impl::prefetch_after_step() {
  const int n = std::min<int>(std::max(1, opt.prefetch_layers), static_cast<int>(layer_ids.size()));
  for (int li = 0; li < n; ++li) {
    StatusOr<int> slot = gather_layer(*this, li, true);
    if (!slot.ok()) return slot.status().with_context(who + ": stage 3: prefetch after step " + std::to_string(steps));
  }
  return Status::Ok();
}

void* Engine::Impl::param_ptr(int p) {
  if (!view_allowed("param", p)) return nullptr;
  const ParamPlacement& pl = placement(p);
  if (opt.stage < 3) {
    for (int b = pl.first_bucket; b <= pl.last_bucket; ++b) {
      BucketState& st = buckets[static_cast<size_t>(b)];
      if (!st.gather_pending) continue;
      stamp(TimelineEvent::Kind::kCommWaitBegin, b, CollectiveOp::kAllGather);
      Status s = exec->compute_after(*st.gathered, who + ": param(" + param_label(p) + "): all-gather of bucket " +
                                                       std::to_string(b));
      stamp(TimelineEvent::Kind::kCommWaitEnd, b, CollectiveOp::kAllGather);
      if (!s.ok()) {
        defer(s);
        return nullptr;
      }
      st.gather_pending = false;
    }
    return elem_ptr(params_full.data(), pl.offset, cdt());
  }
  const int li = index_of(layer_ids, pl.layer);
  const int slot = gather_slots.find(li);
  if (slot < 0 || !gather_slots.held(slot)) {
    defer(invalid("param(" + param_label(p) + "): stage 3 parameters exist only inside a scope of their layer group (" +
                 std::to_string(pl.layer) + ")"));
    return nullptr;
  }
  const int64_t base = bucket(layout.layer_buckets(pl.layer).first).begin;
  return elem_ptr(gather_slots.data(slot), pl.offset - base, cdt());
}

}  // namespace zdp
