// memory_svg(): the stages as groups of stacked bars in MiB, drawn by plot/bar_chart.h.
#include "profile/src/memory_svg.h"

#include <limits>

#include "plot/bar_chart.h"

namespace zdp::profile {

std::string memory_svg(const std::string& title, const std::vector<StageBars>& stages) {
  constexpr double kMiB = 1024.0 * 1024.0;
  plot::BarChart chart;
  chart.title = title;
  chart.subtitle = "bytes per rank by category (MiB); dashed outline = measured on a rank, plain = planned";
  chart.y_label = "MiB per rank";
  for (int c = 0; c < kNumMemCategories; ++c) {
    const MemCategory cat = static_cast<MemCategory>(c);
    chart.categories.push_back(cat == MemCategory::kOther ? "activations, other" : to_string(cat));
  }
  chart.min_slots = 2;  // the captions of groups with one bar do not collide
  for (const StageBars& s : stages) {
    plot::BarGroup group{"stage " + std::to_string(s.stage), s.caption, {}};
    for (const MemoryBar& b : s.bars) {
      plot::Bar bar{b.label, {}, b.measured};
      // -1: a category the plan does not cover (the engine's own plan has no activations):
      // missing, so the bar's total reads "n/a" rather than a total without it.
      for (int64_t v : b.bytes) {
        bar.values.push_back(v < 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(v) / kMiB);
      }
      group.bars.push_back(std::move(bar));
    }
    chart.groups.push_back(std::move(group));
  }
  return plot::to_document(plot::bar_chart(chart));
}

}  // namespace zdp::profile
