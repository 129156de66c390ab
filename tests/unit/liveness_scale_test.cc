// The launcher's desync checks (launcher/liveness.cc) by key instead of by every pair of
// ranks: the same pair blamed as the pairwise scan on random snapshots, and a job of 16k
// ranks judged in bounded time (the pairwise scan took 0.96 s at 4096 ranks, on every
// node's launcher every second: about 16 s at 16k, holding up signals and output); and
// which heartbeats each launcher reads (node 0 all at each poll, the others their own).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "launcher/liveness.h"
#include "runtime/internal/heartbeat.h"
#include "zdp/store.h"

namespace zdp::launcher {
namespace {

const LivenessClock::time_point kNow = LivenessClock::time_point() + std::chrono::hours(1);

RankBeat rank_beat(int r) {
  RankBeat b;
  b.seen = true;
  b.changed = kNow;
  b.record.beat = 1;
  b.record.pid = 1000 + r;
  b.record.host = "h";
  b.record.has_comm = true;
  return b;
}

// The pairwise scan the launcher did before (every pair a < b, then their windows): the
// pair it reported for the recent collectives, else for the step marks.
std::optional<std::pair<int, int>> pairwise(const std::vector<RankBeat>& beats) {
  for (size_t a = 0; a < beats.size(); ++a) {
    for (size_t b = a + 1; b < beats.size(); ++b) {
      if (!beats[a].seen || !beats[b].seen) continue;
      for (const RecentCollective& ca : beats[a].record.recent) {
        for (const RecentCollective& cb : beats[b].record.recent) {
          if (ca.seq == cb.seq && ca.signature != cb.signature) return std::pair<int, int>(a, b);
        }
      }
    }
  }
  for (size_t a = 0; a < beats.size(); ++a) {
    for (size_t b = a + 1; b < beats.size(); ++b) {
      if (!beats[a].seen || !beats[b].seen) continue;
      for (const StepMark& ma : beats[a].record.marks) {
        for (const StepMark& mb : beats[b].record.marks) {
          if (ma.step == mb.step && (ma.issued != mb.issued || ma.fingerprint != mb.fingerprint)) {
            return std::pair<int, int>(a, b);
          }
        }
      }
    }
  }
  return std::nullopt;
}

std::string named(int r) { return "rank " + std::to_string(r) + " (pid " + std::to_string(1000 + r); }

TEST(LivenessScale, BlamesThePairThePairwiseScanBlamed) {
  std::mt19937 rng(20261207);
  int desyncs = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int world = 2 + static_cast<int>(rng() % 6);
    std::vector<RankBeat> beats;
    for (int r = 0; r < world; ++r) {
      RankBeat b = rank_beat(r);
      b.seen = rng() % 8 != 0;
      const uint64_t first = rng() % 6;
      for (uint64_t seq = first; seq < first + 1 + rng() % 4; ++seq) {
        b.record.recent.push_back({seq, rng() % 9 == 0 ? 2u : 1u, "all_reduce #" + std::to_string(seq)});
      }
      const int64_t step = static_cast<int64_t>(rng() % 4);
      for (int64_t s = step; s < step + 2; ++s) b.record.marks.push_back({s, 10u * static_cast<uint64_t>(s), rng() % 12 == 0 ? 7u : 3u});
      beats.push_back(std::move(b));
    }
    std::map<int, uint64_t> slow;
    const Finding f = judge(beats, std::vector<bool>(static_cast<size_t>(world), true), kNow, std::chrono::seconds(60), slow);
    const std::optional<std::pair<int, int>> want = pairwise(beats);
    if (!want) {
      EXPECT_NE(f.verdict, Verdict::kDesync) << "trial " << trial << ": " << f.message;
      continue;
    }
    ++desyncs;
    ASSERT_EQ(f.verdict, Verdict::kDesync) << "trial " << trial;
    EXPECT_EQ(f.rank, want->first) << "trial " << trial << ": " << f.message;
    const size_t a = f.message.find(named(want->first)), b = f.message.find(named(want->second));
    EXPECT_TRUE(a != std::string::npos && b != std::string::npos && a < b) << "trial " << trial << ": " << f.message;
  }
  EXPECT_GT(desyncs, 200);  // the snapshots hold enough of them to compare
}

TEST(LivenessScale, SixteenThousandRanksAreJudgedInBoundedTime) {
  constexpr int kWorld = 16384;
  std::vector<RankBeat> beats;
  beats.reserve(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    RankBeat b = rank_beat(r);
    for (uint64_t seq = 100; seq < 108; ++seq) b.record.recent.push_back({seq, seq * 31, "all_reduce"});
    for (int64_t s = 10; s < 18; ++s) b.record.marks.push_back({s, static_cast<uint64_t>(s) * 8, 5});
    beats.push_back(std::move(b));
  }
  // A healthy job, the judgement every launcher makes every second: no pair differs, so
  // the pairwise scan compared all of them.
  std::map<int, uint64_t> slow;
  const auto start = std::chrono::steady_clock::now();
  const Finding healthy = judge(beats, std::vector<bool>(kWorld, true), kNow, std::chrono::seconds(60), slow);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(healthy.verdict, Verdict::kNone) << healthy.message;
  EXPECT_LT(seconds, 2.0) << "the pairwise scan takes about 16 s here";
  beats.back().record.recent.back().signature = 1;  // the last rank issued another #107
  const Finding f = judge(beats, std::vector<bool>(kWorld, true), kNow, std::chrono::seconds(60), slow);
  ASSERT_EQ(f.verdict, Verdict::kDesync);
  EXPECT_EQ(f.rank, 0);
  EXPECT_NE(f.message.find(named(kWorld - 1)), std::string::npos) << f.message;
}

// A Store that counts its reads (the heartbeats are read one key at a time).
class CountingStore final : public Store {
 public:
  Status set(const std::string& k, const std::string& v) override { return inner.set(k, v); }
  StatusOr<std::string> get(const std::string& k, std::chrono::milliseconds t) override {
    ++gets;
    return inner.get(k, t);
  }
  StatusOr<int64_t> add(const std::string& k, int64_t d) override { return inner.add(k, d); }
  Status wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override { return inner.wait(k, t); }
  StatusOr<bool> check(const std::vector<std::string>& k) override { return inner.check(k); }
  InMemoryStore inner;
  int64_t gets = 0;
};

// Each node's launcher read every rank's heartbeat every second: N x W reads a second at
// node 0's store. Now node 0 reads all W at each poll, another node its own ranks only
// (and all to name a culprit). 64 ranks on 16 nodes of 4, polled each second for 8 s:
// node 0 reads 8 x 64, node 1 8 x 4 (it was 512).
TEST(LivenessScale, OtherNodesReadTheWholeJobLessOftenThanNodeZero) {
  CountingStore store;
  HeartbeatRecord r;
  r.beat = 1;
  r.pid = 10;
  r.host = "h";
  for (int rank = 0; rank < 64; ++rank) ASSERT_TRUE(store.inner.set(heartbeat_keys::beat(rank), encode_heartbeat(r)).ok());
  const std::chrono::milliseconds timeout(4000);  // polls every second
  LivenessWatch node0(store, 64, {0, 1, 2, 3}, timeout, /*node_zero=*/true);
  for (int t = 0; t < 8; ++t) (void)node0.poll(kNow + std::chrono::seconds(t));
  EXPECT_EQ(store.gets, 8 * 64);
  store.gets = 0;
  LivenessWatch node1(store, 64, {4, 5, 6, 7}, timeout, /*node_zero=*/false);
  for (int t = 0; t < 8; ++t) (void)node1.poll(kNow + std::chrono::seconds(t));
  EXPECT_EQ(store.gets, 8 * 4);
  // culprit_of reads everything at once.
  store.gets = 0;
  (void)node1.culprit_of(5, kNow + std::chrono::seconds(9));
  EXPECT_EQ(store.gets, 64);
}

}  // namespace
}  // namespace zdp::launcher
