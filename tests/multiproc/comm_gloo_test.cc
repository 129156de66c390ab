// The Gloo communicator with 1-4 real rank processes on loopback: every collective, each
// dtype, counts {0, 1, 7, 1000, 1<<20}, closed-form expected values; asynchrony; a dead
// peer, a timeout and an abort fail every survivor with a message naming the collective.
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/convert.h"
#include "testing/fork_ranks.h"
#include "zdp/comm.h"
#include "zdp/device.h"

namespace zdp {
namespace {

using namespace std::chrono_literals;
using testing::fork_ranks;

const DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI64};
const int64_t kCounts[] = {0, 1, 7, 1000, 1 << 20};

// ---- values with closed-form reductions ----------------------------------------
// Floating dtypes: small integers, so every partial sum is exact in fp16/bf16 too and
// the expected result does not depend on the reduction order. int64: values above 2^53,
// so a detour through double would show.
int64_t value(DType dtype, int rank, int64_t index) {
  if (dtype == DType::kI64) return (rank + 1) * 1'000'000'000'000'000LL + index;
  return (rank + 1) * (index % 7 + 1);
}

int64_t reduce_all(DType dtype, ReduceOp op, int world, int64_t index) {
  int64_t acc = op == ReduceOp::kMax ? value(dtype, 0, index) : 0;
  for (int r = 0; r < world; ++r) {
    const int64_t v = value(dtype, r, index);
    acc = op == ReduceOp::kMax ? std::max(acc, v) : acc + v;
  }
  return acc;
}

// Encoded element of `dtype` for an integral value; kAvg scales in fp32 then rounds once
// (what the backend does: sum, then multiply by 1/K).
void encode(DType dtype, int64_t v, bool average, int world, void* dst) {
  const float f = average ? static_cast<float>(v) * (1.0f / static_cast<float>(world)) : static_cast<float>(v);
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, &f, 4); return;
    case DType::kF16: { const uint16_t h = kernels::f32_to_f16(f); std::memcpy(dst, &h, 2); return; }
    case DType::kBF16: { const uint16_t h = kernels::f32_to_bf16(f); std::memcpy(dst, &h, 2); return; }
    case DType::kI64: std::memcpy(dst, &v, 8); return;
  }
}

std::string decode_text(DType dtype, const char* p) {
  switch (dtype) {
    case DType::kF32: { float f; std::memcpy(&f, p, 4); return std::to_string(f); }
    case DType::kF16: { uint16_t h; std::memcpy(&h, p, 2); return std::to_string(kernels::f16_to_f32(h)); }
    case DType::kBF16: { uint16_t h; std::memcpy(&h, p, 2); return std::to_string(kernels::bf16_to_f32(h)); }
    case DType::kI64: { int64_t v; std::memcpy(&v, p, 8); return std::to_string(v); }
  }
  return "?";
}

using Bytes = std::vector<char>;

Bytes rank_input(DType dtype, int rank, int64_t offset, int64_t n) {
  const size_t es = dtype_size(dtype);
  Bytes b(static_cast<size_t>(n) * es);
  for (int64_t i = 0; i < n; ++i) encode(dtype, value(dtype, rank, offset + i), false, 1, &b[static_cast<size_t>(i) * es]);
  return b;
}

Bytes expected_reduction(DType dtype, ReduceOp op, int world, int64_t offset, int64_t n) {
  const size_t es = dtype_size(dtype);
  Bytes b(static_cast<size_t>(n) * es);
  for (int64_t i = 0; i < n; ++i) {
    encode(dtype, reduce_all(dtype, op, world, offset + i), op == ReduceOp::kAvg, world, &b[static_cast<size_t>(i) * es]);
  }
  return b;
}

Status compare(const std::string& what, DType dtype, const Bytes& got, const Bytes& want) {
  if (got.size() != want.size()) return Status(StatusCode::kInternal, what + ": size mismatch");
  const size_t es = dtype_size(dtype);
  for (size_t i = 0; i < got.size(); i += es) {
    if (std::memcmp(&got[i], &want[i], es) != 0) {
      return Status(StatusCode::kInternal, what + ": Mismatch at index " + std::to_string(i / es) + ": got " +
                                               decode_text(dtype, &got[i]) + ", expected " +
                                               decode_text(dtype, &want[i]));
    }
  }
  return Status::Ok();
}

