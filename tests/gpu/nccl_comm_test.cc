// The NCCL communicator: every collective and dtype against closed-form results, in a
// world of 1 and (with two GPUs) 2 ranks run as threads over an InMemoryStore; timeouts
// of init and of a collective whose peer never comes; abort. Skips without a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/convert.h"
#include "zdp/comm.h"
#include "zdp/device.h"
#include "zdp/store.h"

namespace zdp {
namespace {

using std::chrono::milliseconds;

#define SKIP_WITHOUT_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

constexpr milliseconds kWait{60000};
const DType kAllTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI64};

// Host-side values in any dtype. Every expected value in this file is a small integer or
// half-integer, exact in all four types, so results are compared exactly.
std::vector<char> encode(DType t, const std::function<double(size_t)>& value, size_t n) {
  std::vector<char> out(n * dtype_size(t));
  for (size_t i = 0; i < n; ++i) {
    const double v = value(i);
    char* p = out.data() + i * dtype_size(t);
    switch (t) {
      case DType::kF32: { const float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case DType::kF16: { const uint16_t h = kernels::f32_to_f16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case DType::kBF16: { const uint16_t h = kernels::f32_to_bf16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case DType::kI64: { const int64_t x = std::llround(v); std::memcpy(p, &x, 8); break; }
    }
  }
  return out;
}

double decode(DType t, const std::vector<char>& data, size_t i) {
  const char* p = data.data() + i * dtype_size(t);
  switch (t) {
    case DType::kF32: { float f; std::memcpy(&f, p, 4); return f; }
    case DType::kF16: { uint16_t h; std::memcpy(&h, p, 2); return kernels::f16_to_f32(h); }
    case DType::kBF16: { uint16_t h; std::memcpy(&h, p, 2); return kernels::bf16_to_f32(h); }
    case DType::kI64: { int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
  }
  return 0;
}

// One rank's device, stream and communicator, and the steps every check repeats.
class Rank {
 public:
  Rank(int rank, int world) : rank_(rank), world_(world) {}

  Status init(Store& store, int device_index, milliseconds timeout = kWait) {
    ZDP_ASSIGN_OR_RETURN(device_, create_cuda_device(device_index));
    ZDP_ASSIGN_OR_RETURN(stream_, device_->create_stream("comm"));
    ZDP_ASSIGN_OR_RETURN(done_, device_->create_event());
    CommOptions options;
    options.timeout = timeout;
    ZDP_ASSIGN_OR_RETURN(comm_, create_nccl_communicator(store, rank_, world_, *device_, options));
    return Status::Ok();
  }

  StatusOr<DeviceBuffer> upload(DType t, size_t n, const std::function<double(size_t)>& value) {
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer buf, device_->allocate(static_cast<int64_t>(n * dtype_size(t)), MemCategory::kOther));
    const std::vector<char> host = encode(t, value, n);
    ZDP_RETURN_IF_ERROR(device_->memcpy(buf.data(), host.data(), host.size()));
    return buf;
  }

  // Waits for the stream, then compares `buf` (n elements) with `expected`.
  Status check(const std::string& what, DType t, const DeviceBuffer& buf, size_t n,
               const std::function<double(size_t)>& expected) {
    ZDP_RETURN_IF_ERROR(stream_->record(*done_));
    ZDP_RETURN_IF_ERROR(done_->wait(kWait).with_context(what));
    std::vector<char> host(n * dtype_size(t));
    ZDP_RETURN_IF_ERROR(device_->memcpy(host.data(), buf.data(), host.size()));
    for (size_t i = 0; i < n; ++i) {
      const double got = decode(t, host, i);
      if (got != expected(i)) {
        return Status(StatusCode::kInternal, "rank " + std::to_string(rank_) + ": " + what + " (" + to_string(t) +
                                                 ", n=" + std::to_string(n) + "): Mismatch at index " +
                                                 std::to_string(i) + ": got " + std::to_string(got) + ", expected " +
                                                 std::to_string(expected(i)));
      }
    }
    return Status::Ok();
  }

  // Every collective with inputs whose reductions have closed forms for K ranks.
  Status run_all(DType t, size_t n) {
    const int K = world_;
    const int r = rank_;
    const double tri = K * (K + 1) / 2.0;  // sum over ranks q of (q + 1)
    Communicator& c = *comm_;
    Stream& s = *stream_;

    // all_reduce: x_q[i] = (q + 1) + i % 5.
    auto x = [r](size_t i) { return (r + 1) + static_cast<double>(i % 5); };
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer in, upload(t, n, x));
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer out, upload(t, n, [](size_t) { return -1.0; }));
    ZDP_RETURN_IF_ERROR(c.all_reduce(in.data(), out.data(), static_cast<int64_t>(n), t, ReduceOp::kSum, s, 1));
    ZDP_RETURN_IF_ERROR(check("all_reduce sum", t, out, n, [&](size_t i) { return tri + K * double(i % 5); }));
    ZDP_RETURN_IF_ERROR(c.all_reduce(in.data(), out.data(), static_cast<int64_t>(n), t, ReduceOp::kMax, s, 2));
    ZDP_RETURN_IF_ERROR(check("all_reduce max", t, out, n, [&](size_t i) { return K + double(i % 5); }));
    if (t != DType::kI64) {
      ZDP_RETURN_IF_ERROR(c.all_reduce(in.data(), out.data(), static_cast<int64_t>(n), t, ReduceOp::kAvg, s, 3));
      ZDP_RETURN_IF_ERROR(check("all_reduce avg", t, out, n, [&](size_t i) { return tri / K + double(i % 5); }));
    }
    ZDP_RETURN_IF_ERROR(c.all_reduce(in.data(), in.data(), static_cast<int64_t>(n), t, ReduceOp::kSum, s, 4));
    ZDP_RETURN_IF_ERROR(check("all_reduce sum in place", t, in, n, [&](size_t i) { return tri + K * double(i % 5); }));

    // reduce_scatter: send K*n elements, x_q[j] = (q + 1) + j % 7; rank r gets slice r.
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer rs_in, upload(t, K * n, [r](size_t j) { return (r + 1) + double(j % 7); }));
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer rs_out, upload(t, n, [](size_t) { return -1.0; }));
    ZDP_RETURN_IF_ERROR(
        c.reduce_scatter(rs_in.data(), rs_out.data(), static_cast<int64_t>(n), t, ReduceOp::kSum, s, 5));
    ZDP_RETURN_IF_ERROR(check("reduce_scatter sum", t, rs_out, n,
                              [&](size_t i) { return tri + K * double((r * n + i) % 7); }));

    // all_gather: y_q[i] = 10 q + i % 9 lands at slice q.
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer ag_in, upload(t, n, [r](size_t i) { return 10.0 * r + double(i % 9); }));
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer ag_out, upload(t, K * n, [](size_t) { return -1.0; }));
    ZDP_RETURN_IF_ERROR(c.all_gather(ag_in.data(), ag_out.data(), static_cast<int64_t>(n), t, s, 6));
    ZDP_RETURN_IF_ERROR(check("all_gather", t, ag_out, K * n,
                              [&](size_t j) { return 10.0 * double(j / n) + double((j % n) % 9); }));

    // broadcast from the last rank: 3 + i % 11 there, -1 everywhere else.
    const int root = K - 1;
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer bc, upload(t, n, [&](size_t i) { return r == root ? 3.0 + double(i % 11) : -1.0; }));
    ZDP_RETURN_IF_ERROR(c.broadcast(bc.data(), static_cast<int64_t>(n), t, root, s, 7));
    ZDP_RETURN_IF_ERROR(check("broadcast", t, bc, n, [](size_t i) { return 3.0 + double(i % 11); }));

    ZDP_RETURN_IF_ERROR(c.barrier(s));
    ZDP_RETURN_IF_ERROR(stream_->synchronize(kWait).with_context("barrier"));
    return Status::Ok();
  }

  Status run_every_type() {
    for (DType t : kAllTypes) {
      for (size_t n : {size_t{1}, size_t{1001}, size_t{65537}}) ZDP_RETURN_IF_ERROR(run_all(t, n));
    }
    return comm_->error();
  }

  Device& device() { return *device_; }
  Stream& stream() { return *stream_; }
  Event& done() { return *done_; }
  Communicator& comm() { return *comm_; }
  // The communicator goes before the stream it uses. The device stays until the Rank
  // goes: a test's buffers, declared after the Rank, are freed on it first (freeing them
  // after close() had destroyed it was a segfault on an H200).
  void close() {
    comm_.reset();
    done_.reset();
    stream_.reset();
  }

 private:
  const int rank_;
  const int world_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<Event> done_;
  std::unique_ptr<Communicator> comm_;
};

