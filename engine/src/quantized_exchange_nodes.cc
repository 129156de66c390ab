// QuantizedExchange with zero.compress = "inter-node" (see the header): the node map, and
// the reduce-scatter and all-gather whose chunks are exact to same-node peers and
// quantized to the others.
#include <map>
#include <string>

#include "engine/src/host_collective.h"
#include "engine/src/quantized_exchange.h"
#include "zdp/log.h"

namespace zdp {

Status QuantizedExchange::setup_nodes() {
  if (opt_.zero.compress != CompressScope::kInterNode || (!reduces() && !gathers())) return Status::Ok();
  const int K = env_.world;
  const LaunchEnv& launch = env_.ctx.launch_env();
  // Each rank's node and how many ranks its launcher says its node has (0: not checked;
  // Slurm's first task count need not be every node's). All-reduced, so every rank holds
  // the same map and every rank finds the same problem.
  std::vector<int64_t> v(static_cast<size_t>(2 * K), 0);
  v[static_cast<size_t>(env_.rank)] = launch.node_rank;
  v[static_cast<size_t>(K + env_.rank)] = launch.origin == "slurm" ? 0 : launch.local_world_size;
  ZDP_RETURN_IF_ERROR(all_reduce_i64(env_, v, ReduceOp::kSum, "zero.compress = \"inter-node\": each rank's node"));
  std::map<int64_t, int> ranks_on;
  for (int r = 0; r < K; ++r) ++ranks_on[v[static_cast<size_t>(r)]];
  for (int r = 0; r < K; ++r) {
    const int64_t node = v[static_cast<size_t>(r)], local = v[static_cast<size_t>(K + r)];
    if (local != 0 && local != ranks_on[node]) {
      return env_.invalid("zero.compress = \"inter-node\": rank " + std::to_string(r) + " is on node " +
                          std::to_string(node) + " (GROUP_RANK, SLURM_NODEID or RANK / LOCAL_WORLD_SIZE) with " +
                          "LOCAL_WORLD_SIZE " + std::to_string(local) + ", but " + std::to_string(ranks_on[node]) +
                          " rank(s) say they are on node " + std::to_string(node) +
                          ": the launchers disagree on the job's nodes");
    }
  }
  node_of_.assign(v.begin(), v.begin() + K);
  if (env_.rank == 0) {
    const int n = static_cast<int>(ranks_on.size());
    if (n == 1) {
      ZDP_LOG(kInfo) << "zero.compress = \"inter-node\": all " << K
                     << " ranks are on one node, so nothing is quantized (every chunk goes in full precision)";
    } else {
      ZDP_LOG(kInfo) << "zero.compress = \"inter-node\": " << K << " ranks on " << n
                     << " nodes; quantized chunks go only to peers on other nodes";
    }
  }
  return Status::Ok();
}

int64_t QuantizedExchange::timeline_bytes(int64_t sent) const {
  const int64_t K = env_.world;
  return K > 1 ? sent * K / (K - 1) : 0;
}

Status QuantizedExchange::sum_mixed(const char* recv, int64_t stride, const float* own, float* out, bool accumulate,
                                    int64_t slice, int bits) {
  Exec& exec = *env_.exec;
  const int K = env_.world;
  ZDP_RETURN_IF_ERROR(
      exec.fold_on_comm(kernels::FoldArgs{own, DType::kF32, accumulate ? out : nullptr, out, DType::kF32, slice}));
  for (int q = 0; q < K;) {
    if (q == env_.rank) {
      ++q;
      continue;
    }
    const char* chunk = recv + q * stride;
    if (exact_to(q)) {
      ZDP_RETURN_IF_ERROR(exec.fold_on_comm(kernels::FoldArgs{chunk, DType::kF32, out, out, DType::kF32, slice}));
      ++q;
      continue;
    }
    int end = q;  // a run of quantized chunks: one pass
    while (end < K && !exact_to(end)) ++end;
    ZDP_RETURN_IF_ERROR(exec.dequant_sum_on_comm(
        kernels::DequantSumArgs{chunk, stride, end - q, -1, nullptr, out, true, slice, bits}));
    q = end;
  }
  return Status::Ok();
}

Status QuantizedExchange::reduce_scatter_mixed(int b, const float* send, float* out, bool accumulate) {
  Exec& exec = *env_.exec;
  const Bucket& bk = layout_.buckets()[static_cast<size_t>(b)];
  const int K = env_.world, bits = wire_bits(opt_.zero.reduce_quant);
  const int64_t slice = bk.slice_size();
  const int64_t chunk = wire_chunk_bytes(slice, opt_.zero.reduce_quant);
  const int64_t stride = wire_stride_bytes(slice, opt_.zero.reduce_quant, opt_.zero.compress);
  ZDP_ASSIGN_OR_RETURN(const int slot, reduce_wire_.acquire(b));
  char* wire_send = static_cast<char*>(reduce_wire_.data(slot));
  char* wire_recv = wire_send + K * stride;
  timeline_.compute(TimelineEvent::Kind::kCommWaitBegin, b, CollectiveOp::kAllToAll);
  ZDP_RETURN_IF_ERROR(exec.compute_after(reduce_wire_.event(slot), "gradient chunks"));
  timeline_.compute(TimelineEvent::Kind::kCommWaitEnd, b, CollectiveOp::kAllToAll);
  ZDP_RETURN_IF_ERROR(match_loss_scale(b));
  float* error = error_.empty() ? nullptr : error_.as<float>() + bk.begin;
  AllToAllShape shape;
  shape.counts.assign(static_cast<size_t>(K), 0);
  int64_t sent = 0;
  for (int q = 0; q < K; ++q) {
    if (q == env_.rank) continue;  // the own slice never travels
    if (exact_to(q)) {             // same node: the fp32 slice as it is (its error stays 0)
      ZDP_RETURN_IF_ERROR(exec.copy(wire_send + q * stride, send + q * slice, slice * 4));
      shape.counts[static_cast<size_t>(q)] = slice;
      sent += slice * 4;
    } else {
      ZDP_RETURN_IF_ERROR(exec.quantize(kernels::QuantizeArgs{send + q * slice, DType::kF32,
                                                              error == nullptr ? nullptr : error + q * slice, slice,
                                                              bits, wire_send + q * stride}));
      shape.counts[static_cast<size_t>(q)] = chunk / 4;
      sent += chunk;
    }
  }
  ZDP_RETURN_IF_ERROR(exec.comm_after_compute());
  Stream& stream = exec.comm();
  timeline_.collective(TimelineEvent::Kind::kReduceStart, b, CollectiveOp::kAllToAll, timeline_bytes(sent));
  ZDP_RETURN_IF_ERROR(env_.comm.all_to_all(wire_send, wire_recv, stride / 4, DType::kF32, shape, stream, b));
  ZDP_RETURN_IF_ERROR(sum_mixed(wire_recv, stride, send + env_.rank * slice, out, accumulate, slice, bits));
  timeline_.collective(TimelineEvent::Kind::kReduceEnd, b, CollectiveOp::kAllToAll, timeline_bytes(sent));
  ZDP_RETURN_IF_ERROR(stream.record(reduce_wire_.event(slot)));
  reduce_wire_.release(slot);
  return Status::Ok();
}

Status QuantizedExchange::all_gather_mixed(int b, const void* own, void* out, int64_t count) {
  Exec& exec = *env_.exec;
  const int K = env_.world, bits = wire_bits(opt_.zero.gather_quant);
  const int64_t chunk = wire_chunk_bytes(count, opt_.zero.gather_quant);
  const int64_t csize = static_cast<int64_t>(dtype_size(opt_.compute_dtype));
  ZDP_ASSIGN_OR_RETURN(const int slot, gather_wire_.acquire(b));
  char* wire_own = static_cast<char*>(gather_wire_.data(slot));
  char* wire_all = wire_own + chunk;
  char* out_bytes = static_cast<char*>(out);
  Stream& stream = exec.comm();
  ZDP_RETURN_IF_ERROR(stream.wait(gather_wire_.event(slot)));
  // Two shaped exchanges of one shared chunk each: the quantized chunk to the peers of
  // other nodes, the compute-dtype slice itself to this node's (the own slice included,
  // unless it is already in place): this node's slices stay exact on this node.
  AllToAllShape quantized, exact;
  quantized.send_shared = exact.send_shared = true;
  quantized.counts.assign(static_cast<size_t>(K), 0);
  exact.counts.assign(static_cast<size_t>(K), 0);
  int64_t sent = 0;
  bool any_quantized = false;
  for (int q = 0; q < K; ++q) {
    if (exact_to(q)) {
      exact.counts[static_cast<size_t>(q)] = count;
      if (q != env_.rank) sent += count * csize;
    } else {
      quantized.counts[static_cast<size_t>(q)] = chunk / 4;
      sent += chunk;
      any_quantized = true;
    }
  }
  if (own == out_bytes + env_.rank * count * csize) exact.counts[static_cast<size_t>(env_.rank)] = 0;
  if (any_quantized) {
    ZDP_RETURN_IF_ERROR(
        exec.quantize_on_comm(kernels::QuantizeArgs{own, opt_.compute_dtype, nullptr, count, bits, wire_own}));
  }
  timeline_.collective(TimelineEvent::Kind::kGatherStart, b, CollectiveOp::kAllGather, timeline_bytes(sent));
  if (any_quantized) {
    ZDP_RETURN_IF_ERROR(env_.comm.all_to_all(wire_own, wire_all, chunk / 4, DType::kF32, quantized, stream, b));
  }
  ZDP_RETURN_IF_ERROR(env_.comm.all_to_all(own, out, count, opt_.compute_dtype, exact, stream, b));
  for (int q = 0; q < K;) {
    if (exact_to(q)) {
      ++q;
      continue;
    }
    int end = q;
    while (end < K && !exact_to(end)) ++end;
    ZDP_RETURN_IF_ERROR(exec.dequantize_on_comm(kernels::DequantizeArgs{
        wire_all + q * chunk, chunk, end - q, count, bits, out_bytes + q * count * csize, opt_.compute_dtype}));
    q = end;
  }
  timeline_.collective(TimelineEvent::Kind::kGatherEnd, b, CollectiveOp::kAllGather, timeline_bytes(sent));
  ZDP_RETURN_IF_ERROR(stream.record(gather_wire_.event(slot)));
  gather_wire_.release(slot);
  return Status::Ok();
}

}  // namespace zdp
