// The NCCL communicator: collectives on CUDA streams, plus a watchdog thread that turns a hung or
// failed collective into an error (and an aborted communicator) on this rank, never a silent
// hang; create_nccl_communicator (comm_nccl_init.cc) builds it.
//
// The communicator is nonblocking (ncclConfig_t::blocking = 0): a call NCCL does not finish at
// once returns ncclInProgress (in NCCL 2.28 a helper job finishes every collective, and a
// collective's first call connects to every peer and waits for them), and the caller polls it
// to completion against the timeout (nccl::settle): no thread ever waits inside NCCL. Every
// NCCL call, ncclCommGetAsyncError and ncclCommAbort included, is made by a thread holding
// launch_mu_: NCCL forbids two threads in one communicator (on a nonblocking one
// ncclCommGetAsyncError completes and frees the finished helper job), and an abort under a
// thread still inside a call frees what that call is using. The watchdog polls the asynchronous
// error only when it can take launch_mu_ without waiting (an enqueue under way polls it
// itself); a failure it finds meanwhile fails the streams at once and leaves the abort to the
// enqueuing thread when its call returns, or to its own next round (abort_requested_).
//
// A collective's timeout runs from when its stream reaches it (an event recorded just before
// it), not from its enqueue: the host runs up to two steps ahead of the GPU, and a bucket's
// reduction enqueued early in backward waits on the compute stream for its gradient (timed
// from the enqueue, a step over half the timeout read as a hung peer). Work that never lets
// the stream reach a collective is this rank's own, bounded by the host's own waits.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/internal/cuda_check.h"
#include "core/internal/nccl_check.h"
#include "runtime/src/comm/buffer_check.h"
#include "runtime/src/comm/nccl/nccl_enqueue.h"
#include "runtime/src/comm/nccl/nccl_communicator.h"
#include "runtime/src/comm/nccl/nccl_mapping.h"
#include "runtime/src/comm/nccl/nccl_wait.h"
#include "runtime/internal/cuda_stream_handle.h"
#include "zdp/comm.h"
#include "zdp/log.h"

namespace zdp::nccl {
namespace {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, int world_size, Device& device, const CommOptions& options, ncclComm_t comm,
                   DeviceBuffer scratch)
      : Communicator(rank, world_size, device, options), comm_(comm), scratch_(std::move(scratch)) {
    watchdog_ = std::thread([this] { watchdog_loop(); });
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();

    std::lock_guard<std::mutex> lock(mu_);
    ZDP_CUDA_CHECK_LOG(cudaSetDevice(device().index()));
    if (comm_ != nullptr) {
      // Destroying finalizes, which waits for the outstanding collectives: only when they
      // have all completed (bounded wait); otherwise, or after an error, abort.
      const auto limit = std::min<std::chrono::milliseconds>(options().timeout, std::chrono::seconds(60));
      // ncclCommDestroy on a communicator whose state is an error (or still in progress)
      // returns that error without destroying anything (NCCL 2.28 init.cc: ncclCommEnsureReady
      // inside ncclCommDestroy); only a healthy, drained communicator is destroyed.
      ncclResult_t state = ncclInProgress;
      const bool drained = error().ok() && wait_pending_locked(Clock::now() + limit) &&
                           ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclSuccess;
      if (drained) {
        log_if_error(ncclCommDestroy(comm_), "ncclCommDestroy(comm)");
      } else {
        if (error().ok()) {
          ZDP_LOG(kWarn) << "rank " << rank() << ": nccl communicator: collectives still running after "
                         << format_duration(limit) << " at destruction; aborting it";
        }
        log_if_error(ncclCommAbort(comm_), "ncclCommAbort(comm)");
      }
      comm_ = nullptr;
    }
    destroy_pending_locked();
    for (cudaEvent_t e : free_events_) ZDP_CUDA_CHECK_LOG(cudaEventDestroy(e));
    free_events_.clear();
    scratch_.reset();  // after NCCL is gone: a barrier may have been using it
  }

  const char* backend() const override { return "nccl"; }

  void abort(const std::string& reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    const Status status(StatusCode::kAborted, "rank " + std::to_string(rank()) + ": nccl communicator aborted: " + reason);
    (void)fail_by_abort(status);  // the first failure: aborted here (dropped when it already failed)
    if (comm_ == nullptr) return;
    (void)fail_and_abort_locked(status, /*holds_launch_lock=*/false);
  }

