// LossLog (loss_log.h).
#include "trainer/loop/loss_log.h"

#include <chrono>

namespace zdp::trainer {

StatusOr<std::unique_ptr<LossLog>> LossLog::create(Context& ctx, Ops& ops, Stream& stream, int64_t capacity,
                                                   int64_t accum, Order order) {
  if (capacity < 1 || accum < 1) {
    return Status(StatusCode::kInvalidArgument,
                  "loss log: capacity " + std::to_string(capacity) + ", accum " + std::to_string(accum));
  }
  std::unique_ptr<LossLog> log(new LossLog(ctx, stream, capacity, accum, order));
  Device& device = ctx.device();
  if (order == Order::kGlobalMicroBatches) {
    const int64_t per_step = ctx.world_size() * accum;
    ZDP_ASSIGN_OR_RETURN(log->micro_, ops.alloc_bytes(capacity * accum * static_cast<int64_t>(sizeof(double))));
    ZDP_ASSIGN_OR_RETURN(log->gathered_, ops.alloc_bytes(per_step * static_cast<int64_t>(sizeof(double))));
    ZDP_ASSIGN_OR_RETURN(log->host_means_, device.allocate(capacity * per_step * static_cast<int64_t>(sizeof(double)),
                                                           MemCategory::kOther, MemSpace::kPinnedHost));
  } else {
    ZDP_ASSIGN_OR_RETURN(log->sum_, ops.alloc_bytes(sizeof(double)));
    ZDP_ASSIGN_OR_RETURN(log->slots_, ops.alloc(capacity, DType::kF32));
    // Zeros: every slot goes into read()'s all-reduce, the ones no step wrote yet too.
    // Waited for: on CPU ranks the model writes a slot on the host thread, not in stream
    // order, and a zeroing still queued overwrote step 1's loss (a K = 2 curve read 0).
    ZDP_RETURN_IF_ERROR(stream.memset_async(log->slots_.data(), 0, static_cast<size_t>(capacity) * sizeof(float)));
    ZDP_RETURN_IF_ERROR(stream.synchronize(ctx.collective_timeout() + std::chrono::seconds(10)));
    ZDP_ASSIGN_OR_RETURN(log->host_, device.allocate(capacity * static_cast<int64_t>(sizeof(float)),
                                                     MemCategory::kOther, MemSpace::kPinnedHost));
  }
  ZDP_ASSIGN_OR_RETURN(log->copied_, device.create_event());
  return log;
}

LossSink LossLog::sink(int64_t micro, int64_t accum) {
  LossSink s;
  if (order_ == Order::kGlobalMicroBatches) {  // the micro-batch's own mean, in its own slot
    s.sum = micro_.as<double>() + ((first_ + unread_) % capacity_) * accum_ + micro;
    s.first = true;
    return s;
  }
  s.sum = sum_.as<double>();
  s.divide_by = static_cast<double>(accum);
  s.first = micro == 0;
  if (micro + 1 == accum) s.rounded = slots_.as<float>() + (first_ + unread_) % capacity_;
  return s;
}

Status LossLog::end_step() {
  if (order_ == Order::kGlobalMicroBatches) {
    ZDP_RETURN_IF_ERROR(end_step_ordered((first_ + unread_) % capacity_));
    ZDP_RETURN_IF_ERROR(stream_.record(*copied_));
  }
  // kPerRank: the step's mean stays in its slot; read() sums the slots over the ranks.
  ++unread_;
  return Status::Ok();
}

Status LossLog::sum_over_ranks() {
  // One all-reduce of every slot per read, not one a step on the compute stream: the
  // slots already read hold sums that are overwritten before they are read again (each
  // step's last micro-batch writes its slot whole), so summing them too changes nothing
  // read. Every rank reads at the same steps (the log interval, evaluations, saves, a full
  // log), so the collectives match.
  float* slots = slots_.as<float>();
  if (ctx_.world_size() > 1) {
    ZDP_RETURN_IF_ERROR(ctx_.comm().all_reduce(slots, slots, capacity_, DType::kF32, ReduceOp::kSum, stream_));
  }
  ZDP_RETURN_IF_ERROR(stream_.memcpy_async(host_.as<float>(), slots, static_cast<size_t>(capacity_) * sizeof(float)));
  return stream_.record(*copied_);
}

Status LossLog::end_step_ordered(int64_t slot) {
  const int64_t per_step = ctx_.world_size() * accum_;
  const double* means = micro_.as<double>() + slot * accum_;
  if (ctx_.world_size() > 1) {
    // Doubles travel as int64 words: an all-gather moves bytes, nothing is added.
    ZDP_RETURN_IF_ERROR(ctx_.comm().all_gather(means, gathered_.data(), accum_, DType::kI64, stream_));
    means = gathered_.as<double>();
  }
  return stream_.memcpy_async(host_means_.as<double>() + slot * per_step, means,
                              static_cast<size_t>(per_step) * sizeof(double));
}

double LossLog::ordered_mean(int64_t slot) const {
  const int64_t K = ctx_.world_size(), M = K * accum_;
  const double* means = host_means_.as<double>() + slot * M;
  double sum = 0;
  for (int64_t g = 0; g < M; ++g) sum += means[(g % K) * accum_ + g / K];  // rank g % K, its micro-batch g / K
  return sum / static_cast<double>(M);
}

StatusOr<std::vector<double>> LossLog::read() {
  std::vector<double> out;
  if (unread_ == 0) return out;
  if (order_ == Order::kPerRank) ZDP_RETURN_IF_ERROR(sum_over_ranks());
  Status s = copied_->wait(ctx_.collective_timeout() + std::chrono::seconds(10));
  if (!s.ok()) return s.with_context("rank " + std::to_string(ctx_.rank()) + ": the training loss of the last steps");
  for (int64_t i = 0; i < unread_; ++i) {
    const int64_t slot = (first_ + i) % capacity_;
    if (order_ == Order::kGlobalMicroBatches) {
      out.push_back(ordered_mean(slot));
    } else {
      const float summed = host_.as<float>()[slot];
      out.push_back(summed / ctx_.world_size());  // in fp32, as dp-train always divided
    }
  }
  first_ = (first_ + unread_) % capacity_;
  unread_ = 0;
  return out;
}

}  // namespace zdp::trainer