std::string label(const char* op, DType dtype, ReduceOp red, int64_t count, bool in_place = false) {
  return std::string(op) + " " + to_string(dtype) + " " + to_string(red) + " count " + std::to_string(count) +
         (in_place ? " in place" : "");
}

// ---- per-rank setup ------------------------------------------------------------
struct Rank {
  std::unique_ptr<Device> device;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<Communicator> comm;
};

StatusOr<Rank> make_rank(int rank, int world, Store& store, std::chrono::milliseconds timeout = 60s) {
  Rank r;
  r.device = create_cpu_device();
  ZDP_ASSIGN_OR_RETURN(r.stream, r.device->create_stream("comm"));
  CommOptions options;
  options.timeout = timeout;
  ZDP_ASSIGN_OR_RETURN(r.comm, create_gloo_communicator(store, rank, world, *r.device, options));
  return r;
}

void expect_all_ok(const std::vector<testing::RankResult>& results) {
  EXPECT_EQ(testing::describe_failures(results), "");
}

std::vector<ReduceOp> ops_for(DType dtype) {
  if (dtype == DType::kI64) return {ReduceOp::kSum, ReduceOp::kMax};
  return {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};
}

class GlooCollectives : public ::testing::TestWithParam<int> {};

TEST_P(GlooCollectives, AllReduce) {
  expect_all_ok(fork_ranks(GetParam(), [](int rank, int world, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Rank r, make_rank(rank, world, store));
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : ops_for(dtype)) {
        for (int64_t count : kCounts) {
          Bytes in = rank_input(dtype, rank, 0, count);
          Bytes out(in.size());
          ZDP_RETURN_IF_ERROR(r.comm->all_reduce(in.data(), out.data(), count, dtype, op, *r.stream, 5));
          ZDP_RETURN_IF_ERROR(r.stream->synchronize(120s));
          ZDP_RETURN_IF_ERROR(compare(label("all_reduce", dtype, op, count), dtype, out,
                                      expected_reduction(dtype, op, world, 0, count)));
        }
        // In place.
        Bytes buf = rank_input(dtype, rank, 0, 1000);
        ZDP_RETURN_IF_ERROR(r.comm->all_reduce(buf.data(), buf.data(), 1000, dtype, op, *r.stream));
        ZDP_RETURN_IF_ERROR(r.stream->synchronize(120s));
        ZDP_RETURN_IF_ERROR(compare(label("all_reduce", dtype, op, 1000, true), dtype, buf,
                                    expected_reduction(dtype, op, world, 0, 1000)));
      }
    }
    return Status::Ok();
  }));
}

TEST_P(GlooCollectives, ReduceScatter) {
  expect_all_ok(fork_ranks(GetParam(), [](int rank, int world, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Rank r, make_rank(rank, world, store));
    for (DType dtype : kAllDTypes) {
      const size_t es = dtype_size(dtype);
      for (ReduceOp op : ops_for(dtype)) {
        for (int64_t count : kCounts) {
          Bytes in = rank_input(dtype, rank, 0, count * world);
          Bytes out(static_cast<size_t>(count) * es);
          ZDP_RETURN_IF_ERROR(r.comm->reduce_scatter(in.data(), out.data(), count, dtype, op, *r.stream, 7));
          ZDP_RETURN_IF_ERROR(r.stream->synchronize(120s));
          ZDP_RETURN_IF_ERROR(compare(label("reduce_scatter", dtype, op, count), dtype, out,
                                      expected_reduction(dtype, op, world, rank * count, count)));
        }
        // In place: the output is this rank's own slice of the input.
        const int64_t count = 1000;
        Bytes buf = rank_input(dtype, rank, 0, count * world);
        char* slice = buf.data() + static_cast<size_t>(rank * count) * es;
        ZDP_RETURN_IF_ERROR(r.comm->reduce_scatter(buf.data(), slice, count, dtype, op, *r.stream));
        ZDP_RETURN_IF_ERROR(r.stream->synchronize(120s));
        ZDP_RETURN_IF_ERROR(compare(label("reduce_scatter", dtype, op, count, true), dtype,
                                    Bytes(slice, slice + count * es),
                                    expected_reduction(dtype, op, world, rank * count, count)));
      }
    }
    return Status::Ok();
  }));
}

