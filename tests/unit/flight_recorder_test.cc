// The communicator's flight recorder and progress (zdp/comm.h, runtime/src/comm/
// flight_recorder.h), the signature and wire tag that keep disagreeing ranks apart, and
// the $ZDP_TEST_COMM hook's syntax and desyncs, on a Gloo communicator of one rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "runtime/src/comm/comm_test_hook.h"
#include "runtime/src/comm/flight_recorder.h"
#include "testing/fork_ranks.h"
#include "zdp/comm.h"
#include "zdp/device.h"

namespace zdp {
namespace {

CollectiveDesc desc(CollectiveOp op, int64_t count, int64_t tag = -1) {
  CollectiveDesc d;
  d.op = op;
  d.count = count;
  d.tag = tag;
  d.world_size = 2;
  return d;
}

TEST(FlightRecorder, KeepsTheLastCollectivesAndTheOldestUnfinished) {
  detail::FlightRecorder rec(4);
  for (int i = 0; i < 6; ++i) {
    CollectiveDesc d = desc(CollectiveOp::kAllReduce, i + 1);
    EXPECT_EQ(rec.enqueue(d), static_cast<uint64_t>(i));
    if (i != 4) rec.finished(d.seq, true);
  }
  const auto records = rec.records();
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records.front().desc.seq, 2u);
  EXPECT_EQ(records.back().desc.seq, 5u);
  const CommProgress p = rec.progress();
  EXPECT_EQ(p.issued, 6u);
  EXPECT_EQ(p.completed, 5u);
  ASSERT_TRUE(p.in_flight);
  EXPECT_EQ(p.current.seq, 4u);
  EXPECT_EQ(p.current.count, 5);
}

// A stuck collective stays the current one however many later ones the ring holds (its
// slot was overwritten after `capacity` more, and the heartbeat said "between collectives").
TEST(FlightRecorder, AStuckCollectiveStaysCurrentPastTheRing) {
  detail::FlightRecorder rec(4);
  CollectiveDesc stuck = desc(CollectiveOp::kReduceScatter, 7);
  rec.enqueue(stuck);
  for (int i = 0; i < 70; ++i) {
    CollectiveDesc d = desc(CollectiveOp::kAllGather, 3);
    rec.finished(rec.enqueue(d), true);
  }
  const CommProgress p = rec.progress();
  EXPECT_EQ(p.issued, 71u);
  EXPECT_EQ(p.completed, 70u);
  ASSERT_TRUE(p.in_flight);
  EXPECT_EQ(p.current.seq, 0u);
  EXPECT_EQ(p.current.op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(p.current.count, 7);
}

// A collective that ran and failed stays current: the end its stream's task reports later
// (finished(seq, false)) and the collectives dropped behind it do not clear it, so the
// heartbeats until the rank exits still name the collective it waited in.
TEST(FlightRecorder, ACollectiveThatFailedStaysCurrent) {
  detail::FlightRecorder rec(8);
  CollectiveDesc first = desc(CollectiveOp::kAllReduce, 5), second = desc(CollectiveOp::kAllReduce, 6);
  rec.enqueue(first);
  rec.enqueue(second);
  rec.failed(first.seq);
  rec.finished(first.seq, false);
  rec.finished(second.seq, false);
  const CommProgress p = rec.progress();
  EXPECT_EQ(p.completed, 1u);
  ASSERT_TRUE(p.in_flight);
  EXPECT_EQ(p.current.seq, 0u);
  EXPECT_TRUE(rec.records().front().failed);
  EXPECT_NE(rec.records().front().ended, detail::FlightRecorder::Clock::time_point());
}

TEST(FlightRecorder, TheFingerprintDependsOnEveryCollectiveAndItsNumber) {
  auto fingerprint = [](std::vector<CollectiveDesc> calls) {
    detail::FlightRecorder rec(8);
    for (CollectiveDesc& d : calls) rec.enqueue(d);
    return rec.progress().fingerprint;
  };
  const CollectiveDesc a = desc(CollectiveOp::kReduceScatter, 544, 1), b = desc(CollectiveOp::kReduceScatter, 544, 0);
  EXPECT_EQ(fingerprint({a, b}), fingerprint({a, b}));
  EXPECT_NE(fingerprint({a, b}), fingerprint({b, a})) << "the order matters";
  CollectiveDesc c = b;
  c.dtype = DType::kBF16;
  EXPECT_NE(fingerprint({a, b}), fingerprint({a, c}));
}

TEST(CollectiveDesc, SignatureCoversEveryAgreedFieldButNotTheNumber) {
  const CollectiveDesc base = desc(CollectiveOp::kAllReduce, 8, 3);
  CollectiveDesc numbered = base;
  numbered.seq = 99;
  EXPECT_EQ(base.signature(), numbered.signature());
  std::vector<CollectiveDesc> others(6, base);
  others[0].op = CollectiveOp::kAllGather;
  others[1].count = 9;
  others[2].dtype = DType::kBF16;
  others[3].reduce = ReduceOp::kMax;
  others[4].tag = 4;
  others[5].root = 1;
  for (const CollectiveDesc& o : others) EXPECT_NE(o.signature(), base.signature()) << o.describe();
}

TEST(TestHook, SyntaxErrorsNameTheVariable) {
  EXPECT_TRUE(detail::parse_test_hook("rank=1,seq=40,desync=count").ok());
  EXPECT_TRUE(detail::parse_test_hook("rank=0,seq=3,action=slow,ms=10").ok());
  for (const char* bad : {"rank=1", "rank=1,seq=2", "rank=1,seq=2,desync=size", "rank=1,seq=2,action=stop,desync=op",
                          "rank=1,seq=x,action=kill", "rank=1,rank=1,seq=2,action=kill",
                          // past int (the cast wrapped it to rank 0), past int64, a pause past a day
                          "rank=4294967296,seq=2,action=kill", "rank=1,seq=99999999999999999999,action=kill",
                          "rank=1,seq=2,action=slow,ms=86400001", "rank=1,seq=+2,action=kill", "=1,rank=1,seq=2"}) {
    StatusOr<detail::TestHook> h = detail::parse_test_hook(bad);
    ASSERT_FALSE(h.ok()) << bad;
    EXPECT_NE(h.status().message().find(std::string("ZDP_TEST_COMM=\"") + bad), std::string::npos);
  }
}

TEST(TestHook, DesyncsChangeOnlyTheirRanksCollectiveAndNeverGrowItsBuffers) {
  for (const char* kind : {"op", "reduce", "count", "dtype", "tag"}) {
    detail::TestHook hook = *detail::parse_test_hook(std::string("rank=1,seq=7,desync=") + kind);
    CollectiveDesc d = desc(CollectiveOp::kAllReduce, 6, 2);
    d.seq = 7;
    CollectiveDesc other_rank = d, other_seq = d;
    other_seq.seq = 8;
    EXPECT_FALSE(detail::apply_desync(hook, 0, other_rank));
    EXPECT_FALSE(detail::apply_desync(hook, 1, other_seq));
    const int64_t bytes = d.bytes();
    EXPECT_TRUE(detail::apply_desync(hook, 1, d)) << kind;
    EXPECT_NE(d.signature(), other_rank.signature()) << kind;
    EXPECT_LE(d.bytes(), bytes) << kind;
  }
}

TEST(TestHook, OrderSwapsTwoCallsOnTheWire) {
  ::setenv("ZDP_TEST_COMM", "rank=0,seq=1,desync=order", 1);
  InMemoryStore store;
  auto device = create_cpu_device();
  auto comm = create_gloo_communicator(store, 0, 1, *device, CommOptions{});
  ::unsetenv("ZDP_TEST_COMM");
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  auto stream = device->create_stream("comm");
  ASSERT_TRUE(stream.ok());
  float x[4] = {1, 2, 3, 4};
  for (int64_t n : {1, 2, 3, 4}) ASSERT_TRUE((*comm)->all_reduce(x, x, n, DType::kF32, ReduceOp::kSum, **stream).ok());
  ASSERT_TRUE((*stream)->synchronize(std::chrono::seconds(10)).ok());
  const auto records = (*comm)->flight_record();
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].desc.count, 1);
  EXPECT_EQ(records[1].desc.count, 3) << "the third call went out as #1";
  EXPECT_EQ(records[2].desc.count, 2) << "and the second as #2";
  EXPECT_EQ(records[3].desc.count, 4);
  EXPECT_NE((*comm)->flight_record_text().find("all_reduce #1 (sum, 3 x fp32"), std::string::npos);
}