TEST(NcclComm, WorldOfOneEveryCollectiveAndType) {
  SKIP_WITHOUT_GPU();
  InMemoryStore store;
  Rank rank(0, 1);
  ASSERT_TRUE(rank.init(store, 0).ok());
  EXPECT_STREQ(rank.comm().backend(), "nccl");
  EXPECT_EQ(rank.comm().world_size(), 1);
  const Status s = rank.run_every_type();
  EXPECT_TRUE(s.ok()) << s.to_string();
  rank.close();
}

TEST(NcclComm, EmptyCollectiveAndBadArgumentsAreHandled) {
  SKIP_WITHOUT_GPU();
  InMemoryStore store;
  Rank rank(0, 1);
  ASSERT_TRUE(rank.init(store, 0).ok());
  EXPECT_TRUE(rank.comm().all_reduce(nullptr, nullptr, 0, DType::kF32, ReduceOp::kSum, rank.stream()).ok());
  const Status avg_int =
      rank.comm().all_reduce(nullptr, nullptr, 4, DType::kI64, ReduceOp::kAvg, rank.stream());
  EXPECT_EQ(avg_int.code(), StatusCode::kInvalidArgument) << avg_int.to_string();
  EXPECT_TRUE(rank.stream().synchronize(kWait).ok());
  EXPECT_TRUE(rank.comm().error().ok()) << "argument errors do not fail the communicator";
  rank.close();
}