TEST_P(GlooCollectives, AllGather) {
  expect_all_ok(fork_ranks(GetParam(), [](int rank, int world, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Rank r, make_rank(rank, world, store));
    for (DType dtype : kAllDTypes) {
      const size_t es = dtype_size(dtype);
      for (int64_t count : kCounts) {
        // Rank q contributes elements [q*count, (q+1)*count) of the sequence value(dtype, 0, .).
        Bytes in = rank_input(dtype, 0, rank * count, count);
        Bytes out(static_cast<size_t>(count * world) * es, 0);
        ZDP_RETURN_IF_ERROR(r.comm->all_gather(in.data(), out.data(), count, dtype, *r.stream, 3));
        ZDP_RETURN_IF_ERROR(r.stream->synchronize(120s));
        ZDP_RETURN_IF_ERROR(compare(label("all_gather", dtype, ReduceOp::kSum, count), dtype, out,
                                    rank_input(dtype, 0, 0, count * world)));
      }
      const int64_t count = 1000;
      Bytes buf(static_cast<size_t>(count * world) * es, 0);
      Bytes mine = rank_input(dtype, 0, rank * count, count);
      char* slice = buf.data() + static_cast<size_t>(rank * count) * es;
      std::memcpy(slice, mine.data(), mine.size());
      ZDP_RETURN_IF_ERROR(r.comm->all_gather(slice, buf.data(), count, dtype, *r.stream));
      ZDP_RETURN_IF_ERROR(r.stream->synchronize(120s));
      ZDP_RETURN_IF_ERROR(compare(label("all_gather", dtype, ReduceOp::kSum, count, true), dtype, buf,
                                  rank_input(dtype, 0, 0, count * world)));
    }
    return Status::Ok();
  }));
}

// Rank r's chunk q is the sequence at (r K + q) count; rank r receives chunk r of every rank.
TEST_P(GlooCollectives, AllToAll) {
  expect_all_ok(fork_ranks(GetParam(), [](int rank, int world, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Rank r, make_rank(rank, world, store));
    for (DType dtype : kAllDTypes) {
      for (int64_t count : kCounts) {
        Bytes in = rank_input(dtype, 0, rank * world * count, world * count);
        Bytes out(in.size(), 0);
        ZDP_RETURN_IF_ERROR(r.comm->all_to_all(in.data(), out.data(), count, dtype, *r.stream, 4));
        ZDP_RETURN_IF_ERROR(r.stream->synchronize(120s));
        Bytes want;
        for (int q = 0; q < world; ++q) {
          const Bytes chunk = rank_input(dtype, 0, (q * world + rank) * count, count);
          want.insert(want.end(), chunk.begin(), chunk.end());
        }
        ZDP_RETURN_IF_ERROR(compare(label("all_to_all", dtype, ReduceOp::kSum, count), dtype, out, want));
      }
    }
    // In place would overwrite chunks before they are sent: refused, naming the call.
    Bytes buf(64, 0);
    const Status s = r.comm->all_to_all(buf.data(), buf.data(), 1, DType::kF32, *r.stream);
    if (s.ok() || s.message().find("in place") == std::string::npos) {
      return Status(StatusCode::kInternal, "in-place all_to_all: " + s.to_string());
    }
    return Status::Ok();
  }));
}

