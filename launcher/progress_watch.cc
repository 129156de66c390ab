// ProgressWatch (progress_watch.h).
#include "launcher/progress_watch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace zdp::launcher {
namespace {

std::string rate(double v) {
  char buf[32];
  if (v >= 1e6) std::snprintf(buf, sizeof(buf), "%.2fM", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof(buf), "%.1fk", v / 1e3);
  else std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

double seconds(ProgressWatch::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A key's value, or nothing when it is absent or unreadable.
std::optional<std::string> read_key(Store& store, const std::string& key) {
  StatusOr<bool> there = store.check({key});
  if (!there.ok() || !*there) return std::nullopt;
  StatusOr<std::string> value = store.get(key, std::chrono::milliseconds(200));
  if (!value.ok()) return std::nullopt;
  return *value;
}

}  // namespace

ProgressWatch::ProgressWatch(int world_size) : ranks_(static_cast<size_t>(std::max(world_size, 0))) {}

void ProgressWatch::on_job(const JobProgress& job, Clock::time_point now) {
  if (job_ && encode_progress(*job_) == encode_progress(job)) return;  // the ETA counts down from when it changed
  job_ = job;
  job_at_ = now;
}

void ProgressWatch::on_rank(int rank, const RankProgress& p, Clock::time_point now) {
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
  RankState& r = ranks_[static_cast<size_t>(rank)];
  const std::string text = encode_progress(p);
  if (r.last && text == r.text) return;
  if (r.last) r.longest_gap = std::max(r.longest_gap, now - r.changed);
  r.last = p;
  r.text = text;
  r.changed = now;
  r.others_median = others_median(rank);
  const bool slow = r.others_median > 0 && p.compute_s > kSlowFactor * r.others_median &&
                    p.compute_s - r.others_median >= kSlowExcessS;
  r.slow_streak = slow ? r.slow_streak + 1 : 0;
}

double ProgressWatch::others_median(int rank) const {
  // Against the other ranks, so that one straggler of two still stands out.
  std::vector<double> others;
  for (int q = 0; q < static_cast<int>(ranks_.size()); ++q) {
    const RankState& o = ranks_[static_cast<size_t>(q)];
    if (q != rank && o.last && o.last->compute_s > 0) others.push_back(o.last->compute_s);
  }
  if (others.empty()) return 0;
  std::sort(others.begin(), others.end());
  const size_t n = others.size();
  return n % 2 == 1 ? others[n / 2] : 0.5 * (others[n / 2 - 1] + others[n / 2]);
}

void ProgressWatch::poll(Store& store, Clock::time_point now) {
  if (std::optional<std::string> text = read_key(store, job_keys::kProgress)) {
    StatusOr<JobProgress> job = decode_job_progress(*text);
    if (job.ok()) on_job(*job, now);
  }
  if (now < next_rank_read_) return;
  next_rank_read_ = now + kRankInterval;
  for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
    if (std::optional<std::string> text = read_key(store, job_keys::rank_progress(r))) {
      StatusOr<RankProgress> p = decode_rank_progress(*text);
      if (p.ok()) on_rank(r, *p, now);
    }
  }
}

std::vector<ProgressWatch::Problem> ProgressWatch::problems(Clock::time_point now) const {
  std::vector<Problem> out;
  const bool training = job_ && job_->phase == "train";
  char buf[160];
  for (int rank = 0; rank < static_cast<int>(ranks_.size()); ++rank) {
    const RankState& r = ranks_[static_cast<size_t>(rank)];
    if (!r.last) continue;
    const double quiet = seconds(now - r.changed);
    const double limit = std::max(static_cast<double>(kSilentAfter.count()), 4 * seconds(r.longest_gap));
    if (training && r.last->phase == "train" && quiet > limit) {
      std::snprintf(buf, sizeof(buf), "rank %d silent: no progress for %.0f s (at step %lld)", rank, quiet,
                    static_cast<long long>(r.last->step));
      out.push_back({rank, "silent", buf});
      continue;
    }
    if (r.slow_streak >= kSlowRecords) {
      std::snprintf(buf, sizeof(buf), "rank %d slow: %.1f ms compute per step, the others' median %.1f ms", rank,
                    r.last->compute_s * 1e3, r.others_median * 1e3);
      out.push_back({rank, "slow", buf});
    }
  }
  return out;
}

std::string ProgressWatch::status_line(Clock::time_point now) const {
  if (!job_) return "";
  const JobProgress& j = *job_;
  constexpr int kWidth = 24;
  const double frac = j.steps > 0 ? std::min(1.0, static_cast<double>(j.step) / static_cast<double>(j.steps)) : 0.0;
  std::string bar(static_cast<size_t>(frac * kWidth), '#');
  bar.resize(kWidth, '.');
  char head[96];
  std::snprintf(head, sizeof(head), "[%s] %lld/%lld %3.0f%%", bar.c_str(), static_cast<long long>(j.step),
                static_cast<long long>(j.steps), 100 * frac);
  std::string line = head;
  // Between records the ETA counts down on the launcher's clock (the ranks' clocks may
  // differ). It comes first: a narrow terminal cuts the end of the line.
  const double eta = j.eta_s < 0 ? -1 : std::max(0.0, j.eta_s - seconds(now - job_at_));
  line += " | ETA " + format_eta(j.phase == "done" ? 0 : eta);
  if (j.loss >= 0) {
    char loss[32];
    std::snprintf(loss, sizeof(loss), " | loss %.4f", j.loss);
    line += loss;
  }
  if (j.tokens_per_s > 0) line += " | " + rate(j.tokens_per_s) + " tok/s";
  if (j.phase == "eval") line += " | evaluating";
  else if (j.phase == "checkpoint") line += " | saving a checkpoint";
  else if (j.phase == "done") line += " | finishing";
  for (const Problem& p : problems(now)) line += " | " + p.text;
  return line;
}

}  // namespace zdp::launcher
