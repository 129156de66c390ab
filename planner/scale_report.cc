// Speed-up, efficiency and the Amdahl fit of a weak-scaling series (see scale_report.h).
#include "planner/scale_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace zdp::launcher {

double amdahl_speedup(double s, int k) { return 1.0 / (s + (1.0 - s) / static_cast<double>(k)); }

StatusOr<AmdahlFit> fit_amdahl(const std::vector<std::pair<int, double>>& speedups) {
  AmdahlFit fit;
  int k_max = 1;
  for (const auto& [k, s] : speedups) {
    if (!(s > 0)) return Status(StatusCode::kInvalidArgument, "Amdahl fit: speed-up " + std::to_string(s) + " at K = " +
                                                                  std::to_string(k) + " is not positive");
    if (k <= 1) continue;
    k_max = std::max(k_max, k);
    ++fit.points;
  }
  if (fit.points == 0) return Status(StatusCode::kInvalidArgument, "Amdahl fit: no world size above 1");
  const auto squared_error = [&](double serial) {
    double se = 0;
    for (const auto& [k, s] : speedups) {
      if (k <= 1) continue;
      const double d = amdahl_speedup(serial, k) - s;
      se += d * d;
    }
    return se;
  };
  // One dimension: a grid over (pole, 2], then golden-section search around its best
  // point. S(K) is finite and positive for every K above the pole -1 / (K_max - 1).
  // Up to past the largest s a single point implies (a run slower than one rank: s > 1).
  double hi = 2.0;
  for (const auto& [k, s] : speedups) {
    if (k > 1) hi = std::max(hi, 2.0 * (1.0 / s - 1.0 / k) / (1.0 - 1.0 / k) + 1.0);
  }
  const double lo = -1.0 / (k_max - 1) * (1 - 1e-9);
  constexpr int kGrid = 4000;
  int best = 0;
  double best_se = squared_error(lo);
  for (int i = 1; i <= kGrid; ++i) {
    const double se = squared_error(lo + (hi - lo) * i / kGrid);
    if (se < best_se) best = i, best_se = se;
  }
  double a = lo + (hi - lo) * std::max(0, best - 1) / kGrid, b = lo + (hi - lo) * std::min(kGrid, best + 1) / kGrid;
  const double r = (std::sqrt(5.0) - 1) / 2;
  double c = b - r * (b - a), d = a + r * (b - a);
  for (int i = 0; i < 200 && b - a > 1e-15; ++i) {
    if (squared_error(c) < squared_error(d)) {
      b = d;
    } else {
      a = c;
    }
    c = b - r * (b - a), d = a + r * (b - a);
  }
  fit.serial_fraction = (a + b) / 2;
  fit.rms_error = std::sqrt(squared_error(fit.serial_fraction) / fit.points);
  return fit;
}

StatusOr<ScaleReport> make_scale_report(std::vector<ScalePoint> points) {
  if (points.empty()) return Status(StatusCode::kInvalidArgument, "scale report: no runs");
  std::sort(points.begin(), points.end(), [](const ScalePoint& a, const ScalePoint& b) { return a.world_size < b.world_size; });
  const ScalePoint& base = points.front();
  for (const ScalePoint& p : points) {
    if (!(p.samples_per_s > 0)) {
      return Status(StatusCode::kInvalidArgument, "scale report: the run at world size " + std::to_string(p.world_size) +
                                                      " has no throughput (" + p.summary_path + ")");
    }
  }
  ScaleReport report;
  std::vector<std::pair<int, double>> speedups;
  for (const ScalePoint& p : points) {
    ScaleRow row;
    row.point = p;
    row.speedup = p.samples_per_s / base.samples_per_s * base.world_size;
    row.efficiency = row.speedup / p.world_size;
    speedups.emplace_back(p.world_size, row.speedup);
    report.rows.push_back(row);
  }
  if (base.world_size == 1 && points.size() > 1) {
    StatusOr<AmdahlFit> fit = fit_amdahl(speedups);
    if (fit.ok()) {
      report.fit = *fit;
      for (ScaleRow& r : report.rows) r.amdahl = amdahl_speedup(fit->serial_fraction, r.point.world_size);
    }
  }
  return report;
}