// zero.compress = "inter-node"'s shaped all_to_all: only counts[q] elements of a chunk
// move (here the own chunk, a device copy), the rest of the receive buffer keeps its bytes.
TEST(NcclComm, ShapedAllToAllMovesOnlyEachPeersCount) {
  SKIP_WITHOUT_GPU();
  InMemoryStore store;
  Rank rank(0, 1);
  ASSERT_TRUE(rank.init(store, 0).ok());
  StatusOr<DeviceBuffer> send = rank.upload(DType::kF32, 8, [](size_t i) { return static_cast<double>(i + 1); });
  StatusOr<DeviceBuffer> recv = rank.upload(DType::kF32, 8, [](size_t) { return -1.0; });
  ASSERT_TRUE(send.ok() && recv.ok());
  AllToAllShape shape;
  shape.counts = {3};
  Status s = rank.comm().all_to_all(send->data(), recv->data(), 8, DType::kF32, shape, rank.stream());
  ASSERT_TRUE(s.ok()) << s.to_string();
  s = rank.check("shaped all_to_all", DType::kF32, *recv, 8, [](size_t i) { return i < 3 ? i + 1.0 : -1.0; });
  EXPECT_TRUE(s.ok()) << s.to_string();
  shape.counts = {0};  // nothing moves
  shape.send_shared = true;
  ASSERT_TRUE(rank.comm().all_to_all(send->data(), recv->data(), 8, DType::kF32, shape, rank.stream()).ok());
  s = rank.check("empty shaped all_to_all", DType::kF32, *recv, 8, [](size_t i) { return i < 3 ? i + 1.0 : -1.0; });
  EXPECT_TRUE(s.ok()) << s.to_string();
  rank.close();
}

// Host memory handed to NCCL is refused before NCCL sees it, naming the collective: in a
// world of 1 NCCL's own path would never touch it, so only the check catches the class
// (a host vector, a stack variable, pinned memory) before a 2-GPU run dies on it.
TEST(NcclComm, HostMemoryIsRefusedNamingTheCollective) {
  SKIP_WITHOUT_GPU();
  InMemoryStore store;
  Rank rank(0, 1);
  ASSERT_TRUE(rank.init(store, 0).ok());
  std::vector<int64_t> host(4, 1);
  int64_t flag = 0;
  const Status vec = rank.comm().all_reduce(host.data(), host.data(), 4, DType::kI64, ReduceOp::kMax, rank.stream());
  EXPECT_EQ(vec.code(), StatusCode::kInvalidArgument) << vec.to_string();
  EXPECT_NE(vec.message().find("all_reduce #"), std::string::npos) << vec.to_string();
  EXPECT_NE(vec.message().find("pageable host memory"), std::string::npos) << vec.to_string();
  const Status stack = rank.comm().broadcast(&flag, 1, DType::kI64, 0, rank.stream());
  EXPECT_NE(stack.message().find("broadcast #"), std::string::npos) << stack.to_string();
  auto pinned = rank.device().allocate(64, MemCategory::kOther, MemSpace::kPinnedHost);
  ASSERT_TRUE(pinned.ok());
  auto dev = rank.device().allocate(64, MemCategory::kOther);
  ASSERT_TRUE(dev.ok());
  const Status half = rank.comm().all_gather(dev->data(), pinned->data(), 4, DType::kF32, rank.stream());
  EXPECT_NE(half.message().find("receive buffer"), std::string::npos) << half.to_string();
  EXPECT_NE(half.message().find("pinned host memory"), std::string::npos) << half.to_string();
  // Device memory still works, and the refusals did not break the communicator.
  EXPECT_TRUE(rank.comm().all_reduce(dev->data(), dev->data(), 4, DType::kF32, ReduceOp::kSum, rank.stream()).ok());
  EXPECT_TRUE(rank.stream().synchronize(kWait).ok());
  EXPECT_TRUE(rank.comm().error().ok()) << rank.comm().error().to_string();
  rank.close();
}