 protected:
  Status launch(const CollectiveDesc& desc, Buffers buffers, Stream& stream) override {
    ZDP_ASSIGN_OR_RETURN(cuda::StreamHandle handle, cuda::stream_handle(stream));
    if (handle.device_index != device().index()) {
      return Status(StatusCode::kInvalidArgument, context(desc) + ": stream '" + stream.name() + "' is on " +
                                                      stream.device().name() + ", the communicator on " +
                                                      device().name());
    }
    if (desc.op != CollectiveOp::kBarrier && desc.count == 0) {
      note_finished(desc.seq, true);  // nothing to move
      return Status::Ok();
    }
    cudaError_t cuda_err = cudaSetDevice(device().index());
    if (cuda_err != cudaSuccess) return cuda_error_status(cuda_err, "cudaSetDevice(index)", __FILE__, __LINE__);
    if (desc.op != CollectiveOp::kBarrier) ZDP_RETURN_IF_ERROR(check_buffers(desc, buffers));

    // One enqueue at a time (NCCL calls on one communicator are not thread-safe); mu_ is
    // not held while NCCL settles the call, so the watchdog keeps watching (and leaves
    // an abort to this thread: abort_requested_).
    std::lock_guard<std::mutex> serial(launch_mu_);
    ncclComm_t comm = nullptr;
    cudaEvent_t start = nullptr, done = nullptr;
    const uint64_t position = handle.state->next_position();
    {
      std::lock_guard<std::mutex> lock(mu_);
      // A collective is enqueued even on a stream that already failed: skipping it here
      // would leave the peers waiting for this rank until their timeout.
      if (abort_requested_ && comm_ != nullptr) abort_now_locked();  // left to this thread
      if (comm_ == nullptr) {
        const Status first = error();
        return Status(StatusCode::kAborted, context(desc) + ": not started, the communicator was aborted" +
                                                (first.ok() ? std::string() : ": " + first.to_string()));
      }
      comm = comm_;
      for (cudaEvent_t* event : {&start, &done}) {
        if (!free_events_.empty()) {
          *event = free_events_.back();
          free_events_.pop_back();
          continue;
        }
        cuda_err = cudaEventCreateWithFlags(event, cudaEventDisableTiming);
        if (cuda_err != cudaSuccess) {
          if (start != nullptr && event != &start) free_events_.push_back(start);
          // Not issued, so this rank's later collectives would pair with the peers' wrong
          // calls: the communicator fails instead (the peers time out naming this one).
          return fail_and_abort_locked(cuda_error_status(cuda_err, "cudaEventCreateWithFlags(&event, cudaEventDisableTiming)",
                                                         __FILE__, __LINE__)
                                           .with_context(context(desc) + ": not issued; communicator aborted"),
                                       /*holds_launch_lock=*/true, handle.state, position);
        }
      }
      enqueuing_ = Enqueuing{desc, Clock::now()};
    }
    cv_.notify_one();  // the watchdog now watches the enqueue's duration too

    // The start mark goes on the stream before NCCL's call: nothing may be queued on the
    // stream while a nonblocking call is still in progress.
    cuda_err = cudaEventRecord(start, handle.stream);
    const bool issued = cuda_err == cudaSuccess;
    ncclResult_t r = ncclSuccess;
    if (issued) {
      r = enqueue_collective(comm, rank(), world_size(), desc, buffers.send, buffers.recv, buffers.shape.get(), scratch_.data(),
                             handle.stream);
    }
    if (r == ncclInProgress) {
      r = settle(comm, Clock::now() + options().timeout, [this] { return abort_requested_.load(); });
    }
    // NCCL has the collective now: the all-to-all's own chunk and the event follow it.
    if (r == ncclSuccess && cuda_err == cudaSuccess && desc.op == CollectiveOp::kAllToAll) {
      r = copy_own_chunk(rank(), desc, buffers.send, buffers.recv, buffers.shape.get(), handle.stream);
    }
    if (r == ncclSuccess && cuda_err == cudaSuccess) cuda_err = cudaEventRecord(done, handle.stream);

    std::lock_guard<std::mutex> lock(mu_);
    enqueuing_.reset();
    if (abort_requested_ && comm_ != nullptr) abort_now_locked();  // the watchdog or abort() left it to us
    // Issued and failed (a first call waiting for a peer that never came): still this rank's current
    // collective for the heartbeats, as Gloo's, so the launcher can name the peer behind.
    if (issued && (comm_ == nullptr || r != ncclSuccess || cuda_err != cudaSuccess)) note_failed(desc.seq);
    // Not to be watched: the events go back to the pool whichever way it failed.
    if (comm_ == nullptr || r != ncclSuccess || cuda_err != cudaSuccess) recycle_locked(start, done);
    if (comm_ == nullptr) {  // the watchdog (or abort()) gave up on it meanwhile
      const Status first = error();
      handle.state->fail(position, first);
      return first.ok() ? Status(StatusCode::kAborted, context(desc) + ": the communicator was aborted") : first;
    }
    if (r == ncclInProgress) {  // the deadline passed with NCCL still setting it up
      return fail_and_abort_locked(
          Status(StatusCode::kTimeout, context(desc) + " timed out after " + format_duration(options().timeout) +
                                           " while NCCL was still setting it up on stream '" + stream.name() +
                                           "' (its first call connects to every peer: a peer may never have come, "
                                           "or called collectives in another order); communicator aborted"),
          /*holds_launch_lock=*/true, handle.state, position);
    }
    if (r != ncclSuccess) {
      return fail_and_abort_locked(
          Status(nccl_status_code(r), context(desc) + ": " + nccl_call_name(desc.op) + " on stream '" + stream.name() +
                                          "' failed: " + nccl_error_text(r) + " at " + error_site(__FILE__, __LINE__) +
                                          "; communicator aborted"),
          /*holds_launch_lock=*/true, handle.state, position);
    }
    if (cuda_err != cudaSuccess) {
      return fail_and_abort_locked(
          cuda_error_status(cuda_err, issued ? "cudaEventRecord(done, stream)" : "cudaEventRecord(start, stream)",
                            __FILE__, __LINE__)
              .with_context(context(desc) + (issued ? ": issued; communicator aborted" : ": not issued; communicator aborted")),
          /*holds_launch_lock=*/true, handle.state, position);
    }
    pending_.push_back(Pending{desc, start, done, std::nullopt, handle.state, position, stream.name()});
    cv_.notify_one();
    return Status::Ok();
  }