std::string format_scale(const ScaleReport& report, const std::string& heading) {
  std::string out = heading + "\n";
  char line[256];
  std::snprintf(line, sizeof(line), "  %5s %5s %12s %12s %12s %12s %9s %13s %11s %10s\n", "world", "stage", "global batch",
                "step ms", "samples/s", "tokens/s", "speed-up", "eta=T1/TK", "Amdahl fit", "final loss");
  out += line;
  for (const ScaleRow& r : report.rows) {
    const ScalePoint& p = r.point;
    char fitted[32] = "-";
    if (r.amdahl > 0) std::snprintf(fitted, sizeof(fitted), "%.2f", r.amdahl);
    char loss[32];
    if (std::isfinite(p.final_loss)) std::snprintf(loss, sizeof(loss), "%.4f", p.final_loss);
    else std::snprintf(loss, sizeof(loss), "%s", p.steps > 0 ? "not finite" : "-");
    std::snprintf(line, sizeof(line), "  %5d %5d %12lld %12.1f %12.1f %12.0f %9.2f %13.2f %11s %10s\n", p.world_size,
                  p.stage, static_cast<long long>(p.global_batch), p.step_time_s * 1e3, p.samples_per_s, p.tokens_per_s,
                  r.speedup, r.efficiency, fitted, loss);
    out += line;
  }
  if (report.fit) {
    std::snprintf(line, sizeof(line),
                  "Amdahl: serial fraction s = %.3f (least squares over %d world size(s) > 1; speed-up 1 / (s + (1 - s) / K), "
                  "rms error %.3f); step ms is the median step (dp-train's train_summary.json)\n",
                  report.fit->serial_fraction, report.fit->points, report.fit->rms_error);
    out += line;
    if (report.fit->serial_fraction > 1) {
      out += "  (s > 1: more ranks ran slower than one; they share too few cores or wait on communication)\n";
    } else if (report.fit->serial_fraction < 0) {
      out += "  (s < 0: better than linear; a rank's work got cheaper with more ranks, e.g. fewer threads each)\n";
    }
  } else {
    out += "Amdahl: no fit (it needs world size 1 and at least one more)\n";
  }
  if (!report.rows.empty() && report.rows.front().point.world_size > 1) {
    const int k0 = report.rows.front().point.world_size;
    // No run at one rank: nothing measured T1. Said, since the columns read as if it had.
    std::snprintf(line, sizeof(line),
                  "no run at world size 1: speed-up and eta are relative to K = %d, which is taken to have "
                  "scaled perfectly (speed-up %d, eta 1.00 there, not measured); add 1 to --world to measure T1\n",
                  k0, k0);
    out += line;
  }
  return out;
}

std::vector<nlohmann::json> scale_json(const ScaleReport& report) {
  std::vector<nlohmann::json> lines;
  for (const ScaleRow& r : report.rows) {
    const ScalePoint& p = r.point;
    lines.push_back({{"kind", "run"},
                     {"world_size", p.world_size},
                     {"stage", p.stage},
                     {"global_batch", p.global_batch},
                     {"steps", p.steps},
                     {"step_time_s_median", p.step_time_s},
                     {"samples_per_s", p.samples_per_s},
                     {"tokens_per_s", p.tokens_per_s},
                     {"speedup", r.speedup},
                     {"efficiency", r.efficiency},
                     {"amdahl_speedup", r.amdahl > 0 ? nlohmann::json(r.amdahl) : nlohmann::json(nullptr)},
                     {"final_loss", p.final_loss},
                     {"summary", p.summary_path}});
  }
  if (report.fit) {
    lines.push_back({{"kind", "amdahl"},
                     {"serial_fraction", report.fit->serial_fraction},
                     {"rms_error", report.fit->rms_error},
                     {"points", report.fit->points}});
  }
  return lines;
}

}  // namespace zdp::launcher
