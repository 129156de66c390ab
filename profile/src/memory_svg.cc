// memory_svg(): axes, stacked bars, labels and a legend (memory_svg.h).
#include "profile/src/memory_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace zdp::profile {
namespace {

constexpr const char* kColors[kNumMemCategories] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948"};
constexpr double kMiB = 1024.0 * 1024.0;

std::string escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string text(double x, double y, const std::string& s, const char* anchor = "middle", int size = 12,
                 const char* extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\" font-size=\"" +
         std::to_string(size) + "\"" + extra + ">" + escape(s) + "</text>\n";
}

std::string rect(double x, double y, double w, double h, const char* fill, const char* extra = "") {
  return "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
         "\" fill=\"" + fill + "\"" + extra + "/>\n";
}

int64_t bar_total(const MemoryBar& b) {
  int64_t t = 0;
  for (int64_t v : b.bytes) t += std::max<int64_t>(v, 0);
  return t;
}

// A round axis step (1, 2 or 5 x 10^k MiB) giving about 5 ticks up to `top`.
double tick_step(double top) {
  const double raw = std::max(top, 1e-9) / 5.0;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10.0 * p;
}

}  // namespace

std::string memory_svg(const std::string& title, const std::vector<StageBars>& stages) {
  constexpr double kBar = 34, kGap = 8, kGroupGap = 36, kLeft = 70, kTop = 60, kPlot = 300, kLegend = 150;
  // A group is at least two bars wide, so that the captions of empty ones do not collide.
  auto slots = [](const StageBars& s) { return std::max<size_t>(s.bars.size(), 2); };
  double width = kLeft + kLegend;
  int64_t top_bytes = 1;
  for (const StageBars& s : stages) {
    width += static_cast<double>(slots(s)) * (kBar + kGap) + kGroupGap;
    for (const MemoryBar& b : s.bars) top_bytes = std::max(top_bytes, bar_total(b));
  }
  width = std::max(width, kLeft + 9.5 * static_cast<double>(title.size()));  // the title fits
  const double height = kTop + kPlot + 90;
  const double step = tick_step(static_cast<double>(top_bytes) / kMiB);
  const double top_mib = std::ceil(static_cast<double>(top_bytes) / kMiB / step) * step;
  auto y_of = [&](double mib) { return kTop + kPlot - kPlot * mib / top_mib; };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
                    "\" font-family=\"sans-serif\">\n";
  svg += rect(0, 0, width, height, "white");
  svg += text(kLeft, 24, title, "start", 15, " font-weight=\"bold\"");
  svg += text(kLeft, 44, "bytes per rank by category (MiB); dashed outline = measured on a rank, plain = planned", "start", 11);
  for (double v = 0; v <= top_mib + step / 2; v += step) {  // the y axis and its grid
    const double y = y_of(v);
    svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(y) + "\" x2=\"" + num(width - kLegend) + "\" y2=\"" + num(y) +
           "\" stroke=\"#ddd\"/>\n";
    char label[32];
    std::snprintf(label, sizeof(label), step < 1 ? "%.2f" : "%.0f", v);
    svg += text(kLeft - 6, y + 4, label, "end", 11);
  }
  double x = kLeft + kGroupGap / 2;
  for (const StageBars& s : stages) {
    const double group_begin = x;
    x += static_cast<double>(slots(s) - s.bars.size()) * (kBar + kGap) / 2;  // centre a short group
    for (const MemoryBar& b : s.bars) {
      double mib = 0;
      for (int c = 0; c < kNumMemCategories; ++c) {
        const double h = static_cast<double>(std::max<int64_t>(b.bytes[static_cast<size_t>(c)], 0)) / kMiB;
        if (h <= 0) continue;
        svg += rect(x, y_of(mib + h), kBar, y_of(mib) - y_of(mib + h), kColors[c]);
        mib += h;
      }
      if (b.measured) {
        svg += rect(x, y_of(mib), kBar, y_of(0) - y_of(mib), "none", " stroke=\"black\" stroke-dasharray=\"3,2\"");
      }
      char value[32];
      std::snprintf(value, sizeof(value), "%.3g", mib);
      svg += text(x + kBar / 2, y_of(mib) - 4, value, "middle", 9);
      svg += text(x + kBar / 2, kTop + kPlot + 14, b.label, "middle", 10);
      x += kBar + kGap;
    }
    x = group_begin + static_cast<double>(slots(s)) * (kBar + kGap);
    const double mid = (group_begin + x - kGap) / 2;
    svg += text(mid, kTop + kPlot + 34, "stage " + std::to_string(s.stage), "middle", 13, " font-weight=\"bold\"");
    svg += text(mid, kTop + kPlot + 50, s.caption, "middle", 10);
    x += kGroupGap;
  }
  svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(y_of(0)) + "\" x2=\"" + num(width - kLegend) + "\" y2=\"" +
         num(y_of(0)) + "\" stroke=\"black\"/>\n";
  const double lx = width - kLegend + 16;
  for (int c = kNumMemCategories - 1, row = 0; c >= 0; --c, ++row) {  // top to bottom as stacked
    const double y = kTop + 10 + row * 20;
    svg += rect(lx, y, 14, 14, kColors[c]);
    const MemCategory cat = static_cast<MemCategory>(c);
    svg += text(lx + 20, y + 12, cat == MemCategory::kOther ? "activations, other" : to_string(cat), "start", 11);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace zdp::profile
