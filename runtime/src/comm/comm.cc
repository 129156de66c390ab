// Backend-independent half of every communicator: argument checks, sequence numbers,
// descriptors and the sticky first error.
#include "zdp/comm.h"

#include <cstdio>
#include <cstdlib>

#include "runtime/src/comm/comm_test_hook.h"
#include "runtime/src/comm/flight_recorder.h"
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
    case CollectiveOp::kAllToAll: return "all_to_all";
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
  if (op == CollectiveOp::kAllToAll) s += " per peer";
  return s + ", world " + std::to_string(world_size) + ")";
}

uint64_t CollectiveDesc::signature() const {
  // FNV-1a over the fields, each widened to 64 bits.
  uint64_t h = 0xcbf29ce484222325ull;
  for (const uint64_t v : {static_cast<uint64_t>(op), static_cast<uint64_t>(dtype), static_cast<uint64_t>(reduce),
                           static_cast<uint64_t>(count), static_cast<uint64_t>(root), static_cast<uint64_t>(tag),
                           static_cast<uint64_t>(world_size)}) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

std::string CollectiveRecord::describe(std::chrono::steady_clock::time_point now) const {
  auto secs = [](std::chrono::steady_clock::duration d) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3f s", std::chrono::duration<double>(d).count());
    return std::string(buf);
  };
  using TP = std::chrono::steady_clock::time_point;
  std::string s = desc.describe() + ": enqueued " + secs(now - enqueued) + " ago";
  if (ended != TP()) return s + (failed ? ", failed after " : ", done in ") + secs(ended - enqueued);
  if (started != TP()) return s + ", running for " + secs(now - started);
  return s + ", not finished";
}

Communicator::Communicator(int rank, int world_size, Device& device, CommOptions options)
    : rank_(rank),
      world_size_(world_size),
      device_(device),
      options_(std::move(options)),
      recorder_(std::make_shared<detail::FlightRecorder>(kFlightRecorderSize)) {
  if (const char* text = std::getenv("ZDP_TEST_COMM"); text != nullptr && *text != '\0') {
    StatusOr<detail::TestHook> hook = detail::parse_test_hook(text);
    if (hook.ok()) {
      test_hook_ = std::make_shared<detail::TestHook>(*hook);
    } else {
      error_ = hook.status();  // every collective fails with it: a typo must not test nothing
    }
  }
}

Status Communicator::all_reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op,
                                Stream& stream, int64_t tag) {
  CollectiveDesc d;
  d.op = CollectiveOp::kAllReduce;
  d.dtype = dtype;
  d.reduce = op;
  d.count = count;
  d.tag = tag;
  return submit(d, Buffers{send, recv, nullptr}, stream);
}

Status Communicator::reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype, ReduceOp op,
                                    Stream& stream, int64_t tag) {
  CollectiveDesc d;
  d.op = CollectiveOp::kReduceScatter;
  d.dtype = dtype;
  d.reduce = op;
  d.count = recv_count;
  d.tag = tag;
  return submit(d, Buffers{send, recv, nullptr}, stream);
}

Status Communicator::all_gather(const void* send, void* recv, int64_t send_count, DType dtype, Stream& stream,
                                int64_t tag) {
  CollectiveDesc d;
  d.op = CollectiveOp::kAllGather;
  d.dtype = dtype;
  d.count = send_count;
  d.tag = tag;
  return submit(d, Buffers{send, recv, nullptr}, stream);
}

Status Communicator::all_to_all(const void* send, void* recv, int64_t count, DType dtype, Stream& stream,
                                int64_t tag) {
  CollectiveDesc d;
  d.op = CollectiveOp::kAllToAll;
  d.dtype = dtype;
  d.count = count;
  d.tag = tag;
  return submit(d, Buffers{send, recv, nullptr}, stream);
}

Status Communicator::all_to_all(const void* send, void* recv, int64_t count, DType dtype, const AllToAllShape& shape,
                                Stream& stream, int64_t tag) {
  CollectiveDesc d;
  d.op = CollectiveOp::kAllToAll;
  d.dtype = dtype;
  d.count = count;
  d.tag = tag;
  d.world_size = world_size_;
  if (shape.counts.size() != static_cast<size_t>(world_size_)) {
    return Status(StatusCode::kInvalidArgument, context(d) + ": the shape has " + std::to_string(shape.counts.size()) +
                                                    " per-peer counts for a world of " + std::to_string(world_size_));
  }
  for (size_t q = 0; q < shape.counts.size(); ++q) {
    if (shape.counts[q] < 0 || shape.counts[q] > count) {
      return Status(StatusCode::kInvalidArgument, context(d) + ": peer " + std::to_string(q) + "'s count " +
                                                      std::to_string(shape.counts[q]) + " is not in [0, " +
                                                      std::to_string(count) + "]");
    }
  }
  return submit(d, Buffers{send, recv, std::make_shared<const AllToAllShape>(shape)}, stream);
}

