// summarize(), the console tables and the summary JSON line (profile_summary.h).
#include "profile/src/profile_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <tuple>
#include <utility>

namespace zdp::profile {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  return buf;
}

// "1.23k", "4.56M": a rate with an SI suffix.
std::string si(double v) {
  const char* suffix[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 4) v /= 1000, ++i;
  return format("%.3g%s", v, suffix[i]);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string error_percent(const MemoryRow& r) {
  if (r.planned < 0) return "-";
  if (r.planned == 0) return r.measured == 0 ? "+0.0%" : "n/a";
  return format("%+.1f%%", 100.0 * static_cast<double>(r.measured - r.planned) / static_cast<double>(r.planned));
}

// The console's name for a category: MemCategory::kOther holds the model's activations
// and scratch. The JSON keeps to_string's name ("other"), as every step line does: the
// summary line said "activations" and a tool joining the two missed the category.
const char* category_label(const std::string& category) {
  return category == to_string(MemCategory::kOther) ? "activations" : category.c_str();
}

}  // namespace

double Summary::named_seconds() const {
  double sum = 0;
  for (int p = 0; p < kNumStepParts; ++p) {
    if (static_cast<StepPart>(p) != StepPart::kOther) sum += parts[static_cast<size_t>(p)];
  }
  return sum;
}

