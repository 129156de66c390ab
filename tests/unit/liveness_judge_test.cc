// The launcher's liveness judgement (launcher/liveness.h) on made-up heartbeats, and the
// heartbeat record's text form (runtime/internal/heartbeat.h): stalls by the launcher's
// clock, who waits for whom, desync at equal collective numbers and at step marks,
// stragglers reported once, blame, and malformed heartbeats refused.
#include "launcher/liveness.h"

#include <gtest/gtest.h>

#include <map>

#include "runtime/internal/heartbeat.h"
#include "zdp/store.h"

namespace zdp::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
const LivenessClock::time_point kT0 = LivenessClock::time_point() + std::chrono::hours(1);

RankBeat beat(int pid, int64_t step, uint64_t issued, LivenessClock::time_point changed) {
  RankBeat b;
  b.seen = true;
  b.changed = changed;
  b.record.beat = 7;
  b.record.pid = pid;
  b.record.host = "h";
  b.record.step = step;
  b.record.has_comm = true;
  b.record.comm.issued = issued;
  b.record.comm.completed = issued;
  return b;
}

// Rank `b` waits at collective #seq (described as `text`, with `signature`) for `s` seconds.
void waiting(RankBeat& b, uint64_t seq, uint64_t signature, const std::string& text, double s) {
  b.record.comm.in_flight = true;
  b.record.comm.current.seq = seq;
  b.record.comm.current_s = s;
  b.record.current = text;
  b.record.current_signature = signature;
  b.record.comm.issued = seq + 1;
  b.record.comm.completed = seq;
}

TEST(Liveness, AHeartbeatStillForTheTimeoutIsAStallNamingWhoWaits) {
  std::vector<RankBeat> beats = {beat(100, 41, 312, kT0), beat(101, 41, 313, kT0 + seconds(15))};
  waiting(beats[1], 312, 5, "reduce_scatter #312 (tag 3)", 14.0);
  std::map<int, uint64_t> slow;
  Finding f = judge(beats, {true, true}, kT0 + milliseconds(14999), seconds(15), slow);
  EXPECT_EQ(f.verdict, Verdict::kNone) << f.message;
  f = judge(beats, {true, true}, kT0 + seconds(15), seconds(15), slow);
  ASSERT_EQ(f.verdict, Verdict::kStalled);
  EXPECT_EQ(f.rank, 0);
  EXPECT_NE(f.message.find("rank 0 (pid 100, host h) stopped responding 15.0 s ago (its last heartbeat: in step 41, "
                           "between collectives (#311 finished"),
            std::string::npos)
      << f.message;
  EXPECT_NE(f.message.find("its peers wait for it: rank 1 in step 41, at reduce_scatter #312 (tag 3) for 14.0 s"),
            std::string::npos)
      << f.message;
  // A rank of another launcher is not this launcher's to stop.
  EXPECT_EQ(judge(beats, {false, true}, kT0 + seconds(20), seconds(15), slow).verdict, Verdict::kNone);
}

TEST(Liveness, DifferentCollectivesAtOneNumberAreADesyncNamingBoth) {
  std::vector<RankBeat> beats = {beat(1, 3, 0, kT0), beat(2, 3, 0, kT0)};
  waiting(beats[0], 40, 111, "all_reduce #40 (sum, 6 x fp32)", 1);
  waiting(beats[1], 40, 222, "barrier #40 (world 2)", 1);
  std::map<int, uint64_t> slow;
  const Finding f = judge(beats, {true, true}, kT0, seconds(15), slow);
  ASSERT_EQ(f.verdict, Verdict::kDesync);
  EXPECT_NE(f.message.find("at #40: rank 0 (pid 1, host h) issued all_reduce #40 (sum, 6 x fp32), but rank 1 "
                           "(pid 2, host h) issued barrier #40 (world 2)"),
            std::string::npos)
      << f.message;
}

