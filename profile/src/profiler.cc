// zdp::Profiler: per-step collection on every rank, and rank 0's summary and files. The
// ranks' measurements travel through the job's store (hosted by node 0's launcher), so
// rank 0 needs no file system shared with the other nodes and writes every file itself.
#include "zdp/profiler.h"

#include <unistd.h>

#include <filesystem>
#include <map>

#include "core/internal/output_file.h"
#include "profile/src/chrome_trace.h"

#include "profile/src/memory_svg.h"
#include "profile/src/profile_json.h"
#include "profile/src/profile_summary.h"
#include "zdp/log.h"

namespace zdp {

using profile::RankProfile;
using profile::StepProfile;

ProfileOptions ProfileOptions::from(const Config& config) {
  ProfileOptions o;
  o.dir = config.profile.dir.empty() ? config.launch.log_dir : config.profile.dir;
  o.warmup_steps = config.profile.warmup_steps;
  o.active_steps = config.profile.active_steps;
  o.trace = config.profile.trace;
  o.peak_flops = config.profile.peak_tflops * 1e12;
  return o;
}

struct Profiler::Impl {
  Impl(Context& c, Engine& e, ProfileOptions o) : ctx(c), engine(e), opt(std::move(o)) {}
  Context& ctx;
  Engine& engine;
  ProfileOptions opt;
  int64_t iteration = 0;               // end_step() calls so far
  // The measured steps' points, by step: at most opt.max_kept_points in all, the oldest
  // whole steps dropped first. A run profiled over all its steps (active_steps = 0) kept
  // every point in memory and, past 48 MiB of them, failed at its end without a summary.
  std::map<int64_t, std::vector<TimelineEvent>> events;
  int64_t kept = 0;
  int64_t dropped_steps = 0;
  struct MemorySample {
    std::array<MemoryCounters, kNumMemCategories> categories{};
    MemoryCounters total;
  };
  std::map<int64_t, MemorySample> memory;  // per measured step

  bool measured(int64_t step) const {
    return step >= opt.warmup_steps && (opt.active_steps <= 0 || step < opt.warmup_steps + opt.active_steps);
  }
  void keep(const std::vector<TimelineEvent>& taken) {
    for (const TimelineEvent& e : taken) {
      if (!measured(e.step)) continue;  // warm-up, past the active steps, or outside any step (-1)
      events[e.step].push_back(e);
      ++kept;
    }
    // Whole steps only, never the newest (it may still be filling).
    // The bound is the job's: rank 0 holds every rank's points at the end (each rank kept
    // the whole bound, so K ranks sent rank 0 K times it: gigabytes at 64 ranks).
    const int64_t bound = std::max<int64_t>(1, opt.max_kept_points / std::max(1, ctx.world_size()));
    while (kept > bound && events.size() > 1) {
      kept -= static_cast<int64_t>(events.begin()->second.size());
      memory.erase(events.begin()->first);
      events.erase(events.begin());
      ++dropped_steps;
    }
  }
  std::string who() const { return "rank " + std::to_string(ctx.rank()) + ": profile"; }
  StatusOr<RankProfile> collect();
  Status write_file(const std::string& path, const std::string& text) const;
  profile::SummaryInputs summary_inputs() const;
  std::vector<profile::StageBars> stage_bars(const std::vector<RankProfile>& ranks,
                                             const profile::SummaryInputs& in) const;
};

Profiler::Profiler(Context& ctx, Engine& engine, ProfileOptions options)
    : impl_(std::make_unique<Impl>(ctx, engine, std::move(options))) {
  // Found here, not at finish() after a whole run that recorded nothing.
  if (!engine.finalized()) {
    throw Error(Status(StatusCode::kInvalidArgument,
                       impl_->who() + ": the engine is not finalized: create the Profiler after Engine::finalize()"));
  }
  if (!engine.options().trace) {
    throw Error(Status(StatusCode::kInvalidArgument,
                       impl_->who() + ": the engine's EngineOptions::trace is off, so it records no timeline to "
                                      "profile (set it before finalize())"));
  }
  if (impl_->opt.dir.empty()) {  // create_directories("") fails, and only at finish()
    throw Error(Status(StatusCode::kInvalidArgument,
                       impl_->who() + ": ProfileOptions::dir is empty: name the folder rank 0 writes its files to"));
  }
  ctx.device().memory().reset_peaks();
}

Profiler::~Profiler() = default;

void Profiler::begin_step() { impl_->ctx.device().memory().reset_peaks(); }

void Profiler::end_step() {
  Impl& m = *impl_;
  m.keep(m.engine.take_timeline());
  MemoryAccounting& acct = m.ctx.device().memory();
  if (m.measured(m.iteration)) {
    Impl::MemorySample& s = m.memory[m.iteration];
    for (int c = 0; c < kNumMemCategories; ++c) s.categories[static_cast<size_t>(c)] = acct.category(static_cast<MemCategory>(c));
    s.total = acct.total();
  }
  acct.reset_peaks();  // the next sample's peak is that step's
  ++m.iteration;
}

StatusOr<RankProfile> Profiler::Impl::collect() {
  // Collectives still in flight (overlap_param_gather) land once the comm stream drains.
  StatusOr<std::vector<TimelineEvent>> rest = engine.timeline();
  if (!rest.ok()) return rest.status().with_context(who());
  keep(engine.take_timeline());
  RankProfile me;
  me.rank = ctx.rank();
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "?");
  me.host = host;
  std::vector<TimelineEvent> all;
  all.reserve(static_cast<size_t>(kept));
  for (const auto& [step, points] : events) all.insert(all.end(), points.begin(), points.end());
  me.steps = profile::steps_from_timeline(all);
  if (dropped_steps > 0) {
    ZDP_LOG(kInfo) << who() << ": kept the last " << events.size() << " measured steps (" << kept
                   << " timeline points; the " << dropped_steps
                   << " before them were dropped to bound memory: set profile.active_steps to choose)";
  }
  for (StepProfile& s : me.steps) {
    const auto it = memory.find(s.step);
    if (it != memory.end()) {
      s.memory = it->second.categories;
      s.memory_total = it->second.total;
    }
    s.step += opt.first_step;  // the engine counts this process's iterations; the trainer its steps
  }
  return me;
}

