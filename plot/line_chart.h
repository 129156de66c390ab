// Line charts: numbered series of (x, y) points on a left and an optional right y axis,
// with round ticks, a grid, a legend and notes. loss.svg (trainer/loop/loss_plot.h) and
// scale.svg (planner/scale_plot.h) are drawn with it.
//
// Every series is one <g class="series" data-name="..." data-axis="left|right"
// data-points="N"> holding a <polyline> of its N points and/or N <circle> markers, so a
// test (or a script) can find each series and count its points.
#pragma once

#include <string>
#include <vector>

#include "plot/svg.h"

namespace zdp::plot {

enum class Axis { kLeft, kRight };
enum class Mark { kLine, kDashedLine, kPoints, kLineAndPoints };

struct Series {
  std::string name;
  std::vector<double> x, y;  // the same length; points with a non-finite coordinate are left out
  Axis axis = Axis::kLeft;
  Mark mark = Mark::kLine;   // a line of fewer than 2 points is drawn as points
  std::string color;         // "" = the palette's colour for the series' index
};

struct LineChart {
  std::string title, subtitle;
  std::string x_label, y_label, y2_label;  // y2: the right axis, drawn when a series uses it
  std::vector<Series> series;
  bool y_from_zero = false;   // the left axis includes 0
  bool y2_from_zero = true;   // the right axis includes 0
  bool x_integer = false;     // x ticks at whole numbers only (steps, world sizes)
  std::vector<std::string> notes;  // lines under the legend
};

// The chart as a picture (to_document() makes the file). A chart without any finite point
// is drawn with empty axes and its legend.
Picture line_chart(const LineChart& chart);

}  // namespace zdp::plot
