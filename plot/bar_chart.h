// Stacked bar charts in groups: each bar stacks its values by category (bottom up), each
// group has a label and a caption below it, horizontal reference lines mark a limit. The
// profiler's memory.svg (profile/src/memory_svg.h) and plan.svg (planner/plan_plot.h) are
// drawn with it.
//
// Every bar is one <g class="bar" data-group="..." data-label="..." data-total="...">
// holding a <rect data-category="..."> per non-zero category; every reference line a
// <g class="refline" data-name="...">, so that a test can find and count them.
#pragma once

#include <string>
#include <vector>

#include "plot/svg.h"

namespace zdp::plot {

struct Bar {
  std::string label;
  std::vector<double> values;  // per category, in the chart's order; negative counts as 0, non-finite
                               // as missing (no height; the bar's total reads "n/a")
  bool outlined = false;       // a dashed outline (e.g. "measured", against planned bars)
};

struct BarGroup {
  std::string label;    // bold, under the group ("stage 2", "4 ranks")
  std::string caption;  // smaller, under the label
  std::vector<Bar> bars;
};

struct RefLine {
  std::string name;  // the legend's text, e.g. "device memory per rank: 80 GiB"
  double value = 0;
};

struct BarChart {
  std::string title, subtitle, y_label;
  std::vector<std::string> categories;  // legend top-down = stacked top-down
  std::vector<BarGroup> groups;
  // A line more than 5x above the tallest bar would flatten the bars: it is not drawn, and
  // the legend says it is above the chart.
  std::vector<RefLine> lines;
  size_t min_slots = 1;  // a group is at least this many bars wide (room for captions)
  // The total printed above each bar: whole numbers from 100 up, 3 significant digits below.
};

Picture bar_chart(const BarChart& chart);

}  // namespace zdp::plot