StatusOr<Summary> summarize(const std::vector<RankProfile>& ranks, const SummaryInputs& inputs) {
  Summary s;
  s.in = inputs;
  int64_t samples = 0;  // (rank, step) pairs
  double comm_total = 0, exposed_total = 0;
  std::map<std::tuple<int, int, bool>, BucketRow> buckets;  // (op, bucket, reduction)
  std::array<MemoryRow, kNumMemCategories> memory{};
  MemoryCounters total_memory;  // largest over ranks
  for (const RankProfile& r : ranks) {
    if (r.steps.empty()) continue;
    RankRow row{r.rank, r.host};
    for (const StepProfile& st : r.steps) {
      for (int p = 0; p < kNumStepParts; ++p) s.parts[static_cast<size_t>(p)] += st.parts[static_cast<size_t>(p)];
      s.step_seconds += st.seconds();
      comm_total += st.comm();
      exposed_total += st.exposed_comm();
      row.compute += st.compute();
      row.step += st.seconds();
      if (inputs.world_size > 1) row.exposed += st.exposed_comm();
      for (const CollectiveTiming& c : st.collectives) {
        BucketRow& b = buckets[{static_cast<int>(c.op), c.bucket, c.reduction}];
        b.bucket = c.bucket;
        b.op = c.op;
        b.reduction = c.reduction;
        b.bytes = c.bytes;
        b.count += 1;
        b.seconds += c.seconds();
      }
      for (int c = 0; c < kNumMemCategories; ++c) {
        MemoryRow& m = memory[static_cast<size_t>(c)];
        m.peak = std::max(m.peak, st.memory[static_cast<size_t>(c)].peak_bytes);
      }
      total_memory.peak_bytes = std::max(total_memory.peak_bytes, st.memory_total.peak_bytes);
    }
    const StepProfile& last = r.steps.back();
    for (int c = 0; c < kNumMemCategories; ++c) {
      MemoryRow& m = memory[static_cast<size_t>(c)];
      m.measured = std::max(m.measured, last.memory[static_cast<size_t>(c)].current_bytes);
    }
    total_memory.current_bytes = std::max(total_memory.current_bytes, last.memory_total.current_bytes);
    const double n = static_cast<double>(r.steps.size());
    row.compute /= n;
    row.step /= n;
    row.exposed /= n;
    s.ranks.push_back(row);
    samples += static_cast<int64_t>(r.steps.size());
    if (s.steps == 0) {
      s.steps = static_cast<int64_t>(r.steps.size());
      s.first_step = r.steps.front().step + 1;
      s.last_step = r.steps.back().step + 1;
    }
  }
  if (samples == 0 && inputs.steps_run >= 0 && inputs.steps_run <= inputs.warmup_steps) {
    // The usual cause under dp-train: a resumed run with fewer steps left than the warm-up
    // (the trace and marks hint below sent its user to look for code they never wrote).
    return Status(StatusCode::kInvalidArgument,
                  "profile: no step measured: this run trained " + std::to_string(inputs.steps_run) +
                      " step(s), all within profile.warmup_steps = " + std::to_string(inputs.warmup_steps) +
                      " (a resumed run trains only the steps left to train.steps)");
  }
  if (samples == 0) {
    return Status(StatusCode::kInvalidArgument,
                  "profile: no rank measured a step (warm-up steps " + std::to_string(inputs.warmup_steps) +
                      "; each step needs EngineOptions::trace and the trainer's kIterationBegin and "
                      "kIterationEnd marks)");
  }
  const double n = static_cast<double>(samples);
  for (double& p : s.parts) p /= n;
  s.step_seconds /= n;
  s.comm_seconds = comm_total / n;
  s.exposed_seconds = inputs.world_size > 1 ? exposed_total / n : 0.0;
  // One rank exchanges nothing: its "waits" are the host's own work around the no-op
  // collectives, which read as more exposed communication than there was communication.
  if (comm_total > 0 && inputs.world_size > 1) {
    s.hidden_fraction = std::clamp(1.0 - exposed_total / comm_total, 0.0, 1.0);
  }
  if (s.step_seconds > 0) {
    s.samples_per_second = static_cast<double>(inputs.samples_per_step) / s.step_seconds;
    s.tokens_per_second = s.samples_per_second * static_cast<double>(inputs.tokens_per_sample);
    if (inputs.peak_flops > 0 && inputs.flops_per_sample > 0) {
      s.mfu = inputs.flops_per_sample * s.samples_per_second / (inputs.world_size * inputs.peak_flops);
    }
  }
  for (auto& [key, b] : buckets) {
    b.seconds /= static_cast<double>(b.count);
    CollectiveTiming mean{b.bucket, b.op, b.bytes, 0.0, b.seconds};
    b.busbw = mean.busbw(inputs.world_size);
    s.buckets.push_back(b);
    // What leaves a rank: nccl-tests' bus factor of the buffer ((K-1)/K, all-reduce twice).
    if (s.steps > 0) {
      const double sent = static_cast<double>(b.bytes) * busbw_factor(b.op, inputs.world_size) *
                          static_cast<double>(b.count) / static_cast<double>(s.steps * inputs.world_size);
      s.sent_bytes_per_step += sent;
      if (b.bucket >= 0 && b.reduction) s.sent_grad_bytes_per_step += sent;
    }
  }
  // The total is the device's (every category, peak of the sum); it is planned when every
  // category is.
  MemoryRow total{"total"};
  total.planned = 0;
  for (int c = 0; c < kNumMemCategories; ++c) {
    MemoryRow m = memory[static_cast<size_t>(c)];
    m.category = to_string(static_cast<MemCategory>(c));
    m.planned = inputs.planned[static_cast<size_t>(c)];
    total.planned = m.planned >= 0 && total.planned >= 0 ? total.planned + m.planned : -1;
    s.memory.push_back(m);
  }
  total.measured = total_memory.current_bytes;
  total.peak = total_memory.peak_bytes;
  s.memory.push_back(total);

  const auto slowest = std::max_element(s.ranks.begin(), s.ranks.end(),
                                        [](const RankRow& a, const RankRow& b) { return a.compute < b.compute; });
  s.slowest_rank = slowest->rank;
  // Against the other ranks' median, as dp-launch's slow-rank check compares: with the
  // slowest rank in it, two ranks' median is their mean and a rank twice as slow as the
  // other read +50%.
  std::vector<double> others;
  for (const RankRow& r : s.ranks) {
    if (&r != &*slowest) others.push_back(r.compute);
  }
  s.median_compute = others.empty() ? slowest->compute : median(others);
  s.slowest_excess = s.median_compute > 0 ? (slowest->compute - s.median_compute) / s.median_compute : 0;
  return s;
}

