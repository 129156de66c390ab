// GradReducer::launch_ordered: deterministic mode's reduction of one bucket for the
// current micro-batch. Every rank's gradient of the bucket is all-gathered (compute
// dtype, as the trainer wrote it), and each rank pushes the world's leaves of this
// micro-batch (global micro-batch m x K + r for r = 0..K-1: in global order) into the
// OrderedSum stack of its owned range (the whole bucket at stage 0), all on the
// communication stream; after the step's last leaf the sum, fp32 until then, is rounded
// once into the reduced gradient. Neither the ring's order nor the slice cut touches a
// sum: it costs K x the bytes a reduce-scatter sends (docs/design.md).
#include "engine/src/grad_reducer.h"

namespace zdp {

Status GradReducer::launch_ordered(int b) {
  const DType cdt = opt_.compute_dtype;
  Exec& exec = *env_.exec;
  const Bucket& bk = bucket(b);
  BucketState& st = buckets_[static_cast<size_t>(b)];
  GradGroup& g = groups_[static_cast<size_t>(st.group)];
  if (ordered_.ops_micro != micro_.index) {  // the first bucket of this micro-batch
    ordered_.ops = ordered_.sum.push(env_.world);
    ordered_.ops_micro = micro_.index;
  }
  // This rank's range of the bucket: all of it at stage 0, its slice otherwise, and
  // where that range's entries of the stack live (stride: the stack entry's size).
  const bool whole = !opt_.zero.shards_optimizer();
  const int64_t count = whole ? bk.size : bk.slice_size();
  const int64_t within = whole ? 0 : env_.rank * bk.slice_size();
  const int64_t stride = whole ? layout_.total_elems() : layout_.shard_elems();
  const int64_t base = whole ? bk.begin : layout_.shard_offset(b);
  float* partials = mem_.partials.as<float>();
  auto entry = [&](int i) { return partials + static_cast<int64_t>(i) * stride + base; };
  auto leaf = [&](int r) { return elem_ptr(mem_.gathered.data(), static_cast<int64_t>(r) * bk.size + within, cdt); };

  void* in = in_bucket(b);
  ZDP_RETURN_IF_ERROR(exec.comm_after_compute());
  Stream& stream = exec.comm();
  // The all-gather's output, as every timeline collective counts (TimelineEvent::bytes).
  const int64_t bytes = env_.world * bk.size * static_cast<int64_t>(dtype_size(cdt));
  timeline_.collective(TimelineEvent::Kind::kReduceStart, b, CollectiveOp::kAllGather, bytes);
  ZDP_RETURN_IF_ERROR(env_.comm.all_gather(in, mem_.gathered.data(), bk.size, cdt, stream, b));
  for (const OrderedSum::Op& op : ordered_.ops) {
    kernels::FoldArgs f;
    f.out = entry(op.dst);
    f.out_dtype = DType::kF32;
    f.count = count;
    if (op.kind == OrderedSum::Op::Kind::kMerge) {
      f.in = entry(op.src);
      f.in_dtype = DType::kF32;
      f.acc = entry(op.dst);
    } else {
      f.in = leaf(op.leaf);
      f.in_dtype = cdt;
      f.acc = op.kind == OrderedSum::Op::Kind::kMergeLeaf ? entry(op.dst) : nullptr;
    }
    ZDP_RETURN_IF_ERROR(exec.fold_on_comm(f));
  }
  if (ordered_.sum.complete()) {  // the step's sum, rounded once into the reduce dtype
    void* out = whole ? reduced(bk.begin, 0) : reduced_slice(b);
    const DType wire = opt_.zero.reduce_dtype;
    if (reduced_dtype() == wire) {
      ZDP_RETURN_IF_ERROR(exec.fold_on_comm(kernels::FoldArgs{entry(0), DType::kF32, nullptr, out, wire, count}));
    } else {
      // Sharded accumulation's shard is fp32, but the sum must be the other modes' bits:
      // rounded into the reduce dtype (through the gather buffer, whose leaves the folds
      // above, earlier on this stream, have consumed; it holds K x the bucket in the
      // compute dtype, at least 2 bytes, so the range fits), then widened into the shard.
      void* rounded = mem_.gathered.data();
      ZDP_RETURN_IF_ERROR(exec.fold_on_comm(kernels::FoldArgs{entry(0), DType::kF32, nullptr, rounded, wire, count}));
      ZDP_RETURN_IF_ERROR(exec.fold_on_comm(kernels::FoldArgs{rounded, wire, nullptr, out, reduced_dtype(), count}));
    }
  }
  ZDP_RETURN_IF_ERROR(stream.record(*st.reduced));
  timeline_.collective(TimelineEvent::Kind::kReduceEnd, b, CollectiveOp::kAllGather, bytes);
  if (opt_.zero.shards_grads() && --g.unhanded == 0) {
    // The staging buffer is free once the gather has sent it.
    ZDP_RETURN_IF_ERROR(stream.record(mem_.grad_slots.event(g.slot)));
    mem_.grad_slots.release(g.slot);
    g.slot = -1;
  }
  return Status::Ok();
}

}  // namespace zdp
