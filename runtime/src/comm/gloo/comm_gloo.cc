// The Gloo communicator: CPU collectives over TCP, run as host tasks on a zdp stream.
// CUDA buffers are staged through pinned host memory (copy in, collective, copy out) on
// one stream of the communicator's own, in issue order, ordered after the caller's stream
// by events (see launch()). Reduce-scatter is our ring (gloo_reduce_scatter.h).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/context.h>

#include "runtime/internal/gloo_context.h"
#include "runtime/src/comm/gloo/gloo_all_to_all.h"
#include "runtime/src/comm/gloo/gloo_peer_ranks.h"
#include "runtime/src/comm/gloo/gloo_reduce_scatter.h"
#include "runtime/src/comm/gloo/gloo_waits.h"
#include "runtime/src/comm/host_reduce.h"
#include "zdp/comm.h"
#include "zdp/log.h"

namespace zdp {
namespace {

using Clock = std::chrono::steady_clock;

std::string seconds(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

// Input and output bytes of a collective on this rank (for staging and copies).
struct IoBytes {
  size_t in = 0;
  size_t out = 0;
};
IoBytes io_bytes(const CollectiveDesc& d, const AllToAllShape* shape) {
  const size_t b = static_cast<size_t>(d.bytes());
  const size_t k = static_cast<size_t>(d.world_size);
  if (shape != nullptr && shape->send_shared) return {b, b * k};  // one chunk sent to every peer
  switch (d.op) {
    case CollectiveOp::kAllReduce: return {b, b};
    case CollectiveOp::kReduceScatter: return {b * k, b};
    case CollectiveOp::kAllGather: return {b, b * k};
    case CollectiveOp::kBroadcast: return {b, b};
    case CollectiveOp::kBarrier: return {0, 0};
    case CollectiveOp::kAllToAll: return {b * k, b * k};
  }
  return {};
}

// Gloo's typed option setters only use sizeof(T): pick a type of the element's size.
template <typename Fn>
void with_element_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: fn(float{}); return;
    case DType::kF16:
    case DType::kBF16: fn(uint16_t{}); return;
    case DType::kI64: fn(int64_t{}); return;
  }
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(int rank, int world_size, Device& device, CommOptions options,
                   std::shared_ptr<gloo::Context> context, GlooPeerRanks peers)
      : Communicator(rank, world_size, device, std::move(options)),
        context_(std::move(context)),
        peers_(std::move(peers)) {}

  // Collectives still running hold `this`: wait for them (each ends by its timeout).
  ~GlooCommunicator() override {
    std::unique_lock<std::mutex> lock(streams_mu_);
    idle_.wait(lock, [this] { return in_flight_.empty(); });
  }

  const char* backend() const override { return "gloo"; }

  void abort(const std::string& reason) override {
    const Status first = fail_by_abort(
        Status(StatusCode::kAborted, "rank " + std::to_string(rank()) + ": gloo communicator aborted: " + reason));
    // Peers blocked on this rank see the closed connections and fail at once.
    if (context_) context_->closeConnections();
    // Our own ring and all-to-all waits end now (gloo_waits.h); Gloo's own collectives
    // cannot be interrupted, so release our waiters too: the streams with collectives in
    // flight fail now, and a blocked Gloo collective ends at its timeout.
    waits_.abort();
    std::lock_guard<std::mutex> lock(streams_mu_);
    for (auto& [stream, collectives] : in_flight_) stream->abort(first);
  }