Status Profiler::Impl::write_file(const std::string& path, const std::string& text) const {
  const Status written = write_file_atomically(path, text, "profile file");
  return written.ok() ? written : written.with_context(who());
}

namespace {

// The engine's own plan per category from Engine::memory() (plan_memory's numbers for its
// layout; no activations).
MemoryByCategory engine_plan(const MemoryReport& report) {
  MemoryByCategory out;
  out.fill(-1);
  for (const MemoryReport::Row& row : report.rows) {
    for (int c = 0; c < kNumMemCategories; ++c) {
      if (row.category == to_string(static_cast<MemCategory>(c))) out[static_cast<size_t>(c)] = row.planned;
    }
  }
  return out;
}

}  // namespace

std::string existing_profile_files(const std::string& dir) {
  std::string found;
  for (const char* name : {"profile.jsonl", "trace.json", "memory.svg", "kernels.json"}) {
    std::error_code ec;
    if (!dir.empty() && std::filesystem::exists(std::filesystem::path(dir) / name, ec)) {
      found += (found.empty() ? "" : ", ") + std::string(name);
    }
  }
  return found;
}

profile::SummaryInputs Profiler::Impl::summary_inputs() const {
  profile::SummaryInputs in;
  const MemoryReport report = engine.memory();
  in.world_size = ctx.world_size();
  in.stage = report.stage;
  in.description = opt.description.empty() ? std::to_string(report.params) + " parameters" : opt.description;
  in.device = ctx.device().name();
  in.warmup_steps = opt.warmup_steps;
  in.steps_run = iteration;
  in.samples_per_step = opt.samples_per_step;
  in.tokens_per_sample = opt.tokens_per_sample;
  in.flops_per_sample = opt.flops_per_sample;
  in.peak_flops = opt.peak_flops;
  in.planned = engine_plan(report);
  in.plan_source = "the engine's memory plan";
  if (opt.plan) {
    StatusOr<MemoryByCategory> planned = opt.plan(report.stage);
    if (planned.ok()) {
      in.planned = *planned;
      in.plan_source = opt.plan_source;
    } else {
      ZDP_LOG(kWarn) << who() << ": no memory plan for stage " << report.stage << ": " << planned.status().to_string();
    }
  }
  return in;
}

