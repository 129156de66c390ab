// memory.svg of a profiling run: stacked bars of bytes per rank by category, one group per
// ZeRO stage 0-3. The run's stage shows each rank's measured bytes beside the planned bar;
// the other stages show the planner's model (no rank ran them), labelled as such.
// Drawn by the plotting module (plot/bar_chart.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "zdp/device.h"

namespace zdp::profile {

struct MemoryBar {
  std::string label;                                  // "rank 0", "planned"
  std::array<int64_t, kNumMemCategories> bytes{};      // MemCategory order; < 0: not planned (missing: total n/a)
  bool measured = false;
};

struct StageBars {
  int stage = 0;
  std::string caption;            // "measured (this run)", "planned", "not planned: ..."
  std::vector<MemoryBar> bars;
};

std::string memory_svg(const std::string& title, const std::vector<StageBars>& stages);

}  // namespace zdp::profile
