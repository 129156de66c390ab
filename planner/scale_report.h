// `dp-launch scale`'s numbers: throughput, speed-up and scaling efficiency of the same job
// at several world sizes with the same per-rank work (weak scaling: global batch = K x
// micro_batch x accum_steps), and the serial fraction of Amdahl's law fitted to the
// speed-ups. Pure (plan_cost_test checks the fit on a series with a known answer).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zdp/status.h"

namespace zdp::launcher {

// One run, from its train_summary.json (trainer/loop/run_summary.h).
struct ScalePoint {
  int world_size = 1;
  int stage = 0;
  int64_t global_batch = 0;
  int64_t steps = 0;
  double step_time_s = 0;  // median over the timed steps
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double final_loss = 0;
  std::string summary_path;
};

// What the report says about one run, relative to the smallest world size K0 (normally 1).
struct ScaleRow {
  ScalePoint point;
  double speedup = 1;     // samples/s over K0's, times K0 (= K_0 when K0 > 1: assumes K0 scaled perfectly)
  double efficiency = 1;  // eta = speedup / K = T_1 / T_K per sample: 1 is perfect weak scaling
  double amdahl = 0;      // the fitted law's speed-up at this K (0 when there is no fit)
};

// Amdahl's law S(K) = 1 / (s + (1 - s) / K), s fitted by least squares of the speed-ups
// themselves over the points with K > 1, for s above the pole of the largest K
// (-1 / (K - 1)). The linear form 1/S - 1/K = s (1 - 1/K) (Karp-Flatt) weighted the small
// K: noisy sublinear points fitted S(64) = 25 for a measured 40.
struct AmdahlFit {
  double serial_fraction = 0;
  double rms_error = 0;  // of the fitted speed-ups against the measured ones
  int points = 0;
};

// kInvalidArgument when no point has K > 1 or a speed-up is not positive.
StatusOr<AmdahlFit> fit_amdahl(const std::vector<std::pair<int, double>>& speedups);
double amdahl_speedup(double serial_fraction, int world_size);

struct ScaleReport {
  std::vector<ScaleRow> rows;   // by world size
  std::optional<AmdahlFit> fit; // when the base is K = 1 and some K > 1 ran
};

// kInvalidArgument for no points or a non-positive throughput.
StatusOr<ScaleReport> make_scale_report(std::vector<ScalePoint> points);

// The console table and the fit's line.
std::string format_scale(const ScaleReport& report, const std::string& heading);
// One {"kind": "run"} line per world size and a {"kind": "amdahl"} line.
std::vector<nlohmann::json> scale_json(const ScaleReport& report);

}  // namespace zdp::launcher
