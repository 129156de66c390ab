// dp-launch's view of the job's progress (launcher/progress_watch.h), on a clock the test
// moves: the status line's bar and fields, an ETA that counts down between records, a
// straggler named slow, a rank that stops reporting named silent; and the records read
// back from a store.
#include "launcher/progress_watch.h"

#include <gtest/gtest.h>

namespace zdp::launcher {
namespace {

using namespace std::chrono_literals;
using Clock = ProgressWatch::Clock;

TEST(ProgressWatch, StatusLineShowsTheBarStepsLossRateAndEta) {
  ProgressWatch w(2);
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(w.status_line(t0), "");  // nothing before rank 0's first record
  w.on_job({100, 400, 2.3456, 12345, 10, 90, "train"}, t0);
  EXPECT_EQ(w.status_line(t0), "[######..................] 100/400  25% | ETA 1m30s | loss 2.3456 | 12.3k tok/s");
  // Between records the ETA counts down on the launcher's clock; a repeated record does
  // not restart it.
  w.on_job({100, 400, 2.3456, 12345, 10, 90, "train"}, t0 + 20s);
  EXPECT_NE(w.status_line(t0 + 20s).find("ETA 1m10s"), std::string::npos);
  EXPECT_NE(w.status_line(t0 + 200s).find("ETA 0s"), std::string::npos);
  w.on_job({400, 400, 1.5, 12345, 40, 0, "done"}, t0 + 30s);
  EXPECT_NE(w.status_line(t0 + 30s).find("[########################] 400/400 100% | ETA 0s"), std::string::npos);
  EXPECT_NE(w.status_line(t0 + 30s).find("finishing"), std::string::npos);
}

TEST(ProgressWatch, AStragglerIsSlowAndASilentRankIsNamed) {
  ProgressWatch w(3);
  const Clock::time_point t0 = Clock::now();
  w.on_job({10, 100, 2.0, 1000, 5, 50, "train"}, t0);
  // One slow record is a hiccup; kSlowRecords in a row make a straggler.
  for (int s = 8; s <= 10; ++s) {
    for (int r = 0; r < 3; ++r) w.on_rank(r, {s, r == 2 ? 0.090 : 0.020, "train"}, t0);
    if (s < 10) {
      EXPECT_TRUE(w.problems(t0).empty()) << "after " << s - 7 << " slow record(s)";
    }
  }
  std::vector<ProgressWatch::Problem> p = w.problems(t0);
  ASSERT_EQ(p.size(), 1u);
  {  // sub-millisecond steps: 1.0 ms against 0.5 ms is jitter, not a straggler
    ProgressWatch fast(2);
    for (int s = 1; s <= 6; ++s) {
      fast.on_rank(0, {s, 0.0010, "train"}, t0);
      fast.on_rank(1, {s, 0.0005, "train"}, t0);
    }
    EXPECT_TRUE(fast.problems(t0).empty()) << fast.problems(t0)[0].text;
  }
  EXPECT_EQ(p[0].rank, 2);
  EXPECT_EQ(p[0].kind, "slow");
  EXPECT_EQ(p[0].text, "rank 2 slow: 90.0 ms compute per step, the others' median 20.0 ms");
  EXPECT_NE(w.status_line(t0).find("| rank 2 slow"), std::string::npos);
  // Ranks 0 and 1 go on (a record every second); rank 1 stops at step 12.
  for (int s = 11; s <= 60; ++s) {
    const Clock::time_point t = t0 + std::chrono::seconds(s - 10);
    w.on_rank(0, {s, 0.020, "train"}, t);
    if (s <= 12) w.on_rank(1, {s, 0.020, "train"}, t);
  }
  p = w.problems(t0 + 50s);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].rank, 1);
  EXPECT_EQ(p[0].kind, "silent");
  EXPECT_NE(p[0].text.find("rank 1 silent: no progress for 48 s (at step 12)"), std::string::npos) << p[0].text;
  // While the job evaluates, nobody is silent.
  w.on_job({60, 100, 2.0, 1000, 5, 50, "eval"}, t0 + 50s);
  for (const ProgressWatch::Problem& q : w.problems(t0 + 50s)) EXPECT_NE(q.kind, "silent");
}

TEST(ProgressWatch, ReadsTheRecordsFromTheStoreAndSkipsMalformedOnes) {
  InMemoryStore store;
  ProgressWatch w(2);
  const Clock::time_point t0 = Clock::now();
  w.poll(store, t0);
  EXPECT_EQ(w.status_line(t0), "");
  ASSERT_TRUE(store.set(job_keys::kProgress, encode_progress(JobProgress{5, 10, 1.0, 100, 1, 4, "train"})).ok());
  ASSERT_TRUE(store.set(job_keys::rank_progress(0), encode_progress(RankProgress{5, 0.01, "train"})).ok());
  for (int s = 1; s <= ProgressWatch::kSlowRecords; ++s) {
    ASSERT_TRUE(store.set(job_keys::rank_progress(1), encode_progress(RankProgress{s, 0.5, "train"})).ok());
    const auto t = t0 + std::chrono::seconds(s);
    w.poll(store, t - 500ms);  // rank 0's record at every poll, the ranks' once a second
    EXPECT_NE(w.status_line(t - 500ms).find("5/10"), std::string::npos);
    w.poll(store, t);
  }
  EXPECT_NE(w.status_line(t0 + 3s).find("rank 1 slow"), std::string::npos) << w.status_line(t0 + 3s);
  ASSERT_TRUE(store.set(job_keys::kProgress, "{garbage").ok());
  w.poll(store, t0 + 4s);
  EXPECT_NE(w.status_line(t0 + 4s).find("5/10"), std::string::npos);  // the last good record stays
}

}  // namespace
}  // namespace zdp::launcher
