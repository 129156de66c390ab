// QuantizedExchange: block-quantized reduce-scatter (all-to-all) with error feedback and
// quantized all-gather (see the header for why).
#include "engine/src/quantized_exchange.h"

#include <algorithm>
#include <string>

#include "engine/src/host_collective.h"
#include "zdp/log.h"

namespace zdp {

Status QuantizedExchange::allocate(const BufferSizes& z) {
  if (z.error_feedback > 0) {
    ZDP_RETURN_IF_ERROR(env_.allocate(error_, z.error_feedback, MemCategory::kGrads, "error feedback", true));
    error_scale_.assign(layout_.buckets().size(), loss_scale_());
  }
  if (z.reduce_wire.count > 0) {
    ZDP_RETURN_IF_ERROR(reduce_wire_.init(env_.device, env_.who + ": quantized gradient chunks",
                                          z.reduce_wire.slot_bytes, z.reduce_wire.count, MemCategory::kBuckets));
  }
  if (z.gather_wire.count > 0) {
    ZDP_RETURN_IF_ERROR(gather_wire_.init(env_.device, env_.who + ": quantized parameter chunks",
                                          z.gather_wire.slot_bytes, z.gather_wire.count, MemCategory::kBuckets));
  }
  return Status::Ok();
}

Status QuantizedExchange::reduce_scatter(int b, const float* send, float* out, bool accumulate) {
  if (!node_of_.empty()) return reduce_scatter_mixed(b, send, out, accumulate);
  Exec& exec = *env_.exec;
  const Bucket& bk = layout_.buckets()[static_cast<size_t>(b)];
  const int K = env_.world, bits = wire_bits(opt_.zero.reduce_quant);
  const int64_t slice = bk.slice_size();
  const int64_t chunk = wire_chunk_bytes(slice, opt_.zero.reduce_quant);
  ZDP_ASSIGN_OR_RETURN(const int slot, reduce_wire_.acquire(b));
  char* wire_send = static_cast<char*>(reduce_wire_.data(slot));
  char* wire_recv = wire_send + K * chunk;
  // The slot's previous exchange (on the communication stream) must be done with it.
  timeline_.compute(TimelineEvent::Kind::kCommWaitBegin, b, CollectiveOp::kAllToAll);
  ZDP_RETURN_IF_ERROR(exec.compute_after(reduce_wire_.event(slot), "quantized gradient chunks"));
  timeline_.compute(TimelineEvent::Kind::kCommWaitEnd, b, CollectiveOp::kAllToAll);
  ZDP_RETURN_IF_ERROR(match_loss_scale(b));
  float* error = error_.empty() ? nullptr : error_.as<float>() + bk.begin;
  for (int q = 0; q < K; ++q) {
    if (q == env_.rank) continue;  // the own slice never travels: summed exactly below
    ZDP_RETURN_IF_ERROR(exec.quantize(kernels::QuantizeArgs{send + q * slice, DType::kF32,
                                                            error == nullptr ? nullptr : error + q * slice, slice,
                                                            bits, wire_send + q * chunk}));
  }
  ZDP_RETURN_IF_ERROR(exec.comm_after_compute());
  Stream& stream = exec.comm();
  timeline_.collective(TimelineEvent::Kind::kReduceStart, b, CollectiveOp::kAllToAll, K * chunk);
  ZDP_RETURN_IF_ERROR(env_.comm.all_to_all(wire_send, wire_recv, chunk / 4, DType::kF32, stream, b));
  ZDP_RETURN_IF_ERROR(exec.dequant_sum_on_comm(kernels::DequantSumArgs{
      wire_recv, chunk, K, env_.rank, send + env_.rank * slice, out, accumulate, slice, bits}));
  timeline_.collective(TimelineEvent::Kind::kReduceEnd, b, CollectiveOp::kAllToAll, K * chunk);
  ZDP_RETURN_IF_ERROR(stream.record(reduce_wire_.event(slot)));
  reduce_wire_.release(slot);
  return Status::Ok();
}

Status QuantizedExchange::all_gather(int b, const void* own, void* out, int64_t count) {
  if (!node_of_.empty()) return all_gather_mixed(b, own, out, count);
  Exec& exec = *env_.exec;
  const int K = env_.world, bits = wire_bits(opt_.zero.gather_quant);
  const int64_t chunk = wire_chunk_bytes(count, opt_.zero.gather_quant);
  ZDP_ASSIGN_OR_RETURN(const int slot, gather_wire_.acquire(b));
  char* wire_own = static_cast<char*>(gather_wire_.data(slot));
  char* wire_all = wire_own + chunk;
  Stream& stream = exec.comm();
  ZDP_RETURN_IF_ERROR(stream.wait(gather_wire_.event(slot)));  // same stream: already ordered, kept for clarity
  ZDP_RETURN_IF_ERROR(
      exec.quantize_on_comm(kernels::QuantizeArgs{own, opt_.compute_dtype, nullptr, count, bits, wire_own}));
  timeline_.collective(TimelineEvent::Kind::kGatherStart, b, CollectiveOp::kAllGather, K * chunk);
  ZDP_RETURN_IF_ERROR(env_.comm.all_gather(wire_own, wire_all, chunk / 4, DType::kF32, stream, b));
  ZDP_RETURN_IF_ERROR(exec.dequantize_on_comm(
      kernels::DequantizeArgs{wire_all, chunk, K, count, bits, out, opt_.compute_dtype}));
  timeline_.collective(TimelineEvent::Kind::kGatherEnd, b, CollectiveOp::kAllGather, K * chunk);
  ZDP_RETURN_IF_ERROR(stream.record(gather_wire_.event(slot)));
  gather_wire_.release(slot);
  return Status::Ok();
}

Status QuantizedExchange::match_loss_scale(int b) {
  if (error_.empty()) return Status::Ok();
  const double now = loss_scale_();
  double& kept_at = error_scale_[static_cast<size_t>(b)];
  if (now == kept_at) return Status::Ok();
  const Bucket& bk = layout_.buckets()[static_cast<size_t>(b)];
  // The scales are powers of two with the default growth and backoff factors: exact.
  const float ratio = static_cast<float>(now / kept_at);
  kept_at = now;
  return env_.exec->scale(kernels::ScaleArgs{error_.as<float>() + bk.begin, DType::kF32, bk.size, ratio});
}

Status QuantizedExchange::reset_error() {
  if (error_.empty()) return Status::Ok();
  error_scale_.assign(layout_.buckets().size(), loss_scale_());
  return env_.exec->memset(error_.data(), 0, error_.bytes());
}

void QuantizedExchange::count_memory(int64_t* measured) const {
  if (!error_.empty()) measured[static_cast<int>(error_.category())] += error_.bytes();
  for (const SlotPool* pool : {&reduce_wire_, &gather_wire_}) {
    measured[static_cast<int>(MemCategory::kBuckets)] += pool->slot_bytes() * pool->size();
  }
}

}  // namespace zdp