std::string format_summary(const Summary& s, const OutputPaths& paths) {
  const SummaryInputs& in = s.in;
  std::string out = format("profile: %s, ZeRO stage %d, %d rank(s) on %s; steps %lld-%lld (%lld measured, %lld warm-up left out)\n",
                           in.description.c_str(), in.stage, in.world_size, in.device.c_str(),
                           static_cast<long long>(s.first_step), static_cast<long long>(s.last_step),
                           static_cast<long long>(s.steps), static_cast<long long>(in.warmup_steps));
  out += format("step time %.3f ms (mean over ranks and steps):\n", s.step_seconds * 1e3);
  out += format("  %-12s %10s %7s\n", "part", "ms", "%");
  for (int p = 0; p < kNumStepParts; ++p) {
    const double v = s.parts[static_cast<size_t>(p)];
    out += format("  %-12s %10.3f %7.1f\n", to_string(static_cast<StepPart>(p)), v * 1e3,
                  s.step_seconds > 0 ? 100.0 * v / s.step_seconds : 0.0);
  }
  out += format("  the named parts add up to %.1f%% of the step time\n",
                s.step_seconds > 0 ? 100.0 * s.named_seconds() / s.step_seconds : 0.0);
  if (s.hidden_fraction >= 0) {
    out += format("communication: %.3f ms per step on the comm stream, %.3f ms exposed (reduce wait, gather wait, the "
                  "norm's all-reduce): %.1f%% hidden by overlap\n",
                  s.comm_seconds * 1e3, s.exposed_seconds * 1e3, 100.0 * s.hidden_fraction);
    // A wait also holds the hand-off between the streams (on CPU ranks their threads'
    // wake-ups), which no collective's own time does: said, not clamped away in silence.
    if (s.exposed_seconds > s.comm_seconds) {
      out += format("  the waits exceed the collectives by %.3f ms a step: the hand-off between the streams each wait "
                    "includes (on CPU ranks, their threads waking)\n",
                    (s.exposed_seconds - s.comm_seconds) * 1e3);
    }
  } else if (in.world_size == 1) {
    out += "communication: one rank: nothing exchanged (its collectives are copies, not shown)\n";
  } else {
    out += "communication: none measured (no collective in the measured steps)\n";
  }
  out += "throughput: " + si(s.samples_per_second) + " samples/s, " + si(s.tokens_per_second) + " tokens/s, MFU " +
         (s.mfu >= 0 ? format("%.1f%%", 100.0 * s.mfu) : std::string("n/a (no peak FLOP/s for this device: set profile.peak_tflops)")) +
         "\n";
  out += "memory per rank, MiB (largest over ranks; planned: " + in.plan_source + "):\n";
  out += format("  %-12s %12s %12s %12s %8s\n", "category", "planned", "measured", "peak", "error");
  for (const MemoryRow& m : s.memory) {
    out += format("  %-12s %12s %12.3f %12.3f %8s\n", category_label(m.category),
                  m.planned >= 0 ? format("%.3f", static_cast<double>(m.planned) / kMiB).c_str() : "-",
                  static_cast<double>(m.measured) / kMiB, static_cast<double>(m.peak) / kMiB, error_percent(m).c_str());
  }
  if (!s.buckets.empty() && in.world_size > 1) {
    out += "collectives per bucket (mean over steps and ranks; busbw as nccl-tests):\n";
    out += format("  %-6s %-18s %12s %10s %12s\n", "bucket", "op", "bytes", "ms", "busbw GB/s");
    const size_t shown = std::min<size_t>(s.buckets.size(), 16);
    for (size_t i = 0; i < shown; ++i) {
      const BucketRow& b = s.buckets[i];
      const std::string bucket = b.bucket < 0 ? "norm" : std::to_string(b.bucket);
      out += format("  %-6s %-18s %12lld %10.3f %12.3f\n", bucket.c_str(), collective_label(b.op, b.reduction).c_str(),
                    static_cast<long long>(b.bytes), b.seconds * 1e3, b.busbw / 1e9);
    }
    if (shown < s.buckets.size()) out += format("  ... %zu more in the JSON lines\n", s.buckets.size() - shown);
    out += format("  sent per rank per step: %s, of it gradients %s (the buffers' bytes x (K-1)/K, all-reduce x "
                  "2(K-1)/K)\n",
                  format_bytes(static_cast<int64_t>(s.sent_bytes_per_step)).c_str(),
                  format_bytes(static_cast<int64_t>(s.sent_grad_bytes_per_step)).c_str());
  }
  out += "stragglers: forward + backward per rank, ms per step:\n ";
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    if (i == 16 && s.ranks.size() > 17) {
      out += format(" ... (%zu ranks in the JSON lines)", s.ranks.size());
      break;
    }
    out += format(" rank %d %.3f", s.ranks[i].rank, s.ranks[i].compute * 1e3);
  }
  // One rank has no others to be slower than.
  out += s.ranks.size() < 2 ? std::string("\n")
                            : format("\n  slowest: rank %d, %+.1f%% vs the other ranks' median (%.3f ms)\n",
                                     s.slowest_rank, 100.0 * s.slowest_excess, s.median_compute * 1e3);
  std::string files;
  if (!paths.trace.empty()) files += "trace " + paths.trace + " (ui.perfetto.dev or chrome://tracing)";
  if (!paths.svg.empty()) files += (files.empty() ? "" : ", ") + std::string("memory plot ") + paths.svg;
  if (!paths.jsonl.empty()) files += (files.empty() ? "" : ", ") + std::string("JSON lines ") + paths.jsonl;
  if (!files.empty()) out += "files: " + files + "\n";
  return out;
}