Status Communicator::broadcast(void* buffer, int64_t count, DType dtype, int root, Stream& stream, int64_t tag) {
  CollectiveDesc d;
  d.op = CollectiveOp::kBroadcast;
  d.dtype = dtype;
  d.count = count;
  d.root = root;
  d.tag = tag;
  return submit(d, Buffers{buffer, buffer, nullptr}, stream);
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
  if (desc.op == CollectiveOp::kAllToAll && desc.count > 0 && buffers.send == buffers.recv &&
      !(buffers.shape && buffers.shape->send_shared)) {
    return invalid("all_to_all cannot run in place (a chunk would be overwritten before it is sent)");
  }
  if (stream.device().kind() != device_.kind()) {
    return invalid(std::string("stream '") + stream.name() + "' is on a " + to_string(stream.device().kind()) +
                   " device, the communicator on " + to_string(device_.kind()));
  }
  if (test_hook_ && test_hook_->desync == "order" && rank_ == test_hook_->rank) {
    // The hook swaps this rank's calls #seq and #seq + 1: the first is held back and
    // issued right after the second, so each carries the other's number.
    detail::TestHook& h = *test_hook_;
    if (!h.holding && recorder_->issued() == h.seq) {
      h.holding = true;
      h.held = desc;
      h.held_send = buffers.send;
      h.held_recv = buffers.recv;
      h.held_shape = buffers.shape;
      h.held_stream = &stream;
      return Status::Ok();
    }
    if (h.holding) {
      h.holding = false;
      ZDP_LOG(kWarn) << "ZDP_TEST_COMM: issuing collectives #" << h.seq << " and #" << h.seq + 1
                     << " in swapped order (desync injected)";
      const Status first = issue(desc, buffers, stream);
      const Status second = issue(h.held, Buffers{h.held_send, h.held_recv, h.held_shape}, *h.held_stream);
      return first.ok() ? second : first;
    }
  }
  return issue(desc, buffers, stream);
}

Status Communicator::issue(CollectiveDesc desc, Buffers buffers, Stream& stream) {
  recorder_->enqueue(desc);
  if (test_hook_ && detail::apply_desync(*test_hook_, rank_, desc)) {
    ZDP_LOG(kWarn) << "ZDP_TEST_COMM: issuing " << desc.describe() << " (desync injected)";
    recorder_->amend(desc.seq, desc);
  }
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_.ok()) {
      recorder_->finished(desc.seq, false);
      // The first failure whole, its code included: a caller that meets this collective
      // before it waits for the one that failed (an engine issuing ahead) must still see
      // what the failure was (PeerFailure, Timeout), not only that this one was not started.
      return Status(StatusCode::kAborted, context(desc) + ": not started, the communicator failed earlier: " +
                                              error_.to_string());
    }
  }
  ZDP_LOG(kDebug) << backend() << ": enqueue " << desc.describe() << " on stream '" << stream.name() << "'";
  Status launched = launch(desc, buffers, stream);
  if (!launched.ok()) recorder_->finished(desc.seq, false);
  if (test_hook_) detail::run_action(*test_hook_, rank_, desc, *this);
  return launched;
}

Status Communicator::error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return error_;
}

Status Communicator::fail(const Status& status) { return record_failure(status, /*by_abort=*/false); }
Status Communicator::fail_by_abort(const Status& status) { return record_failure(status, /*by_abort=*/true); }

bool Communicator::aborted_here() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return aborted_here_;
}

Status Communicator::record_failure(const Status& status, bool by_abort) {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (error_.ok()) {
    error_ = status;
    aborted_here_ = by_abort;
    ZDP_LOG(kError) << backend() << " communicator failed: " << status.to_string()
                    << "\nits last collectives (the flight recorder, oldest first):\n" << flight_record_text();
  }
  return error_;
}

std::vector<CollectiveRecord> Communicator::flight_record() const { return recorder_->records(); }

std::string Communicator::flight_record_text(const std::string& indent) const {
  const auto now = std::chrono::steady_clock::now();
  std::string out;
  for (const CollectiveRecord& r : recorder_->records()) out += indent + r.describe(now) + "\n";
  return out.empty() ? indent + "(no collective yet)\n" : out;
}

CommProgress Communicator::progress() const { return recorder_->progress(); }

void Communicator::note_started(uint64_t seq) { recorder_->started(seq); }

void Communicator::note_finished(uint64_t seq, bool ok) { recorder_->finished(seq, ok); }

void Communicator::note_failed(uint64_t seq) { recorder_->failed(seq); }

uint32_t Communicator::wire_tag(const CollectiveDesc& desc) {
  const uint64_t sig = desc.signature();
  return static_cast<uint32_t>(((desc.seq & 0xffff) << 16) | ((sig ^ (sig >> 16) ^ (sig >> 32) ^ (sig >> 48)) & 0xffff));
}

std::string Communicator::context(const CollectiveDesc& desc) const {
  return "rank " + std::to_string(rank_) + ": " + std::string(backend()) + " " + desc.describe();
}

}  // namespace zdp