TEST_P(GlooCollectives, BroadcastFromEveryRootAndBarrier) {
  expect_all_ok(fork_ranks(GetParam(), [](int rank, int world, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Rank r, make_rank(rank, world, store));
    for (DType dtype : kAllDTypes) {
      for (int root = 0; root < world; ++root) {
        for (int64_t count : kCounts) {
          Bytes buf = rank_input(dtype, rank, 0, count);
          ZDP_RETURN_IF_ERROR(r.comm->broadcast(buf.data(), count, dtype, root, *r.stream));
          ZDP_RETURN_IF_ERROR(r.stream->synchronize(120s));
          ZDP_RETURN_IF_ERROR(compare("broadcast from root " + std::to_string(root) + " " +
                                          label("", dtype, ReduceOp::kSum, count),
                                      dtype, buf, rank_input(dtype, root, 0, count)));
        }
      }
    }
    // Barrier: nobody passes before everyone has arrived (arrival counted in the store).
    for (int round = 0; round < 3; ++round) {
      ZDP_RETURN_IF_ERROR(store.add("arrived/" + std::to_string(round), 1).status());
      ZDP_RETURN_IF_ERROR(r.comm->barrier(*r.stream));
      ZDP_RETURN_IF_ERROR(r.stream->synchronize(60s));
      ZDP_ASSIGN_OR_RETURN(int64_t arrived, store.add("arrived/" + std::to_string(round), 0));
      if (arrived != world) {
        return Status(StatusCode::kInternal, "passed barrier " + std::to_string(round) + " with only " +
                                                 std::to_string(arrived) + " of " + std::to_string(world) +
                                                 " ranks arrived");
      }
    }
    return Status::Ok();
  }));
}

INSTANTIATE_TEST_SUITE_P(Worlds, GlooCollectives, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "K" + std::to_string(info.param); });

// ---- asynchrony ----------------------------------------------------------------

// Rank 0 enqueues two all-reduces and keeps computing while they are pending: rank 1
// joins only after rank 0 has finished computing, so the collectives cannot have
// completed synchronously inside the calls.
TEST(GlooAsync, TwoCollectivesInFlightWhileTheCallerComputes) {
  expect_all_ok(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Rank r, make_rank(rank, world, store));
    ZDP_ASSIGN_OR_RETURN(auto done, r.device->create_event());
    const int64_t n = 1 << 18;
    Bytes a = rank_input(DType::kF32, rank, 0, n), b = rank_input(DType::kF32, rank, 5, n);
    if (rank == 1) ZDP_RETURN_IF_ERROR(store.wait({"rank0_computed"}, 60s));
    ZDP_RETURN_IF_ERROR(r.comm->all_reduce(a.data(), a.data(), n, DType::kF32, ReduceOp::kSum, *r.stream, 1));
    ZDP_RETURN_IF_ERROR(r.comm->all_reduce(b.data(), b.data(), n, DType::kF32, ReduceOp::kSum, *r.stream, 2));
    ZDP_RETURN_IF_ERROR(r.stream->record(*done));
    if (rank == 0) {
      double acc = 0;  // the "compute" that overlaps the communication
      for (int i = 1; i <= 2'000'000; ++i) acc += 1.0 / i;
      if (done->ready()) return Status(StatusCode::kInternal, "collectives completed before the peer joined");
      if (!(acc > 14.0)) return Status(StatusCode::kInternal, "compute went wrong");
      ZDP_RETURN_IF_ERROR(store.set("rank0_computed", "1"));
    }
    ZDP_RETURN_IF_ERROR(done->wait(60s));
    ZDP_RETURN_IF_ERROR(compare("first", DType::kF32, a, expected_reduction(DType::kF32, ReduceOp::kSum, 2, 0, n)));
    return compare("second", DType::kF32, b, expected_reduction(DType::kF32, ReduceOp::kSum, 2, 5, n));
  }));
}

// ---- failures ------------------------------------------------------------------

Status expect_error(const Status& s, StatusCode code, const std::vector<std::string>& fragments) {
  if (s.code() != code) {
    return Status(StatusCode::kInternal, std::string("expected ") + to_string(code) + ", got " + s.to_string());
  }
  for (const std::string& f : fragments) {
    if (s.message().find(f) == std::string::npos) {
      return Status(StatusCode::kInternal, "error message lacks '" + f + "': " + s.message());
    }
  }
  return Status::Ok();
}