TEST(TestHook, AMalformedVariableFailsEveryCollective) {
  ::setenv("ZDP_TEST_COMM", "rank=0,desync=op", 1);
  InMemoryStore store;
  auto device = create_cpu_device();
  auto comm = create_gloo_communicator(store, 0, 1, *device, CommOptions{});
  ::unsetenv("ZDP_TEST_COMM");
  ASSERT_TRUE(comm.ok());
  auto stream = device->create_stream("comm");
  float x = 1;
  const Status s = (*comm)->all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, **stream);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ZDP_TEST_COMM"), std::string::npos) << s.message();
}

// A collective queued behind a failure of its stream is never run (the stream drops it):
// the recorder ends it too. It stayed "in flight" for ever, and the heartbeats named it.
TEST(FlightRecorder, ACollectiveItsStreamDroppedIsNotInFlight) {
  InMemoryStore store;
  auto device = create_cpu_device();
  auto comm = create_gloo_communicator(store, 0, 1, *device, CommOptions{});
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  auto stream = device->create_stream("comm");
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*stream)->enqueue_host("failing work", [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return Status(StatusCode::kInternal, "failing work failed");
  }).ok());
  float x = 1;
  (void)(*comm)->all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, **stream);
  EXPECT_FALSE((*stream)->synchronize(std::chrono::seconds(10)).ok());
  const CommProgress p = (*comm)->progress();
  EXPECT_EQ(p.issued, 1u);
  EXPECT_FALSE(p.in_flight) << "all_reduce #" << p.current.seq << " still in flight";
  EXPECT_EQ(p.completed, 1u);
}

