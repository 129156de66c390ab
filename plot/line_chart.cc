// line_chart(): axes, grid, series and legend (line_chart.h).
#include "plot/line_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace zdp::plot {
namespace {

constexpr double kLeft = 70, kTop = 62, kPlotW = 520, kPlotH = 300, kAxis2 = 64, kLegend = 210, kBottom = 56;

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

bool finite_point(const Series& s, size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); }

Ticks axis_ticks(Range r, bool from_zero) {
  if (r.empty()) r.lo = 0, r.hi = 1;
  if (from_zero) r.add(0);
  return nice_ticks(r.lo, r.hi);
}

}  // namespace

Picture line_chart(const LineChart& c) {
  Range xr, yr, y2r;
  bool right = false;
  for (const Series& s : c.series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    right |= s.axis == Axis::kRight;
    for (size_t i = 0; i < n; ++i) {
      if (!finite_point(s, i)) continue;
      xr.add(s.x[i]);
      (s.axis == Axis::kRight ? y2r : yr).add(s.y[i]);
    }
  }
  Ticks xt = axis_ticks(xr, false);
  if (c.x_integer && xt.step < 1) {
    // A short range of whole numbers (steps 1-3, world sizes 1 and 3): a tick at each, the
    // axis from the first to the last (at least two). Ticks of 0.5 were forced to
    // {lo, lo + 1} before, and the points past lo + 1 fell outside the picture.
    const double lo = std::floor(xr.empty() ? 0.0 : xr.lo);
    const double hi = std::max(std::ceil(xr.empty() ? 1.0 : xr.hi), lo + 1);
    xt.step = 1;
    xt.lo = lo;
    xt.hi = hi;
    xt.values.clear();
    for (double v = lo; v <= hi; v += 1) xt.values.push_back(v);
  }
  const Ticks yt = axis_ticks(yr, c.y_from_zero);
  const Ticks y2t = axis_ticks(y2r, c.y2_from_zero);
  const double plot_right = kLeft + kPlotW;
  double legend = kLegend;  // wide enough for its longest entry
  for (const Series& s : c.series) legend = std::max(legend, 52 + text_width(s.name + " (right)", 11));
  for (const std::string& note : c.notes) legend = std::max(legend, 24 + text_width(note, 10));
  const double width = std::max({plot_right + (right ? kAxis2 : 16) + legend, kLeft + text_width(c.title, 15) + 20,
                                 kLeft + text_width(c.subtitle, 11) + 20});
  const double height = kTop + kPlotH + kBottom;
  auto px = [&](double x) { return kLeft + kPlotW * (x - xt.lo) / (xt.hi - xt.lo); };
  auto py = [&](double y, const Ticks& t) { return kTop + kPlotH - kPlotH * (y - t.lo) / (t.hi - t.lo); };

  Picture pic;
  pic.width = width;
  pic.height = height;
  Svg& svg = pic.svg;
  svg.text(kLeft, 24, c.title, "start", 15, " font-weight=\"bold\"");
  if (!c.subtitle.empty()) svg.text(kLeft, 44, c.subtitle, "start", 11);
  for (double v : yt.values) {  // the grid follows the left axis
    svg.line(kLeft, py(v, yt), plot_right, py(v, yt), "#e4e4e4");
    svg.text(kLeft - 6, py(v, yt) + 4, tick_label(v, yt.step), "end", 11);
  }
  for (double v : xt.values) {
    svg.line(px(v), kTop + kPlotH, px(v), kTop + kPlotH + 4, "black");
    svg.text(px(v), kTop + kPlotH + 17, tick_label(v, xt.step), "middle", 11);
  }
  if (right) {
    for (double v : y2t.values) {
      svg.line(plot_right, py(v, y2t), plot_right + 4, py(v, y2t), "black");
      svg.text(plot_right + 7, py(v, y2t) + 4, tick_label(v, y2t.step), "start", 11);
    }
    svg.line(plot_right, kTop, plot_right, kTop + kPlotH, "black");
    const double mid = kTop + kPlotH / 2, x2 = plot_right + kAxis2 - 8;
    svg.text(x2, mid, c.y2_label, "middle", 12,
             " transform=\"rotate(90 " + coord(x2) + " " + coord(mid) + ")\"");
  }
  svg.line(kLeft, kTop, kLeft, kTop + kPlotH, "black");
  svg.line(kLeft, kTop + kPlotH, plot_right, kTop + kPlotH, "black");
  svg.text(kLeft + kPlotW / 2, kTop + kPlotH + 40, c.x_label, "middle", 12);
  const double mid = kTop + kPlotH / 2;
  svg.text(18, mid, c.y_label, "middle", 12, " transform=\"rotate(-90 18 " + coord(mid) + ")\"");

  const double lx = plot_right + (right ? kAxis2 : 16) + 12;
  double ly = kTop + 4;
  for (size_t k = 0; k < c.series.size(); ++k) {
    const Series& s = c.series[k];
    const std::string color = s.color.empty() ? palette(k) : s.color;
    const Ticks& t = s.axis == Axis::kRight ? y2t : yt;
    std::vector<std::pair<double, double>> points;
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (finite_point(s, i)) points.emplace_back(px(s.x[i]), py(s.y[i], t));
    }
    const bool line = (s.mark != Mark::kPoints) && points.size() >= 2;
    const bool dots = s.mark == Mark::kPoints || s.mark == Mark::kLineAndPoints || points.size() < 2;
    const std::string dash = s.mark == Mark::kDashedLine ? " stroke-dasharray=\"6,4\"" : "";
    svg.open_group("class=\"series\" data-name=\"" + escape(s.name) + "\" data-axis=\"" +
                   (s.axis == Axis::kRight ? "right" : "left") + "\" data-points=\"" + std::to_string(points.size()) +
                   "\"");
    if (line) svg.polyline(points, color, " stroke-width=\"1.6\"" + dash);
    if (dots) {
      for (const auto& [x, y] : points) svg.circle(x, y, 3.2, color);
    }
    svg.close_group();
    // The legend entry: the series' mark and its name (with the axis when there are two).
    if (line) svg.line(lx, ly + 6, lx + 22, ly + 6, color, " stroke-width=\"2\"" + dash);
    if (dots) svg.circle(lx + 11, ly + 6, 3.2, color);
    svg.text(lx + 28, ly + 10, s.name + (right && s.axis == Axis::kRight ? " (right)" : ""), "start", 11);
    ly += 20;
  }
  ly += 6;
  for (const std::string& note : c.notes) {
    svg.text(lx, ly + 10, note, "start", 10, " fill=\"#444\"");
    ly += 15;
  }
  pic.height = std::max(height, ly + 10);
  return pic;
}

}  // namespace zdp::plot
