// The communicator's flight recorder and progress (zdp/comm.h, runtime/src/comm/
// flight_recorder.h), the signature and wire tag that keep disagreeing ranks apart, and
// the $ZDP_TEST_COMM hook's syntax and desyncs, on a Gloo communicator of one rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "runtime/src/comm/comm_test_hook.h"
#include "runtime/src/comm/flight_recorder.h"
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

}  // namespace
}  // namespace zdp