TEST(NcclComm, AbortFailsEveryLaterCollective) {
  SKIP_WITHOUT_GPU();
  InMemoryStore store;
  Rank rank(0, 1);
  ASSERT_TRUE(rank.init(store, 0).ok());
  StatusOr<DeviceBuffer> buf = rank.device().allocate(1024, MemCategory::kOther);
  ASSERT_TRUE(buf.ok());
  rank.comm().abort("test says stop");
  EXPECT_EQ(rank.comm().error().code(), StatusCode::kAborted);
  EXPECT_NE(rank.comm().error().message().find("test says stop"), std::string::npos);
  const Status later = rank.comm().all_reduce(buf->data(), buf->data(), 256, DType::kF32, ReduceOp::kSum, rank.stream());
  EXPECT_EQ(later.code(), StatusCode::kAborted) << later.to_string();
  EXPECT_NE(later.message().find("all_reduce"), std::string::npos) << later.to_string();
  rank.close();
}

TEST(NcclComm, NonZeroRankTimesOutWaitingForTheUniqueId) {
  SKIP_WITHOUT_GPU();
  InMemoryStore store;
  Rank rank(1, 2);
  const Status s = rank.init(store, 0, milliseconds(300));
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
  EXPECT_NE(s.message().find("unique id"), std::string::npos) << s.to_string();
}

