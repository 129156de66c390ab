// Communicator::abort on a rank whose own ring reduce-scatter or all-to-all waits for a
// peer that never comes: Gloo ends such a wait only at its timeout, and closing this
// rank's connections does not wake it, so the collective's host task (and with it the
// communicator's destructor, which waits for it) lingered for the whole collective
// timeout. The rank that aborted, the one at fault, then exited last, and its launcher
// blamed the peer it had failed. zdp's own collectives now wait through GlooWaits, which
// the abort ends (runtime/src/comm/gloo/gloo_waits.h). Gloo's own (all-reduce) still end
// at their timeout: comm_gloo_test's AbortReleasesABlockedCollective bounds only the caller.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "testing/fork_ranks.h"
#include "zdp/comm.h"
#include "zdp/device.h"

namespace zdp {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::fork_ranks;

enum class Op { kReduceScatter, kAllToAll };

// Rank 0 issues `op` with a 20 s timeout; rank 1 never does. Rank 0 aborts after 300 ms
// and must be able to destroy its communicator (every collective of it ended) within 4 s.
Status abort_ends_the_wait(Op op, int rank, int world, Store& store) {
  std::unique_ptr<Device> device = create_cpu_device();
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->create_stream("comm"));
  CommOptions options;
  options.timeout = 20s;
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, create_gloo_communicator(store, rank, world, *device, options));
  if (rank == 1) return store.wait({"rank0_done"}, 60s);
  const int64_t count = 1 << 16;  // elements a rank receives
  std::vector<float> send(static_cast<size_t>(count * world), 1.0f), recv(static_cast<size_t>(count * world));
  const auto start = Clock::now();
  const Status issued = op == Op::kReduceScatter
                            ? comm->reduce_scatter(send.data(), recv.data(), count, DType::kF32, ReduceOp::kSum, *stream)
                            : comm->all_to_all(send.data(), recv.data(), count, DType::kF32, *stream);
  ZDP_RETURN_IF_ERROR(issued);
  std::this_thread::sleep_for(300ms);
  comm->abort("this rank gave up");
  const Status waited = stream->synchronize(60s);
  comm.reset();  // waits for the collective's host task
  const auto elapsed = Clock::now() - start;
  ZDP_RETURN_IF_ERROR(store.set("rank0_done", "1"));
  if (waited.code() != StatusCode::kAborted || waited.message().find("this rank gave up") == std::string::npos) {
    return Status(StatusCode::kInternal, "the collective ended with " + waited.to_string());
  }
  if (elapsed > 4s) {
    return Status(StatusCode::kInternal, "the aborted collective ran on for " +
                                             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()) +
                                             " ms: its wait lasted until the timeout");
  }
  return Status::Ok();
}

TEST(GlooAbortWaits, AbortEndsTheRingReduceScattersOwnWait) {
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [](int rank, int world, Store& store) {
              return abort_ends_the_wait(Op::kReduceScatter, rank, world, store);
            })),
            "");
}

TEST(GlooAbortWaits, AbortEndsTheAllToAllsOwnWait) {
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [](int rank, int world, Store& store) {
              return abort_ends_the_wait(Op::kAllToAll, rank, world, store);
            })),
            "");
}

// A collective that fails (a peer died) ends this rank's others too: rank 0's all-to-all
// (on a stream of its own) waits for rank 1's chunk first, and rank 1, alive, never
// issues it; then rank 2 dies, and rank 0's all-reduce fails on it. Closing the
// connections woke nothing on this side, and the all-to-all (and the communicator's
// destructor) waited out the 20 s timeout.
TEST(GlooAbortWaits, AFailedCollectiveEndsTheOthersWaits) {
  EXPECT_EQ(testing::describe_failures(fork_ranks(3, [](int rank, int world, Store& store) -> Status {
              std::unique_ptr<Device> device = create_cpu_device();
              ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> ring, device->create_stream("ring"));
              ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> other, device->create_stream("other"));
              CommOptions options;
              options.timeout = 20s;
              ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                                   create_gloo_communicator(store, rank, world, *device, options));
              if (rank == 2) {  // dies once rank 0's all-to-all waits: its connections close
                ZDP_RETURN_IF_ERROR(store.wait({"waiting"}, 60s));
                ::_exit(0);
              }
              if (rank == 1) return store.wait({"rank0_done"}, 60s);
              const int64_t count = 1 << 16;
              std::vector<float> send(static_cast<size_t>(count * world), 1.0f), recv(send.size());
              const auto start = Clock::now();
              Status ran = comm->all_to_all(send.data(), recv.data(), count, DType::kF32, *ring);
              std::this_thread::sleep_for(300ms);
              if (ran.ok()) ran = store.set("waiting", "1");
              std::this_thread::sleep_for(500ms);
              if (ran.ok()) ran = comm->all_reduce(send.data(), send.data(), count, DType::kF32, ReduceOp::kSum, *other);
              if (ran.ok()) ran = other->synchronize(60s);
              (void)ring->synchronize(60s);
              comm.reset();
              const auto elapsed = Clock::now() - start;
              ZDP_RETURN_IF_ERROR(store.set("rank0_done", "1"));
              if (ran.ok()) return Status(StatusCode::kInternal, "the all-reduce with a dead rank succeeded");
              if (elapsed > 6s) {
                return Status(StatusCode::kInternal, "the all-to-all ran on for " +
                                                         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()) +
                                                         " ms after the all-reduce failed");
              }
              return Status::Ok();
            })),
            "");
}

}  // namespace
}  // namespace zdp