std::vector<profile::StageBars> Profiler::Impl::stage_bars(const std::vector<RankProfile>& ranks,
                                                           const profile::SummaryInputs& in) const {
  constexpr size_t kMaxRankBars = 8;
  std::vector<profile::StageBars> out;
  for (int stage = 0; stage <= 3; ++stage) {
    profile::StageBars g;
    g.stage = stage;
    StatusOr<MemoryByCategory> planned = Status(StatusCode::kUnavailable, "no planner given");
    if (stage == in.stage) {
      planned = in.planned;
    } else if (opt.plan) {
      planned = opt.plan(stage);
    }
    if (stage == in.stage) {
      for (const RankProfile& r : ranks) {
        if (g.bars.size() == kMaxRankBars || r.steps.empty()) continue;
        profile::MemoryBar b{"rank " + std::to_string(r.rank), {}, true};
        for (int c = 0; c < kNumMemCategories; ++c) {
          b.bytes[static_cast<size_t>(c)] = r.steps.back().memory[static_cast<size_t>(c)].current_bytes;
        }
        g.bars.push_back(b);
      }
      g.caption = "this run: measured";
      if (ranks.size() > kMaxRankBars) g.caption += " (first " + std::to_string(kMaxRankBars) + " ranks)";
    } else {
      g.caption = planned.ok() ? "planned (not run)" : "not planned";
    }
    if (planned.ok()) g.bars.push_back(profile::MemoryBar{"plan", *planned, false});
    out.push_back(std::move(g));
  }
  return out;
}