TEST(Liveness, RecentCollectivesAndStepMarksCatchADesyncThatDidNotHang) {
  std::vector<RankBeat> beats = {beat(1, 5, 60, kT0), beat(2, 5, 61, kT0)};
  beats[0].record.recent = {{38, 1, "all_reduce #38 (1 x fp32)"}, {39, 9, "a #39"}};
  beats[1].record.recent = {{39, 9, "a #39"}, {40, 4, "b #40"}};
  std::map<int, uint64_t> slow;
  EXPECT_EQ(judge(beats, {true, true}, kT0, seconds(15), slow).verdict, Verdict::kNone);  // #39 agrees
  beats[1].record.recent.push_back({38, 2, "all_reduce #38 (0 x fp32)"});
  Finding f = judge(beats, {true, true}, kT0, seconds(15), slow);
  ASSERT_EQ(f.verdict, Verdict::kDesync);
  EXPECT_NE(f.message.find("(1 x fp32), but rank 1"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("(0 x fp32)"), std::string::npos) << f.message;

  beats[1].record.recent.pop_back();
  beats[0].record.marks = {{4, 42, 77}, {5, 56, 88}};
  beats[1].record.marks = {{5, 56, 89}, {6, 70, 90}};
  f = judge(beats, {true, true}, kT0, seconds(15), slow);
  ASSERT_EQ(f.verdict, Verdict::kDesync);
  EXPECT_NE(f.message.find("before step 5"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("56 collectives each, but not the same ones"), std::string::npos) << f.message;
}

TEST(Liveness, ARankThatHasNotIssuedWhatOthersWaitForIsSlowReportedOnce) {
  std::vector<RankBeat> beats = {beat(1, 8, 100, kT0), beat(2, 8, 101, kT0)};
  waiting(beats[1], 100, 3, "all_reduce #100", 7.6);  // rank 0 has issued #0..#99 only
  std::map<int, uint64_t> slow;
  Finding f = judge(beats, {true, true}, kT0 + seconds(1), seconds(15), slow);
  ASSERT_EQ(f.verdict, Verdict::kStraggler);
  EXPECT_EQ(f.rank, 0);
  EXPECT_NE(f.message.find("rank 0 (pid 1, host h) is slow: rank(s) 1 have waited up to 7.6 s for it at collective "
                           "#100; it is alive"),
            std::string::npos)
      << f.message;
  EXPECT_EQ(judge(beats, {true, true}, kT0 + seconds(2), seconds(15), slow).verdict, Verdict::kNone) << "reported twice";
  beats[1].record.comm.current_s = 7.4;  // under half the timeout: not yet
  std::map<int, uint64_t> fresh;
  EXPECT_EQ(judge(beats, {true, true}, kT0 + seconds(1), seconds(15), fresh).verdict, Verdict::kNone);
}

// Node 0's launcher reports a slow rank on any node (the others read only their own ranks'
// heartbeats); another node's launcher only its own.
TEST(Liveness, NodeZeroReportsASlowRankOfAnotherNode) {
  std::vector<RankBeat> beats = {beat(1, 8, 100, kT0), beat(2, 8, 101, kT0)};
  waiting(beats[1], 100, 3, "all_reduce #100", 7.6);
  std::map<int, uint64_t> slow, elsewhere;
  EXPECT_EQ(judge(beats, {false, true}, kT0 + seconds(1), seconds(15), elsewhere).verdict, Verdict::kNone);
  const Finding f = judge(beats, {false, true}, kT0 + seconds(1), seconds(15), slow, /*stragglers_anywhere=*/true);
  ASSERT_EQ(f.verdict, Verdict::kStraggler);
  EXPECT_EQ(f.rank, 0);
}

TEST(Liveness, CulpritIsTheRankWhoseHeartbeatStoppedNotTheOneThatFailed) {
  std::vector<RankBeat> beats = {beat(1, 2, 20, kT0), beat(2, 2, 21, kT0 + seconds(5))};
  EXPECT_EQ(culprit(beats, 1, kT0 + milliseconds(2500)), "") << "still for less than 3 beats";
  const std::string c = culprit(beats, 1, kT0 + seconds(5));
  EXPECT_NE(c.find("rank 0 (pid 1, host h) stopped responding 5.0 s ago"), std::string::npos) << c;
  EXPECT_EQ(culprit(beats, 0, kT0 + seconds(5)), "") << "the failed rank itself is never its own culprit";
  // A rank that exited 0 stopped beating by finishing: it was named as the cause of a
  // later failure of rank 1 (rank 0's end-of-run work, say).
  EXPECT_EQ(culprit(beats, 1, kT0 + seconds(5), {true, false}), "") << "a rank that exited 0 is no culprit";
}

// Every heartbeat fresh, rank 1 timed out in all_reduce #30 while rank 0, alive, had not
// issued it (slower than the collective timeout: a checkpoint commit on a slow file
// system). Rank 0 is named, not left out because its heartbeat was fresh.
TEST(Liveness, ALivingRankBehindTheCollectiveItsPeerTimedOutInIsNamed) {
  std::vector<RankBeat> beats = {beat(1, 3, 28, kT0 + seconds(9)), beat(2, 3, 31, kT0 + seconds(9)),
                                 beat(3, 3, 31, kT0 + seconds(9))};
  waiting(beats[1], 30, 9, "all_reduce #30 (sum, 4 x int64)", 5.0);
  const std::string c = culprit(beats, 1, kT0 + seconds(10));
  EXPECT_NE(c.find("rank 0 (pid 1, host h) was alive but had not reached collective #30 (all_reduce #30 (sum, 4 x "
                   "int64)) that rank 1 waited for"),
            std::string::npos)
      << c;
  beats[0].record.comm.issued = 31;  // it had issued #30 too: nobody behind
  EXPECT_EQ(culprit(beats, 1, kT0 + seconds(10)), "");
}

// A program that releases its Context (and goes on: post-processing) stops beating on
// purpose; the rank marks that, and the launcher no longer reads the silence as a stall.
TEST(Liveness, ARankThatReleasedItsContextIsNotAStall) {
  for (const bool released : {false, true}) {
    SCOPED_TRACE(released);
    InMemoryStore store;
    HeartbeatRecord r;
    r.beat = 1;
    r.pid = 10;
    r.host = "h";
    for (int rank : {0, 1}) {
      ASSERT_TRUE(store.set(heartbeat_keys::beat(rank), encode_heartbeat(r)).ok());
    }
    LivenessWatch watch(store, 2, {0, 1}, milliseconds(1000));
    EXPECT_EQ(watch.poll(kT0).verdict, Verdict::kNone);
    if (released) {
      ASSERT_TRUE(store.set(heartbeat_keys::exited(1), "released").ok());
    }
    r.beat = 2;  // rank 0 beats on; rank 1 is silent
    ASSERT_TRUE(store.set(heartbeat_keys::beat(0), encode_heartbeat(r)).ok());
    const Finding f = watch.poll(kT0 + seconds(2));
    EXPECT_EQ(f.verdict, released ? Verdict::kNone : Verdict::kStalled) << f.message;
  }
}

// A rank whose process exited 0 without releasing its Context (ended_mid_job) is marked
// "mid-job: ..." and named by any node's culprit_of, but only for a failure that said it
// was another rank's fault (exit 3 or 4): a rank that failed on its own (exit 1) is not
// blamed on it. A rank that released its Context is no such rank.
TEST(Liveness, ARankThatEndedMidJobIsNamedOnlyForItsPeersFailures) {
  InMemoryStore store;
  HeartbeatRecord r;
  r.beat = 1, r.pid = 10, r.host = "h";
  for (int rank : {0, 1}) ASSERT_TRUE(store.set(heartbeat_keys::beat(rank), encode_heartbeat(r)).ok());
  LivenessWatch node1(store, 2, {1}, milliseconds(1000), /*node_zero=*/false);
  LivenessWatch node0(store, 2, {0}, milliseconds(1000), /*node_zero=*/true);
  (void)node0.poll(kT0);
  const std::string mid = node1.ended_mid_job(1);
  EXPECT_NE(mid.find("rank 1 (pid 10, host h) exited 0 in the middle of the job"), std::string::npos) << mid;
  node1.exited(1, mid);
  EXPECT_EQ(node0.culprit_of(0, kT0, /*stale_only=*/true, /*peer_caused=*/true), mid);
  EXPECT_EQ(node0.culprit_of(0, kT0, /*stale_only=*/true, /*peer_caused=*/false), "");
  ASSERT_TRUE(store.set(heartbeat_keys::exited(1), "released").ok());
  EXPECT_EQ(node1.ended_mid_job(1), "");
}

TEST(Heartbeat, RoundTripsAndRefusesMalformedText) {
  HeartbeatRecord r;
  r.beat = 12;
  r.pid = 4242;
  r.host = "node-1";
  r.interval_s = 0.2;
  r.step = 41;
  r.has_comm = true;
  r.comm.issued = 313;
  r.comm.completed = 312;
  r.comm.idle_s = 0.5;
  r.comm.fingerprint = 18446744073709551615ull;
  r.comm.in_flight = true;
  r.comm.current.seq = 312;
  r.comm.current_s = 12.5;
  r.current = "reduce_scatter #312 (tag 3, sum, 8 x fp32 = 32 B per rank, world 2)";
  r.current_signature = 99;
  r.marks = {{40, 300, 7}, {41, 310, 8}};
  r.recent = {{311, 5, "all_reduce #311 (sum, 1 x fp32 = 4 B, world 2)"}};
  StatusOr<HeartbeatRecord> back = decode_heartbeat(encode_heartbeat(r));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->beat, 12u);
  EXPECT_EQ(back->host, "node-1");
  EXPECT_EQ(back->step, 41);
  EXPECT_EQ(back->comm.fingerprint, r.comm.fingerprint);
  EXPECT_EQ(back->comm.current.seq, 312u);
  EXPECT_EQ(back->current, r.current);
  ASSERT_EQ(back->marks.size(), 2u);
  EXPECT_EQ(back->marks[1].issued, 310u);
  ASSERT_EQ(back->recent.size(), 1u);
  EXPECT_EQ(back->recent[0].text, r.recent[0].text);
  for (const char* bad : {"", "beat=x\npid=1\ninterval_s=1\nstep=0\n", "beat=1\npid=1\ninterval_s=1\nstep=0\nmarks=1:2\n",
                          "garbage", "beat=1\npid=1\ninterval_s=-1\nstep=0\n",
                          // 2^64 and more: strtoull saturated these to 2^64 - 1 and took them
                          "beat=18446744073709551616\npid=1\ninterval_s=1\nstep=0\n",
                          "beat=99999999999999999999\npid=1\ninterval_s=1\nstep=0\n"}) {
    EXPECT_FALSE(decode_heartbeat(bad).ok()) << bad;
  }
  EXPECT_FALSE(decode_heartbeat(std::string(20000, 'x')).ok());
  EXPECT_EQ(heartbeat_interval(seconds(15)), seconds(1));
  EXPECT_EQ(heartbeat_interval(seconds(2)), milliseconds(200));
  EXPECT_EQ(heartbeat_interval(milliseconds(100)), milliseconds(50));
}

}  // namespace
}  // namespace zdp::launcher