// Rank 0 of a world of 2 whose rank 1 never starts: the nonblocking init must give up at
// the deadline instead of hanging.
TEST(NcclComm, InitTimesOutWhenAPeerNeverComes) {
  SKIP_WITHOUT_GPU();
  InMemoryStore store;
  Rank rank(0, 2);
  const auto start = std::chrono::steady_clock::now();
  const Status s = rank.init(store, 0, milliseconds(2000));
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

// Runs `body(rank)` on one thread per rank (rank r on GPU r) and returns their statuses.
std::vector<Status> run_threads(int world, const std::function<Status(int)>& body) {
  std::vector<Status> results(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        results[static_cast<size_t>(r)] = body(r);
      } catch (const std::exception& e) {
        results[static_cast<size_t>(r)] = Status(StatusCode::kInternal, std::string("threw: ") + e.what());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(NcclComm, TwoRanksAsThreadsEveryCollectiveAndType) {
  SKIP_WITHOUT_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices";
  InMemoryStore store;
  const std::vector<Status> results = run_threads(2, [&](int r) -> Status {
    Rank rank(r, 2);
    ZDP_RETURN_IF_ERROR(rank.init(store, r));
    const Status s = rank.run_every_type();
    rank.close();
    return s;
  });
  for (size_t r = 0; r < results.size(); ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].to_string();
}

// Rank 1 never joins rank 0's all_reduce: the watchdog must fail it with a message naming
// the collective, abort the communicator, and let the stream's events finish.
TEST(NcclComm, CollectiveWhosePeerNeverComesTimesOut) {
  SKIP_WITHOUT_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices";
  InMemoryStore store;
  std::atomic<bool> rank0_done{false};
  const std::vector<Status> results = run_threads(2, [&](int r) -> Status {
    Rank rank(r, 2);
    ZDP_RETURN_IF_ERROR(rank.init(store, r, milliseconds(10000)));
    if (r == 1) {
      while (!rank0_done.load()) std::this_thread::sleep_for(milliseconds(10));
      rank.comm().abort("test over");
      rank.close();
      return Status::Ok();
    }
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer buf, rank.device().allocate(4096, MemCategory::kOther));
    Status outcome = rank.comm().all_reduce(buf.data(), buf.data(), 1024, DType::kF32, ReduceOp::kSum, rank.stream(), 7);
    if (outcome.ok()) {
      ZDP_RETURN_IF_ERROR(rank.stream().record(rank.done()));
      outcome = rank.done().wait(kWait);
    }
    rank0_done = true;
    const Status later = rank.comm().all_reduce(buf.data(), buf.data(), 1024, DType::kF32, ReduceOp::kSum, rank.stream());
    const Status comm_error = rank.comm().error();
    rank.close();
    if (outcome.code() != StatusCode::kTimeout) return Status(StatusCode::kInternal, "expected a timeout, got " + outcome.to_string());
    for (const char* part : {"rank 0", "all_reduce #0", "tag 7", "timed out after 10 s"}) {
      if (outcome.message().find(part) == std::string::npos) {
        return Status(StatusCode::kInternal, std::string("timeout message lacks '") + part + "': " + outcome.to_string());
      }
    }
    if (comm_error.code() != StatusCode::kTimeout) return Status(StatusCode::kInternal, "comm error: " + comm_error.to_string());
    if (later.code() != StatusCode::kAborted) return Status(StatusCode::kInternal, "later collective: " + later.to_string());
    return Status::Ok();
  });
  for (size_t r = 0; r < results.size(); ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].to_string();
}

// A collective's timeout counts from when its stream reaches it, not from its enqueue (the
// host runs ahead of the GPU). Here the stream first waits for 2.5 s of other work, the
// timeout is 1 s, and the collective itself is prompt: it must succeed. (Under the
// emulation the waiting work runs when polled, so only a GPU tells the two clocks apart
// in this world of one; the two-rank test below does under the emulation.)
TEST(NcclComm, TimeoutCountsFromWhenTheStreamReachesTheCollective) {
  SKIP_WITHOUT_GPU();
  InMemoryStore store;
  Rank rank(0, 1);
  ASSERT_TRUE(rank.init(store, 0, milliseconds(1000)).ok());
  {
    auto earlier = rank.device().create_stream("earlier work").value();
    auto reached = rank.device().create_event().value();
    ASSERT_TRUE(earlier->enqueue_host("2.5 s of earlier work", [] {
      std::this_thread::sleep_for(milliseconds(2500));
      return Status::Ok();
    }).ok());
    ASSERT_TRUE(earlier->record(*reached).ok());
    ASSERT_TRUE(rank.stream().wait(*reached).ok());
    DeviceBuffer buf = rank.device().allocate(4096, MemCategory::kOther).value();
    ASSERT_TRUE(rank.comm().all_reduce(buf.data(), buf.data(), 1024, DType::kF32, ReduceOp::kSum, rank.stream(), 1).ok());
    const Status synced = rank.stream().synchronize(kWait);
    EXPECT_TRUE(synced.ok()) << synced.to_string();
    EXPECT_TRUE(rank.comm().error().ok()) << rank.comm().error().to_string();
  }
  rank.close();
}

// Two ranks: rank 0's stream waits for a collective of a second communicator whose peer
// joins 3 s late, then runs a collective of the first (timeout 1.5 s) that rank 1 joins as
// soon as it can. Timed from its enqueue, the first communicator's collective would time
// out on rank 0 at 1.5 s; timed from when its stream reaches it, both ranks finish.
TEST(NcclComm, ACollectiveQueuedBehindALongOneIsNotTimedOut) {
  SKIP_WITHOUT_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices";
  InMemoryStore store;
  const std::vector<Status> results = run_threads(2, [&](int r) -> Status {
    Rank rank(r, 2);
    ZDP_RETURN_IF_ERROR(rank.init(store, r, milliseconds(1500)));
    CommOptions patient;
    patient.timeout = milliseconds(30000);
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> second, create_nccl_communicator(store, r, 2, rank.device(), patient));
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> other, rank.device().create_stream("second communicator"));
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Event> reached, rank.device().create_event());
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer a, rank.device().allocate(4096, MemCategory::kOther));
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer b, rank.device().allocate(4096, MemCategory::kOther));
    // Both communicators connected first: NCCL's first call on a communicator waits for
    // every peer in the enqueue itself, which would hold rank 0's host until rank 1 came.
    for (Communicator* c : {&rank.comm(), second.get()}) {
      ZDP_RETURN_IF_ERROR(c->all_reduce(a.data(), a.data(), 1024, DType::kF32, ReduceOp::kSum, *other, 0));
      ZDP_RETURN_IF_ERROR(other->synchronize(kWait));
    }
    if (r == 1) std::this_thread::sleep_for(milliseconds(3000));
    Status s = second->all_reduce(a.data(), a.data(), 1024, DType::kF32, ReduceOp::kSum, *other, 1);
    if (s.ok()) s = other->record(*reached);
    if (s.ok()) s = rank.stream().wait(*reached);
    if (s.ok()) s = rank.comm().all_reduce(b.data(), b.data(), 1024, DType::kF32, ReduceOp::kSum, rank.stream(), 2);
    if (s.ok()) s = rank.stream().synchronize(kWait);
    if (s.ok()) s = rank.comm().error();
    second.reset();
    rank.close();
    return s;
  });
  for (size_t r = 0; r < results.size(); ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].to_string();
}

}  // namespace
}  // namespace zdp
