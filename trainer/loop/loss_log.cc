// LossLog (loss_log.h).
#include "trainer/loop/loss_log.h"

#include <chrono>

namespace zdp::trainer {

StatusOr<std::unique_ptr<LossLog>> LossLog::create(Context& ctx, Ops& ops, Stream& stream, int64_t capacity) {
  if (capacity < 1) return Status(StatusCode::kInvalidArgument, "loss log: capacity " + std::to_string(capacity));
  std::unique_ptr<LossLog> log(new LossLog(ctx, stream, capacity));
  ZDP_ASSIGN_OR_RETURN(log->sum_, ops.alloc_bytes(sizeof(double)));
  ZDP_ASSIGN_OR_RETURN(log->slots_, ops.alloc(capacity, DType::kF32));
  ZDP_ASSIGN_OR_RETURN(log->host_, ctx.device().allocate(capacity * static_cast<int64_t>(sizeof(float)),
                                                         MemCategory::kOther, MemSpace::kPinnedHost));
  ZDP_ASSIGN_OR_RETURN(log->copied_, ctx.device().create_event());
  return log;
}

LossSink LossLog::sink(int64_t micro, int64_t accum) {
  LossSink s;
  s.sum = sum_.as<double>();
  s.divide_by = static_cast<double>(accum);
  s.first = micro == 0;
  if (micro + 1 == accum) s.rounded = slots_.as<float>() + (first_ + unread_) % capacity_;
  return s;
}

Status LossLog::end_step() {
  const int64_t slot = (first_ + unread_) % capacity_;
  float* value = slots_.as<float>() + slot;
  if (ctx_.world_size() > 1) {
    ZDP_RETURN_IF_ERROR(ctx_.comm().all_reduce(value, value, 1, DType::kF32, ReduceOp::kSum, stream_));
  }
  ZDP_RETURN_IF_ERROR(stream_.memcpy_async(host_.as<float>() + slot, value, sizeof(float)));
  ZDP_RETURN_IF_ERROR(stream_.record(*copied_));
  ++unread_;
  return Status::Ok();
}

StatusOr<std::vector<double>> LossLog::read() {
  std::vector<double> out;
  if (unread_ == 0) return out;
  Status s = copied_->wait(ctx_.collective_timeout() + std::chrono::seconds(10));
  if (!s.ok()) return s.with_context("rank " + std::to_string(ctx_.rank()) + ": the training loss of the last steps");
  for (int64_t i = 0; i < unread_; ++i) {
    const float summed = host_.as<float>()[(first_ + i) % capacity_];
    out.push_back(summed / ctx_.world_size());  // in fp32, as dp-train always divided
  }
  first_ = (first_ + unread_) % capacity_;
  unread_ = 0;
  return out;
}

}  // namespace zdp::trainer