 protected:
  Status launch(const CollectiveDesc& desc, Buffers buffers, Stream& stream) override {
    if (device().kind() == DeviceKind::kCpu) {  // a CPU stream's host tasks run on its own thread
      return stream.enqueue_host(desc.describe(), [this, desc, buffers, token = begin(stream, desc.seq)] {
        return run(desc, buffers.send, buffers.recv, buffers.shape.get());
      });
    }
    // CUDA buffers: every collective runs on this communicator's own stream, in issue
    // order, after the caller's stream has reached the call (an event), and the caller's
    // stream continues after it (another). CUDA may run the host callbacks of all streams
    // on one thread, so collectives left on the callers' streams (the engine's comm stream,
    // the trainer's compute stream) could start in another order on each rank: each rank
    // then blocks inside one its peers start only later. Seen on an H200 at stage 3:
    // evaluation's gather on the compute stream started on one rank before the prefetched
    // parameter gathers on the comm stream, and both ranks timed out after 60 s.
    std::lock_guard<std::mutex> issue(cuda_issue_mu_);
    ZDP_RETURN_IF_ERROR(ensure_ordered_stream());
    ZDP_RETURN_IF_ERROR(stream.record(*caller_reached_));
    ZDP_RETURN_IF_ERROR(ordered_->wait(*caller_reached_));
    ZDP_RETURN_IF_ERROR(stage_on_ordered_stream(desc, buffers, *ordered_));
    ZDP_RETURN_IF_ERROR(ordered_->record(*collective_done_));
    return stream.wait(*collective_done_);
  }

 private:
  // The ring reduce-scatter's receive buffer, lent to one collective at a time: the
  // collectives of different streams run at once, each on a buffer of its own. Pooled, not
  // kept per caller stream: nothing tells a communicator that a stream was destroyed, so
  // scratch kept per stream stayed allocated for every engine destroyed on its context.
  struct Scratch {
    std::unique_ptr<char[]> bytes;
    size_t size = 0;
  };