TEST(GlooFailure, KilledPeerFailsEverySurvivorWithinTheTimeout) {
  const auto results = fork_ranks(3, [](int rank, int world, Store& store) -> Status {
    const auto timeout = 20s;
    ZDP_ASSIGN_OR_RETURN(Rank r, make_rank(rank, world, store, timeout));
    Bytes warm = rank_input(DType::kF32, rank, 0, 64);
    ZDP_RETURN_IF_ERROR(r.comm->all_reduce(warm.data(), warm.data(), 64, DType::kF32, ReduceOp::kSum, *r.stream));
    ZDP_RETURN_IF_ERROR(r.stream->synchronize(30s));
    if (rank == 2) ::raise(SIGKILL);

    const int64_t n = 1 << 16;
    Bytes buf = rank_input(DType::kF32, rank, 0, n);
    const auto start = std::chrono::steady_clock::now();
    ZDP_RETURN_IF_ERROR(r.comm->all_reduce(buf.data(), buf.data(), n, DType::kF32, ReduceOp::kSum, *r.stream, 5));
    const Status s = r.stream->synchronize(60s);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    // Which connection broke first differs: to rank 2, or to the other survivor, which
    // closes its connections when it fails (the rank named, where Gloo's address is known:
    // gloo_peer_naming_test).
    ZDP_RETURN_IF_ERROR(expect_error(s, StatusCode::kPeerFailure,
                                     {"rank " + std::to_string(rank), "all_reduce #1", "tag 5", "256.0 KiB"}));
    if (elapsed >= timeout) return Status(StatusCode::kInternal, "the survivors noticed only at the timeout");
    // The communicator stays failed: the next collective is refused at once, naming the
    // cause whole, its code included (Communicator::issue refuses it before the backend).
    const Status later = r.comm->barrier(*r.stream);
    return expect_error(later, StatusCode::kAborted, {"barrier #2", "failed earlier: PeerFailure: ", "all_reduce #1"});
  });
  EXPECT_EQ(results[2].signal, SIGKILL);
  EXPECT_TRUE(results[0].ok()) << results[0].describe();
  EXPECT_TRUE(results[1].ok()) << results[1].describe();
}

TEST(GlooFailure, ACollectiveAPeerNeverJoinsTimesOutNamingIt) {
  expect_all_ok(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
    const auto timeout = 1500ms;
    ZDP_ASSIGN_OR_RETURN(Rank r, make_rank(rank, world, store, timeout));
    if (rank == 1) return store.wait({"rank0_done"}, 60s);  // alive, but never joins
    Bytes buf(4096);
    const auto start = std::chrono::steady_clock::now();
    ZDP_RETURN_IF_ERROR(r.comm->reduce_scatter(buf.data(), buf.data(), 512, DType::kF32, ReduceOp::kSum,
                                               *r.stream, 9));
    const Status s = r.stream->synchronize(60s);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    ZDP_RETURN_IF_ERROR(store.set("rank0_done", "1"));
    ZDP_RETURN_IF_ERROR(expect_error(s, StatusCode::kTimeout,
                                     {"rank 0", "reduce_scatter #0", "tag 9", "2.0 KiB per rank", "timed out"}));
    if (elapsed < timeout - 100ms || elapsed > timeout + 10s) {
      return Status(StatusCode::kInternal, "timed out after " +
                                               std::to_string(std::chrono::duration<double>(elapsed).count()) +
                                               " s, configured 1.5 s");
    }
    return Status::Ok();
  }));
}