// Two Gloo ranks (processes), one of which never calls: the other's all_reduce times out, and its
// progress still names that all_reduce afterwards (Gloo's run() ended it as finished, and
// the launcher, reading "between collectives", could not name the rank behind).
TEST(FlightRecorder, AGlooCollectiveThatTimedOutIsStillTheCurrentOne) {
  EXPECT_EQ(testing::describe_failures(testing::fork_ranks(2, [](int rank, int world, Store& store) -> Status {
              CommOptions options;
              options.timeout = std::chrono::milliseconds(500);
              auto device = create_cpu_device();
              ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                                   create_gloo_communicator(store, rank, world, *device, options));
              if (rank == 1) return store.wait({"checked"}, std::chrono::seconds(30));  // never calls
              ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->create_stream("comm"));
              float x = 1;
              (void)comm->all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, *stream);
              const bool timed_out = !stream->synchronize(std::chrono::seconds(30)).ok();
              const CommProgress p = comm->progress();
              ZDP_RETURN_IF_ERROR(store.set("checked", "1"));
              if (!timed_out) return Status(StatusCode::kInternal, "the all_reduce did not fail");
              if (!p.in_flight || p.current.seq != 0 || p.current.op != CollectiveOp::kAllReduce || p.completed != 0) {
                return Status(StatusCode::kInternal, "the timed-out all_reduce is no longer named: in_flight " +
                                                         std::to_string(p.in_flight) + ", completed " +
                                                         std::to_string(p.completed));
              }
              return Status::Ok();
            })),
            "");
}

}  // namespace
}  // namespace zdp