  // The stream every CUDA collective runs on, and the two events that order it after
  // the caller's stream and the caller's after it; made at the first CUDA collective.
  // Reusing the events is safe: each wait is enqueued right after its record, under
  // cuda_issue_mu_, and a wait takes the record made before it.
  Status ensure_ordered_stream() {
    if (ordered_) return Status::Ok();
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Event> reached, device().create_event());
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Event> done, device().create_event());
    ZDP_ASSIGN_OR_RETURN(ordered_, device().create_stream("gloo collectives", StreamPriority::kHigh));
    caller_reached_ = std::move(reached);
    collective_done_ = std::move(done);
    return Status::Ok();
  }

  // Copy in, the collective as a host task, copy out: all on `stream` (the ordered one).
  Status stage_on_ordered_stream(const CollectiveDesc& desc, Buffers buffers, Stream& stream) {
    const IoBytes io = io_bytes(desc, buffers.shape.get());
    ZDP_RETURN_IF_ERROR(ensure_staging(stream, io.in + io.out));
    char* stage_in = staging_.as<char>();
    char* stage_out = stage_in + io.in;
    void* host_send = stage_in;
    void* host_recv = stage_out;
    if (desc.op == CollectiveOp::kBroadcast || (desc.op == CollectiveOp::kAllReduce && buffers.send == buffers.recv)) {
      host_recv = stage_in;  // in place stays in place
    }
    if (io.in > 0) ZDP_RETURN_IF_ERROR(stream.memcpy_async(stage_in, buffers.send, io.in));
    ZDP_RETURN_IF_ERROR(stream.enqueue_host(
        desc.describe(), [this, desc, host_send, host_recv, shape = buffers.shape, token = begin(stream, desc.seq)] {
          return run(desc, host_send, host_recv, shape.get());
        }));
    if (buffers.shape) {  // only the chunks that arrived: the others keep what the caller has there
      const size_t stride = static_cast<size_t>(desc.bytes()), elem = dtype_size(desc.dtype);
      for (size_t q = 0; q < buffers.shape->counts.size(); ++q) {
        const size_t n = static_cast<size_t>(buffers.shape->counts[q]) * elem;
        if (n > 0) {
          ZDP_RETURN_IF_ERROR(stream.memcpy_async(static_cast<char*>(buffers.recv) + q * stride,
                                                  static_cast<char*>(host_recv) + q * stride, n));
        }
      }
    } else if (io.out > 0) {
      ZDP_RETURN_IF_ERROR(stream.memcpy_async(buffers.recv, host_recv, io.out));
    }
    return Status::Ok();
  }

  // A collective is in flight from just before it is enqueued until its host task has
  // run or been dropped: a failed stream skips (destroys unrun) the tasks queued behind
  // the failure, so the count is a token the task owns, released when the last copy of
  // the task goes, whichever way. A stream with work in flight cannot be destroyed (its
  // destructor drains), so abort() may touch it; a stream leaves the map with its last
  // collective, so a destroyed one is never there.
  // A dropped task also ends its collective in the flight recorder (a no-op after run()
  // ended it): else the recorder reported it in flight for ever, and the heartbeats named
  // a collective this rank would never run.
  std::shared_ptr<void> begin(Stream& stream, uint64_t seq) {
    {
      std::lock_guard<std::mutex> lock(streams_mu_);
      ++in_flight_[&stream];
    }
    return std::shared_ptr<void>(nullptr, [this, stream = &stream, seq](void*) {
      note_finished(seq, false);
      // Notify under the lock: once it can see no collective in flight the destructor may
      // return and destroy idle_, so a notify after unlocking raced with it (TSan saw it).
      std::lock_guard<std::mutex> lock(streams_mu_);
      const auto it = in_flight_.find(stream);
      if (--it->second == 0) in_flight_.erase(it);
      idle_.notify_all();
    });
  }

  // The ordered stream's pinned staging (under cuda_issue_mu_, like every use of it).
  Status ensure_staging(Stream& stream, size_t bytes) {
    if (static_cast<size_t>(staging_.bytes()) >= bytes) return Status::Ok();
    // The old buffer may still be in use by work queued on this stream.
    ZDP_RETURN_IF_ERROR(stream.synchronize(options().timeout));
    staging_.reset();
    ZDP_ASSIGN_OR_RETURN(staging_, device().allocate(static_cast<int64_t>(bytes), MemCategory::kBuckets,
                                                     MemSpace::kPinnedHost));
    return Status::Ok();
  }

  std::unique_ptr<Scratch> take_scratch() {
    std::lock_guard<std::mutex> lock(streams_mu_);
    if (spare_scratch_.empty()) return std::make_unique<Scratch>();
    std::unique_ptr<Scratch> scratch = std::move(spare_scratch_.back());
    spare_scratch_.pop_back();
    return scratch;
  }

  void return_scratch(std::unique_ptr<Scratch> scratch) {
    std::lock_guard<std::mutex> lock(streams_mu_);
    spare_scratch_.push_back(std::move(scratch));
  }

  Status run(const CollectiveDesc& desc, const void* send, void* recv, const AllToAllShape* shape) {
    const Status earlier = error();
    if (!earlier.ok()) {
      note_finished(desc.seq, false);
      return Status(StatusCode::kAborted,
                    context(desc) + ": not run, the communicator failed earlier: " + earlier.to_string());
    }
    const auto start = Clock::now();
    note_started(desc.seq);
    const Status s = run_guarded(desc, send, recv, shape, start);
    if (s.ok()) {
      note_finished(desc.seq, true);
    } else {
      note_failed(desc.seq);
    }
    return s;
  }

  Status run_guarded(const CollectiveDesc& desc, const void* send, void* recv, const AllToAllShape* shape,
                     Clock::time_point start) {
    try {
      run_collective(desc, send, recv, shape);
    } catch (const gloo::IoException& e) {
      const std::string what = e.what();
      const auto elapsed = Clock::now() - start;
      // Gloo names the peer by its address; the rank is what a reader can act on. A
      // connection can also break because that peer failed first and closed all of its
      // own (below), so the rank named is where to look, not necessarily the one at fault.
      const std::string peer = peers_.ranks_named_in(what);
      // The context is dead after an IoException. Closing our connections now makes peers
      // blocked on this rank fail at once instead of at their own timeout, and ending our
      // own ring and all-to-all waits ends this rank's other collectives (streams run
      // theirs at once): one waiting on a live peer was woken by nothing, closed here.
      context_->closeConnections();
      waits_.abort();
      if (what.find("Timed out") != std::string::npos || what.find("timed out") != std::string::npos) {
        return fail(Status(StatusCode::kTimeout, context(desc) + ": timed out after " + seconds(elapsed) +
                                                     " (collective timeout " + seconds(options().timeout) + ")" +
                                                     (peer.empty() ? "" : " waiting for " + peer) + ": " + what));
      }
      return fail(Status(StatusCode::kPeerFailure,
                         context(desc) + ": failed after " + seconds(elapsed) + ": " +
                             (peer.empty() ? std::string("a peer died or its connection broke")
                                           : "the connection to " + peer +
                                                 " broke (it died, or failed and closed its connections)") +
                             ": " + what));
    } catch (const std::exception& e) {
      return fail(Status(StatusCode::kInternal, context(desc) + ": gloo error: " + e.what()));
    }
    return Status::Ok();
  }

  // Throws gloo exceptions; run() turns them into Status.
  void run_collective(const CollectiveDesc& desc, const void* send, void* recv, const AllToAllShape* shape) {
    const int k = world_size();
    const size_t bytes = static_cast<size_t>(desc.bytes());
    const size_t count = static_cast<size_t>(desc.count);
    const uint32_t tag = wire_tag(desc);  // ranks that disagree on the collective never pair up
    const bool average = desc.reduce == ReduceOp::kAvg;
    if (desc.op != CollectiveOp::kBarrier && desc.count == 0) return;

    if (desc.op == CollectiveOp::kAllToAll) {  // its own copy, shaped or not, and k == 1 too
      AllToAllArgs args;
      args.send = send;
      args.recv = recv;
      args.chunk_bytes = bytes;
      args.shape = shape;
      args.element_bytes = dtype_size(desc.dtype);
      args.tag = tag;
      args.timeout = options().timeout;
      args.waits = &waits_;
      gloo_all_to_all(context_, args, rank(), k);
      return;
    }
    if (k == 1) {  // no peers: the collectives reduce to copies
      const IoBytes io = io_bytes(desc, nullptr);
      if (desc.op != CollectiveOp::kBroadcast && io.out > 0 && send != recv) std::memmove(recv, send, io.out);
      return;
    }
    switch (desc.op) {
      case CollectiveOp::kAllReduce: {
        gloo::AllreduceOptions opts(context_);
        with_element_type(desc.dtype, [&](auto t) {
          using T = decltype(t);
          if (send != recv) opts.setInput(static_cast<T*>(const_cast<void*>(send)), count);
          opts.setOutput(static_cast<T*>(recv), count);
        });
        opts.setReduceFunction(host_reduce_fn(desc.dtype, desc.reduce));
        opts.setTag(tag);
        opts.setTimeout(options().timeout);
        gloo::allreduce(opts);
        if (average) host_scale(recv, count, desc.dtype, 1.0f / static_cast<float>(k));
        return;
      }
      case CollectiveOp::kReduceScatter: {
        RingReduceScatterArgs args;
        args.send = send;
        args.recv = recv;
        args.slice_bytes = bytes;
        args.element_size = dtype_size(desc.dtype);
        args.reduce = host_reduce_fn(desc.dtype, desc.reduce);
        args.tag = tag;
        args.timeout = options().timeout;
        args.waits = &waits_;
        // Returned to the pool however the collective ends: a failed one fails the
        // communicator, and no later collective runs to reuse it.
        std::unique_ptr<Scratch> scratch = take_scratch();
        struct Lend {
          GlooCommunicator* owner;
          std::unique_ptr<Scratch>& scratch;
          ~Lend() { owner->return_scratch(std::move(scratch)); }
        } lend{this, scratch};
        ring_reduce_scatter(context_, args, scratch->bytes, scratch->size);
        if (average) host_scale(recv, count, desc.dtype, 1.0f / static_cast<float>(k));
        return;
      }
      case CollectiveOp::kAllGather: {
        gloo::AllgatherOptions opts(context_);
        const bool in_place = send == static_cast<const char*>(recv) + static_cast<size_t>(rank()) * bytes;
        with_element_type(desc.dtype, [&](auto t) {
          using T = decltype(t);
          if (!in_place) opts.setInput(static_cast<T*>(const_cast<void*>(send)), count);
          opts.setOutput(static_cast<T*>(recv), count * static_cast<size_t>(k));
        });
        opts.setTag(tag);
        opts.setTimeout(options().timeout);
        gloo::allgather(opts);
        return;
      }
      case CollectiveOp::kBroadcast: {
        gloo::BroadcastOptions opts(context_);
        with_element_type(desc.dtype, [&](auto t) {
          using T = decltype(t);
          opts.setOutput(static_cast<T*>(recv), count);
        });
        opts.setRoot(desc.root);
        opts.setTag(tag);
        opts.setTimeout(options().timeout);
        gloo::broadcast(opts);
        return;
      }
      case CollectiveOp::kAllToAll: return;  // above
      case CollectiveOp::kBarrier: {
        gloo::BarrierOptions opts(context_);
        opts.setTag(tag);
        opts.setTimeout(options().timeout);
        gloo::barrier(opts);
        return;
      }
    }
  }

  std::shared_ptr<gloo::Context> context_;  // null for a world of 1
  const GlooPeerRanks peers_;                // which rank an error's address is
  GlooWaits waits_;                           // our ring's and all-to-all's: abort() ends them
  std::mutex cuda_issue_mu_;                  // one CUDA collective enqueued at a time
  std::unique_ptr<Event> caller_reached_;     // CUDA: see ensure_ordered_stream()
  std::unique_ptr<Event> collective_done_;
  std::unique_ptr<Stream> ordered_;           // destroyed first; neither it nor the events wait
  DeviceBuffer staging_;                      // CUDA builds: pinned host memory
  std::mutex streams_mu_;
  std::condition_variable idle_;  // signalled when a collective finishes
  // Collectives enqueued and not finished, per caller stream (only streams with some).
  std::map<Stream*, int> in_flight_;
  std::vector<std::unique_ptr<Scratch>> spare_scratch_;  // as many as ran at once
};