 private:
  // One enqueued collective the watchdog watches until its event is reached.
  struct Pending {
    CollectiveDesc desc;
    cudaEvent_t start;  // recorded on the stream right before the collective
    cudaEvent_t done;   // and right after it
    std::optional<Clock::time_point> reached;  // when the watchdog first saw `start` reached
    std::shared_ptr<cuda::StreamErrorState> stream_state;
    uint64_t position;  // of the collective on its stream
    std::string stream_name;
  };
  // An enqueue under way: the NCCL call and its settling (nccl::settle).
  struct Enqueuing {
    CollectiveDesc desc;
    Clock::time_point since;
  };

  // Refuses memory NCCL cannot use (runtime/src/comm/buffer_check.h), naming the collective.
  Status check_buffers(const CollectiveDesc& desc, Buffers buffers) const {
    const std::pair<const void*, const char*> both[] = {{buffers.send, "send buffer"}, {buffers.recv, "receive buffer"}};
    for (const auto& [ptr, role] : both) {
      int owner = -1;
      const PointerKind kind = pointer_kind(ptr, &owner);
      const std::string why = refuse_collective_buffer(ptr, kind, owner, device().index(), role);
      if (!why.empty()) return Status(StatusCode::kInvalidArgument, context(desc) + ": " + why);
    }
    return Status::Ok();
  }

