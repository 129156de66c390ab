// scale.svg, written by `dp-launch scale` beside scale.jsonl: the measured speed-up per
// world size against the ideal line (speed-up = K) and the fitted Amdahl curve with its
// serial fraction on the left axis, throughput (samples/s) on the right
// (plot/line_chart.h).
#pragma once

#include <string>

#include "planner/scale_report.h"

namespace zdp::launcher {

// The Amdahl curve is sampled at kAmdahlSamples world sizes from 1 to the largest run,
// up to where it exceeds twice that size or (s < 0) reaches its pole.
inline constexpr int kAmdahlSamples = 64;

std::string scale_svg(const ScaleReport& report, const std::string& title);

}  // namespace zdp::launcher
