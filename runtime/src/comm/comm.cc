// Backend-independent half of every communicator: argument checks, sequence numbers,
// descriptors and the sticky first error.
#include "zdp/comm.h"

#include <cstdio>

#include "zdp/log.h"

namespace zdp {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "all_reduce";
    case CollectiveOp::kReduceScatter: return "reduce_scatter";
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kBarrier: return "barrier";
  }
  return "?";
}

std::string CollectiveDesc::describe() const {
  std::string s = std::string(to_string(op)) + " #" + std::to_string(seq) + " (";
  if (tag >= 0) s += "tag " + std::to_string(tag) + ", ";
  if (op == CollectiveOp::kBarrier) return s + "world " + std::to_string(world_size) + ")";
  if (op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter) s += std::string(to_string(reduce)) + ", ";
  if (op == CollectiveOp::kBroadcast) s += "root " + std::to_string(root) + ", ";
  s += std::to_string(count) + " x " + to_string(dtype) + " = " + format_bytes(bytes());
  if (op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather) s += " per rank";
  return s + ", world " + std::to_string(world_size) + ")";
}

Status Communicator::all_reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op,
                                Stream& stream, int64_t tag) {
  CollectiveDesc d;
  d.op = CollectiveOp::kAllReduce;
  d.dtype = dtype;
  d.reduce = op;
  d.count = count;
  d.tag = tag;
  return submit(d, Buffers{send, recv}, stream);
}

Status Communicator::reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype, ReduceOp op,
                                    Stream& stream, int64_t tag) {
  CollectiveDesc d;
  d.op = CollectiveOp::kReduceScatter;
  d.dtype = dtype;
  d.reduce = op;
  d.count = recv_count;
  d.tag = tag;
  return submit(d, Buffers{send, recv}, stream);
}

Status Communicator::all_gather(const void* send, void* recv, int64_t send_count, DType dtype, Stream& stream,
                                int64_t tag) {
  CollectiveDesc d;
  d.op = CollectiveOp::kAllGather;
  d.dtype = dtype;
  d.count = send_count;
  d.tag = tag;
  return submit(d, Buffers{send, recv}, stream);
}

Status Communicator::broadcast(void* buffer, int64_t count, DType dtype, int root, Stream& stream, int64_t tag) {
  CollectiveDesc d;
  d.op = CollectiveOp::kBroadcast;
  d.dtype = dtype;
  d.count = count;
  d.root = root;
  d.tag = tag;
  return submit(d, Buffers{buffer, buffer}, stream);
}

Status Communicator::barrier(Stream& stream) {
  CollectiveDesc d;
  d.op = CollectiveOp::kBarrier;
  return submit(d, Buffers{}, stream);
}

Status Communicator::submit(CollectiveDesc desc, Buffers buffers, Stream& stream) {
  desc.world_size = world_size_;
  auto invalid = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument, context(desc) + ": " + why);
  };
  if (desc.count < 0) return invalid("negative count " + std::to_string(desc.count));
  if (desc.op == CollectiveOp::kBroadcast && (desc.root < 0 || desc.root >= world_size_)) {
    return invalid("root " + std::to_string(desc.root) + " is not a rank of a world of " + std::to_string(world_size_));
  }
  if (desc.dtype == DType::kI64 && desc.reduce == ReduceOp::kAvg &&
      (desc.op == CollectiveOp::kAllReduce || desc.op == CollectiveOp::kReduceScatter)) {
    return invalid("avg is not defined for int64 (the mean of integers is not an integer); use sum");
  }
  if (desc.op != CollectiveOp::kBarrier && desc.count > 0 && (buffers.send == nullptr || buffers.recv == nullptr)) {
    return invalid("null buffer for a non-empty collective");
  }
  if (stream.device().kind() != device_.kind()) {
    return invalid(std::string("stream '") + stream.name() + "' is on a " + to_string(stream.device().kind()) +
                   " device, the communicator on " + to_string(device_.kind()));
  }
  desc.seq = next_seq_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_.ok()) {
      return Status(StatusCode::kAborted, context(desc) + ": not started, the communicator failed earlier: " +
                                              error_.message());
    }
  }
  ZDP_LOG(kDebug) << backend() << ": enqueue " << desc.describe() << " on stream '" << stream.name() << "'";
  return launch(desc, buffers, stream);
}

Status Communicator::error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return error_;
}

Status Communicator::fail(const Status& status) {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (error_.ok()) {
    error_ = status;
    ZDP_LOG(kError) << backend() << " communicator failed: " << status.to_string();
  }
  return error_;
}

std::string Communicator::context(const CollectiveDesc& desc) const {
  return "rank " + std::to_string(rank_) + ": " + std::string(backend()) + " " + desc.describe();
}

}  // namespace zdp
