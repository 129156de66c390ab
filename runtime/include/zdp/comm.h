// Communicators: the collectives zdp needs, asynchronous on a device stream.
// Backends: Gloo (CPU buffers; CUDA buffers staged through pinned host memory) and NCCL
// (CUDA). Every call becomes one CollectiveDesc that feeds the backend's single launch
// path and names the call in logs, errors and timeouts. This header includes no Gloo,
// NCCL or CUDA header.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zdp/device.h"
#include "zdp/dtype.h"
#include "zdp/status.h"
#include "zdp/store.h"

namespace zdp {

namespace detail {
class FlightRecorder;  // runtime/src/comm/flight_recorder.h
struct TestHook;       // runtime/src/comm/comm_test_hook.h
}  // namespace detail

enum class ReduceOp : uint8_t { kSum = 0, kAvg, kMax };
const char* to_string(ReduceOp op);

enum class CollectiveOp : uint8_t { kAllReduce = 0, kReduceScatter, kAllGather, kBroadcast, kBarrier, kAllToAll };
inline constexpr int kNumCollectiveOps = 6;  // what a profile read from another rank may name
static_assert(kNumCollectiveOps == static_cast<int>(CollectiveOp::kAllToAll) + 1, "kNumCollectiveOps counts the ops");
const char* to_string(CollectiveOp op);

struct CollectiveDesc {
  CollectiveOp op = CollectiveOp::kBarrier;
  DType dtype = DType::kF32;
  ReduceOp reduce = ReduceOp::kSum;
  // Elements: of the whole buffer for all_reduce and broadcast; of one rank's slice for
  // reduce_scatter (its output) and all_gather (its input), as in NCCL; of one peer's
  // chunk for all_to_all.
  int64_t count = 0;
  int root = 0;       // broadcast only
  int64_t tag = -1;   // the caller's label, e.g. a bucket id; -1 when none
  uint64_t seq = 0;   // per-communicator sequence number: equal on every rank for one call
  int world_size = 1;

  // Bytes of `count` elements.
  int64_t bytes() const { return count * static_cast<int64_t>(dtype_size(dtype)); }
  // "reduce_scatter #12 (tag 7, sum, 262144 x bf16 = 512.0 KiB per rank)"
  std::string describe() const;
  // A hash of everything every rank must agree on (op, dtype, reduce, count, root, tag,
  // world size; not seq): two ranks whose collective #n differ in any of these have
  // different signatures (desync detection).
  uint64_t signature() const;
};

// One collective as a communicator's flight recorder keeps it. Times are steady_clock;
// a zero time_point means "not yet".
struct CollectiveRecord {
  CollectiveDesc desc;
  std::chrono::steady_clock::time_point enqueued;  // the call
  std::chrono::steady_clock::time_point started;   // the backend began to run it
  std::chrono::steady_clock::time_point ended;     // it completed or failed
  bool failed = false;
  // "all_reduce #7 (...): enqueued 1.20 s ago, ran 0.003 s" (`now` for the ages)
  std::string describe(std::chrono::steady_clock::time_point now) const;
};

// Where a communicator is, for heartbeats and liveness reports.
struct CommProgress {
  uint64_t issued = 0;     // collectives called so far (the next sequence number)
  uint64_t completed = 0;  // of those, finished
  // The oldest collective issued and not finished, if any, and how long ago it was issued.
  bool in_flight = false;
  CollectiveDesc current;
  double current_s = 0;
  // Seconds since the last collective finished (or since the communicator was made).
  double idle_s = 0;
  // A hash over the sequence numbers and signatures of the `issued` collectives: ranks
  // that issued the same collectives agree on it (compared at step boundaries).
  uint64_t fingerprint = 0;
};

struct CommOptions {
  // A collective that has not completed after this long fails on this rank with kTimeout.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // Gloo: address of this rank's listening socket, seen by the other ranks. Empty picks
  // 127.0.0.1 when `iface` is empty too (one host). zdp::init fills one of the two: the
  // local address routing to MASTER_ADDR unless the config or GLOO_SOCKET_IFNAME says
  // otherwise (README, "Multi-node").
  std::string hostname;
  // Gloo: network interface to bind (e.g. "eth0"); takes precedence over hostname.
  std::string iface;
};

// The shape of an all_to_all whose chunks differ by peer (zero.compress = "inter-node":
// full-precision chunks to the peers of this rank's node, quantized ones to the others).
struct AllToAllShape {
  // Elements sent to and received from each peer: world_size entries, each in [0, count]
  // (the own entry is copied locally; 0 moves nothing). Symmetric: peer q's counts[rank]
  // equals this rank's counts[q] (each side posts what it expects).
  std::vector<int64_t> counts;
  // Every peer is sent the first counts[q] elements of one chunk at `send` (an
  // all-gather's shape): `send` then holds one chunk of `count`, not world_size of them.
  bool send_shared = false;
};

// Rules common to all collectives:
// - Asynchronous: the call validates its arguments and enqueues the work on `stream`
//   after the stream's earlier work; completion and failure are observed through an
//   event recorded on the stream afterwards (or stream.synchronize()). Buffers must stay
//   valid and untouched until then.
// - Every rank calls the same collectives in the same order with the same count, dtype
//   and op (the sequence numbers then agree).
// - Buffers are on the communicator's device (or pinned host memory for CUDA devices).
// - In place is allowed: all_reduce with send == recv; reduce_scatter with
//   recv == send + rank * count; all_gather with send == recv + rank * count.
// - A collective that times out or whose peer died fails with an error naming the op,
//   tag, bytes, sequence number and rank, and leaves the communicator failed: every
//   later collective fails at once (kAborted) with that first error.
class Communicator {
 public:
  virtual ~Communicator() = default;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  Device& device() const { return device_; }
  const CommOptions& options() const { return options_; }
  virtual const char* backend() const = 0;