StatusOr<ProfileSummary> Profiler::finish() {
  Impl& m = *impl_;
  Store& store = m.ctx.store();
  // This rank's n-th finish() (a second profiler of the job, a second engine on the
  // context, reads the n-th of every rank: fixed keys handed rank 0 the first one's
  // measurements of a rank not yet done). Counted per rank, so a fast rank's next
  // profiler cannot take a slow rank's number; every rank finishes its profilers in order.
  StatusOr<int64_t> nth = store.add("profile/finishes/rank/" + std::to_string(m.ctx.rank()), 1);
  if (!nth.ok()) return nth.status().with_context(m.who() + ": counting this rank's profiles");
  const std::string prefix = "profile/" + std::to_string(*nth) + "/rank/";
  const std::string key = prefix + std::to_string(m.ctx.rank());
  // A rank that has no measurements to send says why under its key (rank 0 waited out the
  // collective timeout for it, then blamed the wait).
  constexpr char kFailed[] = "zdp-profile-failed: ";
  const auto fail = [&](const Status& why) {
    (void)store.set(key, kFailed + why.message());
    return why;
  };
  StatusOr<RankProfile> collected = m.collect();
  if (!collected.ok()) return fail(collected.status());
  const RankProfile& mine = *collected;
  const std::string text = profile::rank_to_json(mine);
  // The TCP store refuses messages over 64 MiB (TcpStoreServerOptions): say what to change.
  constexpr size_t kMaxBytes = 48u << 20;
  if (text.size() > kMaxBytes) {
    return fail(Status(StatusCode::kInvalidArgument,
                       m.who() + ": " + std::to_string(mine.steps.size()) + " measured steps make " +
                           std::to_string(text.size() >> 20) + " MiB of measurements, more than the store carries (" +
                           std::to_string(kMaxBytes >> 20) + " MiB); measure fewer steps (profile.active_steps)"));
  }
  Status sent = store.set(key, text);
  if (!sent.ok()) return sent.with_context(m.who() + ": sending this rank's measurements");
  if (m.ctx.rank() != 0) return ProfileSummary{};

  std::vector<RankProfile> ranks;
  const auto timeout = m.ctx.collective_timeout();
  for (int r = 0; r < m.ctx.world_size(); ++r) {
    const std::string what = "rank " + std::to_string(r) + "'s measurements";
    StatusOr<std::string> text = store.get(prefix + std::to_string(r), timeout);
    if (!text.ok()) return text.status().with_context(m.who() + ": waiting for " + what);
    if (text->rfind(kFailed, 0) == 0) {
      return Status(StatusCode::kAborted, m.who() + ": rank " + std::to_string(r) + " sent no measurements: " +
                                              text->substr(sizeof(kFailed) - 1));
    }
    StatusOr<RankProfile> p = profile::rank_from_json(*text, what);
    if (!p.ok()) return p.status().with_context(m.who());
    if (p->rank != r) {  // the key is rank r's: a profile naming another would be drawn on its lane
      return Status(StatusCode::kInvalidArgument, m.who() + ": " + what + " name rank " + std::to_string(p->rank));
    }
    ranks.push_back(std::move(*p));
  }
  const profile::SummaryInputs in = m.summary_inputs();
  StatusOr<profile::Summary> summary = profile::summarize(ranks, in);
  if (!summary.ok()) {  // e.g. a resumed run with fewer steps left than the warm-up
    if (m.opt.out != nullptr) {
      // Files an earlier run wrote there are not this run's: say so (they were taken for it).
      const std::string earlier = existing_profile_files(m.opt.dir);
      std::fprintf(m.opt.out, "%s%s\n", summary.status().message().c_str(),
                   earlier.empty() ? ""
                                   : ("; " + earlier + " in " + m.opt.dir + " are an earlier run's, left as they were")
                                         .c_str());
    }
    return ProfileSummary{};
  }

  // Each file is written on its own and the summary printed whatever became of them: a
  // file that cannot be written (a full disk, the folder replaced) lost the whole report,
  // the tables included, at the end of the run that measured it. The first failure is
  // returned after the summary; a file that was not written is named as not written.
  Status failed;
  const auto keep_first_failure = [&failed](const Status& s) {
    if (failed.ok() && !s.ok()) failed = s;
    return s.ok();
  };
  std::error_code ec;
  std::filesystem::create_directories(m.opt.dir, ec);
  if (ec) keep_first_failure(Status(StatusCode::kIoError, m.who() + ": cannot create '" + m.opt.dir + "': " + ec.message()));
  const std::filesystem::path dir(m.opt.dir);
  profile::OutputPaths paths{m.opt.trace ? (dir / "trace.json").string() : "", (dir / "memory.svg").string(),
                             (dir / "profile.jsonl").string()};
  if (m.opt.trace) {
    if (!keep_first_failure(m.write_file(paths.trace, profile::chrome_trace(ranks, in.world_size)))) paths.trace.clear();
  } else {
    // An earlier run's trace must not sit beside this run's profile.jsonl as if it were its.
    std::error_code ignored;
    std::filesystem::remove(dir / "trace.json", ignored);
  }
  const std::string title = in.description + ": memory per rank, " + std::to_string(in.world_size) + " rank(s)";
  if (!keep_first_failure(m.write_file(paths.svg, profile::memory_svg(title, m.stage_bars(ranks, in))))) paths.svg.clear();
  std::string lines;
  for (const RankProfile& r : ranks) {
    const double origin = profile::time_origin(ranks, r);
    for (const StepProfile& s : r.steps) {
      lines += profile::step_line(s, r.rank, in.world_size, origin).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
  }
  lines += profile::summary_line(*summary, paths).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (!keep_first_failure(m.write_file(paths.jsonl, lines))) paths.jsonl.clear();
  if (m.opt.out != nullptr) {
    const std::string text = profile::format_summary(*summary, paths);
    std::fputs(text.c_str(), m.opt.out);
    std::fflush(m.opt.out);
  }
  if (!failed.ok()) return failed;

  ProfileSummary out;
  out.steps = summary->steps;
  out.step_seconds = summary->step_seconds;
  out.named_seconds = summary->named_seconds();
  out.hidden_fraction = summary->hidden_fraction;
  out.samples_per_second = summary->samples_per_second;
  out.tokens_per_second = summary->tokens_per_second;
  out.mfu = summary->mfu;
  out.slowest_rank = summary->slowest_rank;
  out.slowest_vs_median = summary->slowest_excess;
  out.trace_path = paths.trace;
  out.svg_path = paths.svg;
  out.jsonl_path = paths.jsonl;
  return out;
}

}  // namespace zdp