  void log_if_error(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) {
      ZDP_LOG(kWarn) << "rank " << rank() << ": " << what << " failed: " << nccl_error_text(r);
    }
  }

  // REQUIRES: mu_ held. Polls the pending collectives until all completed (true) or the
  // deadline passes or one fails (false).
  bool wait_pending_locked(Clock::time_point deadline) {
    for (;;) {
      for (auto it = pending_.begin(); it != pending_.end();) {
        const cudaError_t e = cudaEventQuery(it->done);
        if (e == cudaErrorNotReady) break;
        if (e != cudaSuccess) {
          (void)cudaGetLastError();
          return false;
        }
        recycle_locked(it->start, it->done);
        it = pending_.erase(it);
      }
      if (pending_.empty()) return true;
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // REQUIRES: mu_ held and comm_ != nullptr. Records `status` as the communicator's
  // failure, fails the stream of every collective still pending (and `extra_state` at
  // `extra_position`, the op that just failed to enqueue), then aborts NCCL: at once when
  // the caller holds launch_mu_ (`holds_launch_lock`) or no enqueue is under way, else by
  // the enqueuing thread when its call returns (abort_requested_). The streams are marked
  // before the abort: the abort lets the hung kernels exit, and any event reached
  // afterwards must already see the failure. Returns the first failure.
  Status fail_and_abort_locked(const Status& status, bool holds_launch_lock,
                               const std::shared_ptr<cuda::StreamErrorState>& extra_state = nullptr,
                               uint64_t extra_position = 0) {
    (void)fail(status);
    Status first = error();
    if (first.ok()) first = status;
    for (Pending& p : pending_) p.stream_state->fail(p.position, first);
    if (extra_state) extra_state->fail(extra_position, first);
    if (comm_ != nullptr) {
      // try_lock never waits, so holding mu_ here cannot deadlock with launch(), which
      // takes launch_mu_ before mu_.
      std::unique_lock<std::mutex> serial(launch_mu_, std::defer_lock);
      if (holds_launch_lock || serial.try_lock()) {
        abort_now_locked();
      } else {
        abort_requested_ = true;
      }
    }
    destroy_pending_locked();
    return first;
  }

  // REQUIRES: mu_ held. A collective's two events back to the pool.
  void recycle_locked(cudaEvent_t start, cudaEvent_t done) {
    free_events_.push_back(start);
    free_events_.push_back(done);
  }

  // REQUIRES: mu_ held. Destroys the pending collectives' events and forgets them (safe on
  // events not yet reached: CUDA releases them once they are).
  void destroy_pending_locked() {
    for (Pending& p : pending_) {
      ZDP_CUDA_CHECK_LOG(cudaEventDestroy(p.start));
      ZDP_CUDA_CHECK_LOG(cudaEventDestroy(p.done));
    }
    pending_.clear();
  }

  // REQUIRES: mu_ held. Retires the oldest pending collectives whose events are reached,
  // up to the first that is not.
  void retire_reached_locked() {
    while (!pending_.empty() && cudaEventQuery(pending_.front().done) == cudaSuccess) {
      note_finished(pending_.front().desc.seq, true);
      recycle_locked(pending_.front().start, pending_.front().done);
      pending_.pop_front();
    }
  }

  // REQUIRES: mu_ and launch_mu_ held (no thread inside NCCL), comm_ != nullptr.
  void abort_now_locked() {
    log_if_error(ncclCommAbort(comm_), "ncclCommAbort(comm)");
    comm_ = nullptr;
    abort_requested_ = false;
  }

  // Polls every pending collective: reached ones leave the queue; an asynchronous NCCL
  // error, a CUDA error, an enqueue or the oldest collective passing options().timeout
  // fails and aborts the communicator.
  void watchdog_loop() {
    ZDP_CUDA_CHECK_LOG(cudaSetDevice(device().index()));
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      // Idle: look for asynchronous errors a few times a second. Busy: every 2 ms, which
      // only delays recycling events, never the collectives themselves.
      const bool busy = !pending_.empty() || enqueuing_.has_value() || (abort_requested_ && comm_ != nullptr);
      cv_.wait_for(lock, busy ? std::chrono::milliseconds(2) : std::chrono::milliseconds(200));
      if (stop_) break;
      if (comm_ == nullptr) continue;

      {
        // ncclCommGetAsyncError is an NCCL call like any other: on a nonblocking
        // communicator it joins and frees the finished group job (comm->groupJob), so it
        // must never run beside another thread's call (settle included). An enqueue under
        // way polls it itself (settle); here it is polled only while no enqueue is.
        std::unique_lock<std::mutex> serial(launch_mu_, std::try_to_lock);
        if (serial.owns_lock()) {
          if (abort_requested_) {  // deferred by a failure while an enqueue was finishing: nobody else will
            abort_now_locked();
            continue;
          }
          ncclResult_t async = ncclSuccess;
          const ncclResult_t r = ncclCommGetAsyncError(comm_, &async);
          if (r != ncclSuccess) async = r;
          if (async != ncclSuccess && async != ncclInProgress) {
            retire_reached_locked();  // name the collective still waiting, not one finished since the last round
            const std::string what = pending_.empty() ? "rank " + std::to_string(rank()) + ": nccl communicator"
                                                      : context(pending_.front().desc);
            (void)fail_and_abort_locked(Status(nccl_status_code(async), what + ": asynchronous NCCL error: " +
                                                                            nccl_error_text(async) +
                                                                            "; communicator aborted"),
                                        /*holds_launch_lock=*/true);
            continue;
          }
        }
      }  // launch_mu_ released: the fail_and_abort_locked(..., false) calls below try_lock it

      const Clock::time_point now = Clock::now();
      // An enqueue bounds its own wait (launch()); this is the backstop should it not return.
      if (enqueuing_ && !abort_requested_ && now - enqueuing_->since > options().timeout + std::chrono::seconds(5)) {
        (void)fail_and_abort_locked(
            Status(StatusCode::kTimeout, context(enqueuing_->desc) + ": NCCL did not finish enqueueing it within " +
                                             format_duration(options().timeout) +
                                             " (a peer may never have connected); communicator aborted"),
            /*holds_launch_lock=*/false);
        continue;
      }
      for (auto it = pending_.begin(); it != pending_.end();) {
        const cudaError_t e = cudaEventQuery(it->done);
        if (e == cudaSuccess) {
          note_finished(it->desc.seq, true);  // the flight recorder's end: when the watchdog saw it
          recycle_locked(it->start, it->done);
          it = pending_.erase(it);
          continue;
        }
        if (e != cudaErrorNotReady) {
          (void)cudaGetLastError();
          (void)fail_and_abort_locked(Status(StatusCode::kCudaError, context(it->desc) + " on stream '" +
                                                                         it->stream_name + "': CUDA error: " +
                                                                         cuda_error_text(e) + "; communicator aborted"),
                                      /*holds_launch_lock=*/false);
          break;  // the queue is gone
        }
        if (!it->reached) {
          const cudaError_t started = cudaEventQuery(it->start);
          if (started == cudaSuccess) {
            it->reached = now;
            note_started(it->desc.seq);
          } else if (started != cudaErrorNotReady) {
            (void)cudaGetLastError();  // the done event's query reports it next round
          }
        }
        if (it->reached && now - *it->reached > options().timeout) {
          const size_t others = pending_.size() - 1;
          (void)fail_and_abort_locked(Status(
              StatusCode::kTimeout,
              context(it->desc) + " timed out after " + format_duration(options().timeout) + " on stream '" +
                  it->stream_name + "', counted from when the stream reached it (a peer may have died, hung, " +
                  "or called collectives in another order" +
                  (others > 0 ? "; " + std::to_string(others) + " later collective(s) also pending" : std::string()) +
                  "); communicator aborted"),
              /*holds_launch_lock=*/false);
          break;
        }
        ++it;
      }
    }
  }

  std::mutex launch_mu_;  // serialises the calls into NCCL that enqueue collectives
  std::mutex mu_;         // guards everything below, and every other use of comm_
  std::condition_variable cv_;
  ncclComm_t comm_;  // null once aborted or destroyed
  DeviceBuffer scratch_;  // one int32 for barrier()
  std::deque<Pending> pending_;  // in enqueue order
  std::optional<Enqueuing> enqueuing_;
  // Set (under mu_) when a failure found launch_mu_ held: the enqueuing thread aborts.
  std::atomic<bool> abort_requested_{false};
  std::vector<cudaEvent_t> free_events_;
  bool stop_ = false;
  std::thread watchdog_;  // last: started once everything it uses exists
};

}  // namespace

std::unique_ptr<Communicator> make_communicator(int rank, int world_size, Device& device, const CommOptions& options,
                                                ncclComm_t comm, DeviceBuffer scratch) {
  return std::make_unique<NcclCommunicator>(rank, world_size, device, options, comm, std::move(scratch));
}

}  // namespace zdp::nccl