nlohmann::json summary_line(const Summary& s, const OutputPaths& paths) {
  using nlohmann::json;
  json parts = json::object();
  for (int p = 0; p < kNumStepParts; ++p) parts[to_string(static_cast<StepPart>(p))] = s.parts[static_cast<size_t>(p)] * 1e3;
  json memory = json::array();
  for (const MemoryRow& m : s.memory) {
    json row = {{"category", m.category}, {"measured", m.measured}, {"peak", m.peak}};
    row["planned"] = m.planned >= 0 ? json(m.planned) : json(nullptr);
    memory.push_back(row);
  }
  json buckets = json::array();
  for (const BucketRow& b : s.buckets) {
    buckets.push_back({{"bucket", b.bucket}, {"op", collective_name(b.op)}, {"reduction", b.reduction},
                       {"bytes", b.bytes}, {"count", b.count},
                       {"ms", b.seconds * 1e3}, {"busbw_gbps", b.busbw / 1e9}});
  }
  json ranks = json::array();
  for (const RankRow& r : s.ranks) {
    ranks.push_back({{"rank", r.rank}, {"host", r.host}, {"compute_ms", r.compute * 1e3}, {"step_ms", r.step * 1e3},
                     {"exposed_comm_ms", r.exposed * 1e3}});
  }
  return json{{"type", "summary"},
              {"description", s.in.description},
              {"device", s.in.device},
              {"stage", s.in.stage},
              {"world_size", s.in.world_size},
              {"warmup_steps", s.in.warmup_steps},
              {"steps", s.steps},
              {"first_step", s.first_step},
              {"last_step", s.last_step},
              {"step_ms", s.step_seconds * 1e3},
              {"named_ms", s.named_seconds() * 1e3},
              {"parts_ms", parts},
              {"comm_ms", s.comm_seconds * 1e3},
              {"exposed_comm_ms", s.exposed_seconds * 1e3},
              {"hidden_by_overlap", s.hidden_fraction >= 0 ? json(s.hidden_fraction) : json(nullptr)},
              {"samples_per_s", s.samples_per_second},
              {"tokens_per_s", s.tokens_per_second},
              {"mfu", s.mfu >= 0 ? json(s.mfu) : json(nullptr)},
              {"memory", memory},
              {"collectives", buckets},
              {"sent_bytes_per_step", s.sent_bytes_per_step},
              {"sent_grad_bytes_per_step", s.sent_grad_bytes_per_step},
              {"ranks", ranks},
              {"slowest_rank", s.slowest_rank},
              {"slowest_vs_median", s.slowest_excess},
              {"trace", paths.trace},
              {"memory_svg", paths.svg}};
}

}  // namespace zdp::profile