// Communicators created in one process get distinct store namespaces; every rank
// creates them in the same order, so the numbers agree across ranks.
std::atomic<int> g_generation{0};

}  // namespace

StatusOr<std::unique_ptr<Communicator>> create_gloo_communicator(Store& store, int rank, int world_size,
                                                                 Device& device, const CommOptions& options) {
  const std::string where = "rank " + std::to_string(rank) + ": gloo communicator";
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return Status(StatusCode::kInvalidArgument, where + ": rank " + std::to_string(rank) +
                                                    " is not in a world of " + std::to_string(world_size));
  }
  if (options.timeout.count() <= 0) {
    return Status(StatusCode::kInvalidArgument, where + ": the collective timeout must be positive");
  }
  set_process_identity(rank, world_size);
  const int generation = g_generation.fetch_add(1);
  if (world_size == 1) {
    return std::unique_ptr<Communicator>(new GlooCommunicator(rank, world_size, device, options, nullptr, {}));
  }
  GlooPeerRanks peers;
  ZDP_ASSIGN_OR_RETURN(std::shared_ptr<gloo::Context> context,
                       connect_gloo_context(store, "gloo/" + std::to_string(generation), rank, world_size, options,
                                            &peers));
  return std::unique_ptr<Communicator>(
      new GlooCommunicator(rank, world_size, device, options, std::move(context), std::move(peers)));
}

}  // namespace zdp
