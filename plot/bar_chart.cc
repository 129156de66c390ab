// bar_chart(): axis, grouped stacked bars, labels, reference lines and legend (bar_chart.h).
#include "plot/bar_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace zdp::plot {
namespace {

constexpr double kBar = 34, kGap = 8, kGroupGap = 36, kLeft = 70, kTop = 62, kPlot = 300, kLegend = 170;
constexpr double kLineFactor = 5;  // a reference line drawn up to this many times the tallest bar

// A value that is negative or not finite (a model's NaN) is left out of the bar: it has no
// height to draw (std::max(NaN, 0) was NaN, and every coordinate after it 0).
double drawn_value(double v) { return std::isfinite(v) && v > 0 ? v : 0.0; }

bool has_missing(const Bar& b) {
  for (double v : b.values) {
    if (!std::isfinite(v)) return true;
  }
  return false;
}

double bar_total(const Bar& b) {
  double t = 0;
  for (double v : b.values) t += drawn_value(v);
  return t;
}

}  // namespace

Picture bar_chart(const BarChart& c) {
  auto slots = [&](const BarGroup& g) { return std::max(g.bars.size(), c.min_slots); };
  double tallest = 0;
  double plot_w = kGroupGap / 2;
  for (const BarGroup& g : c.groups) {
    plot_w += static_cast<double>(slots(g)) * (kBar + kGap) + kGroupGap;
    for (const Bar& b : g.bars) tallest = std::max(tallest, bar_total(b));
  }
  std::vector<const RefLine*> drawn, above;
  for (const RefLine& l : c.lines) {
    (l.value <= kLineFactor * std::max(tallest, 1e-300) ? drawn : above).push_back(&l);
  }
  double top = tallest;
  for (const RefLine* l : drawn) top = std::max(top, l->value);
  const Ticks yt = nice_ticks(0, top > 0 ? top : 1);
  double legend = kLegend;
  for (const std::string& name : c.categories) legend = std::max(legend, 40 + text_width(name, 11));
  for (const RefLine& l : c.lines) legend = std::max(legend, 40 + text_width(l.name + " (above the chart)", 11));
  const double width = std::max({kLeft + plot_w + legend, kLeft + text_width(c.title, 15) + 20,
                                 kLeft + text_width(c.subtitle, 11) + 20});
  const double plot_right = kLeft + plot_w;
  auto y_of = [&](double v) { return kTop + kPlot - kPlot * v / yt.hi; };

  Picture pic;
  pic.width = width;
  pic.height = kTop + kPlot + 66;
  Svg& svg = pic.svg;
  svg.text(kLeft, 24, c.title, "start", 15, " font-weight=\"bold\"");
  if (!c.subtitle.empty()) svg.text(kLeft, 44, c.subtitle, "start", 11);
  for (double v : yt.values) {
    svg.line(kLeft, y_of(v), plot_right, y_of(v), "#e4e4e4");
    svg.text(kLeft - 6, y_of(v) + 4, tick_label(v, yt.step), "end", 11);
  }
  const double mid = kTop + kPlot / 2;
  svg.text(18, mid, c.y_label, "middle", 12, " transform=\"rotate(-90 18 " + coord(mid) + ")\"");

  double x = kLeft + kGroupGap / 2;
  for (const BarGroup& g : c.groups) {
    const double group_begin = x;
    x += static_cast<double>(slots(g) - g.bars.size()) * (kBar + kGap) / 2;  // centre a short group
    for (const Bar& b : g.bars) {
      const double total = bar_total(b);
      char value[32];
      std::snprintf(value, sizeof(value), total >= 100 ? "%.0f" : "%.3g", total);
      if (has_missing(b)) std::snprintf(value, sizeof(value), "n/a");  // part of it unknown: no total
      svg.open_group("class=\"bar\" data-group=\"" + escape(g.label) + "\" data-label=\"" + escape(b.label) +
                     "\" data-total=\"" + escape(value) + "\"");
      double base = 0;
      for (size_t k = 0; k < b.values.size() && k < c.categories.size(); ++k) {
        const double h = drawn_value(b.values[k]);
        if (h <= 0) continue;
        svg.rect(x, y_of(base + h), kBar, y_of(base) - y_of(base + h), palette(k),
                 " data-category=\"" + escape(c.categories[k]) + "\"");
        base += h;
      }
      if (b.outlined) svg.rect(x, y_of(base), kBar, y_of(0) - y_of(base), "none", " stroke=\"black\" stroke-dasharray=\"3,2\"");
      svg.close_group();
      svg.text(x + kBar / 2, y_of(base) - 4, value, "middle", 9);
      svg.text(x + kBar / 2, kTop + kPlot + 14, b.label, "middle", 10);
      x += kBar + kGap;
    }
    x = group_begin + static_cast<double>(slots(g)) * (kBar + kGap);
    const double centre = (group_begin + x - kGap) / 2;
    svg.text(centre, kTop + kPlot + 32, g.label, "middle", 12, " font-weight=\"bold\"");
    svg.text(centre, kTop + kPlot + 48, g.caption, "middle", 10);
    x += kGroupGap;
  }
  svg.line(kLeft, y_of(0), plot_right, y_of(0), "black");
  svg.line(kLeft, kTop, kLeft, y_of(0), "black");
  for (const RefLine* l : drawn) {
    svg.open_group("class=\"refline\" data-name=\"" + escape(l->name) + "\"");
    svg.line(kLeft, y_of(l->value), plot_right, y_of(l->value), "#c00", " stroke-width=\"1.5\" stroke-dasharray=\"8,4\"");
    svg.close_group();
  }

  const double lx = plot_right + 16;
  double ly = kTop + 4;
  for (size_t k = c.categories.size(); k-- > 0; ly += 20) {  // top to bottom, as stacked
    svg.rect(lx, ly, 14, 14, palette(k));
    svg.text(lx + 20, ly + 12, c.categories[k], "start", 11);
  }
  for (const RefLine& l : c.lines) {
    const bool is_drawn = std::find(drawn.begin(), drawn.end(), &l) != drawn.end();
    if (is_drawn) svg.line(lx, ly + 7, lx + 14, ly + 7, "#c00", " stroke-width=\"1.5\" stroke-dasharray=\"4,2\"");
    svg.text(lx + 20, ly + 12, l.name + (is_drawn ? "" : " (above the chart)"), "start", 11);
    ly += 20;
  }
  return pic;
}

}  // namespace zdp::plot