// A collective already queued on another stream when the communicator fails is refused
// when its turn comes (the backend's run, not Communicator::issue), and the refusal names
// the first failure whole, its code included: the caller that waits on that stream first
// must still learn it was a timeout. The second stream's collective is held behind a host
// task until the first has failed, so the order is fixed, not raced.
TEST(GlooFailure, ACollectiveQueuedWhenTheCommunicatorFailsNamesTheFailure) {
  expect_all_ok(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Rank r, make_rank(rank, world, store, 1500ms));
    if (rank == 1) return store.wait({"rank0_done"}, 60s);  // alive, but never joins
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> other, r.device->create_stream("other"));
    std::atomic<bool> first_failed{false};
    ZDP_RETURN_IF_ERROR(other->enqueue_host("the gate", [&first_failed] {
      for (int i = 0; i < 6000 && !first_failed.load(); ++i) std::this_thread::sleep_for(10ms);
      return first_failed.load() ? Status::Ok() : Status(StatusCode::kInternal, "the first collective never failed");
    }));
    Bytes a(4096), b(4096);
    ZDP_RETURN_IF_ERROR(r.comm->reduce_scatter(a.data(), a.data(), 512, DType::kF32, ReduceOp::kSum, *r.stream, 9));
    ZDP_RETURN_IF_ERROR(r.comm->all_reduce(b.data(), b.data(), 1024, DType::kF32, ReduceOp::kSum, *other, 3));
    const Status first = r.stream->synchronize(60s);
    first_failed = true;
    const Status second = other->synchronize(60s);
    ZDP_RETURN_IF_ERROR(store.set("rank0_done", "1"));
    ZDP_RETURN_IF_ERROR(expect_error(first, StatusCode::kTimeout, {"reduce_scatter #0", "timed out"}));
    return expect_error(second, StatusCode::kAborted,
                        {"all_reduce #1", "not run, the communicator failed earlier: Timeout: ", "reduce_scatter #0"});
  }));
}

// The collective timeout (8 s) bounds how long the blocked host task lingers after the
// abort; the caller must be released long before it.
TEST(GlooFailure, AbortReleasesABlockedCollective) {
  expect_all_ok(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Rank r, make_rank(rank, world, store, 8s));
    if (rank == 1) return store.wait({"rank0_done"}, 60s);
    Bytes buf(1 << 20);
    const auto start = std::chrono::steady_clock::now();
    ZDP_RETURN_IF_ERROR(r.comm->all_reduce(buf.data(), buf.data(), 1 << 18, DType::kF32, ReduceOp::kSum,
                                           *r.stream, 4));
    std::thread aborter([&] {
      std::this_thread::sleep_for(300ms);
      r.comm->abort("the launcher reported rank 1 dead");
    });
    const Status s = r.stream->synchronize(60s);
    aborter.join();
    const auto elapsed = std::chrono::steady_clock::now() - start;
    ZDP_RETURN_IF_ERROR(store.set("rank0_done", "1"));
    ZDP_RETURN_IF_ERROR(expect_error(s, StatusCode::kAborted, {"rank 0", "launcher reported rank 1 dead"}));
    if (elapsed > 4s) return Status(StatusCode::kInternal, "abort did not release the collective before its timeout");
    return Status::Ok();
  }));
}

TEST(GlooArguments, InvalidCallsAreRefusedWithTheirReason) {
  auto dev = create_cpu_device();
  auto stream = std::move(*dev->create_stream("comm"));
  InMemoryStore store;
  auto comm = create_gloo_communicator(store, 0, 1, *dev, CommOptions{});
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  float x = 1;
  Status s = (*comm)->all_reduce(&x, &x, -1, DType::kF32, ReduceOp::kSum, *stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("negative count"), std::string::npos) << s.message();
  int64_t i = 1;
  s = (*comm)->all_reduce(&i, &i, 1, DType::kI64, ReduceOp::kAvg, *stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("int64"), std::string::npos) << s.message();
  s = (*comm)->broadcast(&x, 1, DType::kF32, 3, *stream);
  EXPECT_NE(s.message().find("root 3"), std::string::npos) << s.message();
  s = (*comm)->all_gather(nullptr, &x, 1, DType::kF32, *stream);
  EXPECT_NE(s.message().find("null buffer"), std::string::npos) << s.message();
  EXPECT_EQ(create_gloo_communicator(store, 2, 2, *dev, CommOptions{}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zdp