  Status all_reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op, Stream& stream,
                    int64_t tag = -1);
  // `send` holds world_size * recv_count elements; rank r receives the reduction of slice r.
  Status reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype, ReduceOp op,
                        Stream& stream, int64_t tag = -1);
  // `recv` receives world_size * send_count elements, rank r's input at slice r.
  Status all_gather(const void* send, void* recv, int64_t send_count, DType dtype, Stream& stream,
                    int64_t tag = -1);
  // `send` holds world_size chunks of `count` elements, chunk q for rank q; `recv` receives
  // world_size chunks, chunk q from rank q (this rank's own chunk is copied). Moves bytes
  // only (nothing is reduced), so `dtype` just sizes the elements: the compressed gradient
  // exchange sends its quantized chunks as fp32 words. Not in place.
  Status all_to_all(const void* send, void* recv, int64_t count, DType dtype, Stream& stream, int64_t tag = -1);
  // The same with per-peer sizes (`shape`): chunk q still starts at q x count elements of
  // `send` (unless shape.send_shared) and of `recv`, but only shape.counts[q] elements of
  // it travel. `count` is what every rank must agree on (the desync check); the counts
  // may differ by rank.
  Status all_to_all(const void* send, void* recv, int64_t count, DType dtype, const AllToAllShape& shape,
                    Stream& stream, int64_t tag = -1);
  Status broadcast(void* buffer, int64_t count, DType dtype, int root, Stream& stream, int64_t tag = -1);
  Status barrier(Stream& stream);

  // Fails every pending and later collective with `reason` and releases the transport,
  // so that no rank waits on a peer that will never come. Safe from any thread.
  virtual void abort(const std::string& reason) = 0;
  // The first failure of this communicator, or OK.
  Status error() const;
  // Whether that first failure was abort() on this rank: the rank gave up on its own (its
  // launcher blames it, kExitFailed), where a peer's failure or a timeout came first
  // otherwise. Its own collectives fail with kAborted, as its peers' would.
  bool aborted_here() const;

  // The flight recorder: the last kFlightRecorderSize collectives, oldest first. Printed
  // (as flight_record_text()) when the communicator fails; any thread may read it.
  static constexpr size_t kFlightRecorderSize = 64;
  std::vector<CollectiveRecord> flight_record() const;
  // One line per recorded collective, each starting with `indent`.
  std::string flight_record_text(const std::string& indent = "  ") const;
  // Progress for liveness reports (any thread).
  CommProgress progress() const;

 protected:
  Communicator(int rank, int world_size, Device& device, CommOptions options);

  struct Buffers {
    const void* send = nullptr;
    void* recv = nullptr;
    std::shared_ptr<const AllToAllShape> shape;  // all_to_all with per-peer sizes, else null
  };
  // The backend's single enqueue path. `desc` is validated and numbered.
  virtual Status launch(const CollectiveDesc& desc, Buffers buffers, Stream& stream) = 0;

  // Records `status` if it is the first failure and returns the first failure: the root
  // cause (e.g. an abort) is what every later error reports.
  Status fail(const Status& status);
  // fail() by abort(): the same, and aborted_here() when it is the first failure.
  Status fail_by_abort(const Status& status);
  // "rank 1: reduce_scatter #3 (...)": the context every backend error starts with.
  std::string context(const CollectiveDesc& desc) const;
  // Backends report when a collective begins to run and when it ends, for the flight
  // recorder (without note_started, a collective counts as started when enqueued).
  void note_started(uint64_t seq);
  // `ok`: it ran; !ok: it was never run (dropped behind an earlier failure).
  void note_finished(uint64_t seq, bool ok);
  // It ran and failed: the heartbeats keep naming it as the collective this rank is in.
  void note_failed(uint64_t seq);
  // Gloo's message tag for `desc`: its sequence number and its signature, so that ranks
  // that disagree on a collective never exchange its data (they wait, and the liveness
  // watch names both sides) and that concurrent collectives never share a tag.
  static uint32_t wire_tag(const CollectiveDesc& desc);

 private:
  Status submit(CollectiveDesc desc, Buffers buffers, Stream& stream);
  Status record_failure(const Status& status, bool by_abort);  // fail() and fail_by_abort()
  // Numbers, records and launches a validated collective.
  Status issue(CollectiveDesc desc, Buffers buffers, Stream& stream);

  const int rank_;
  const int world_size_;
  Device& device_;
  const CommOptions options_;
  mutable std::mutex error_mu_;
  Status error_;
  bool aborted_here_ = false;  // under error_mu_
  std::shared_ptr<detail::FlightRecorder> recorder_;
  std::shared_ptr<detail::TestHook> test_hook_;  // $ZDP_TEST_COMM, tests only
};

// Gloo over TCP, bootstrapped through `store` (every rank calls this with the same store
// contents and world size). `device` may be a CPU or (in CUDA builds) a CUDA device.
StatusOr<std::unique_ptr<Communicator>> create_gloo_communicator(Store& store, int rank, int world_size,
                                                                 Device& device, const CommOptions& options);

// NCCL on a CUDA device; the unique id travels through `store`. kUnavailable in builds
// without NCCL.
StatusOr<std::unique_ptr<Communicator>> create_nccl_communicator(Store& store, int rank, int world_size,
                                                                 Device& device, const CommOptions& options);

}  // namespace zdp
