// The SVG primitives (svg.h).
#include "plot/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/internal/utf8.h"

namespace zdp::plot {

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    // A byte that starts no valid UTF-8 sequence (a Latin-1 file name) made an SVG XML
    // parsers refuse ("not proper UTF-8"): '?' instead. A valid sequence is copied whole.
    if (static_cast<unsigned char>(ch) >= 0x80) {
      const size_t n = utf8_sequence_length(text, i);
      // U+FFFE and U+FFFF are valid UTF-8 but not XML characters (expat refuses the file).
      const bool not_xml = n == 3 && static_cast<unsigned char>(text[i]) == 0xEF &&
                           static_cast<unsigned char>(text[i + 1]) == 0xBF &&
                           static_cast<unsigned char>(text[i + 2]) >= 0xBE;
      if (n == 0) {
        out += '?';
      } else {
        if (not_xml) out += '?';
        else out.append(text, i, n);
        i += n - 1;
      }
      continue;
    }
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\t':
      case '\n':
      case '\r': out += ch; break;
      default:
        // XML 1.0 has no other C0 control character, even as a reference: a host name
        // holding one made an SVG no viewer opens.
        if (static_cast<unsigned char>(ch) < 0x20) {
          out += '?';
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", std::isfinite(v) ? v : 0.0);
  return buf;
}

const char* palette(size_t n) {
  static const char* const kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                        "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kColors[n % (sizeof(kColors) / sizeof(kColors[0]))];
}

Ticks nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  // Within 2x of DBL_MAX the last tick rounded up to infinity and the loop below never
  // ended (a summary's 1.6e308 samples/s): such values are drawn at the bound.
  constexpr double kLargest = 1e300;
  lo = std::clamp(lo, -kLargest, kLargest);
  hi = std::clamp(hi, -kLargest, kLargest);
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {  // one value: give it room
    // Values too small for a tenth of them to be a normal double (subnormals: the tick
    // step underflowed to 0, every tick was NaN and every point drawn at 0) get a unit.
    const double pad = std::fabs(lo) < 1e-290 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * p;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * p >= raw) {
      step = m * p;
      break;
    }
  }
  Ticks t;
  t.step = step;
  t.lo = std::floor(lo / step + 1e-9) * step;
  t.hi = std::ceil(hi / step - 1e-9) * step;
  for (double v = t.lo; v <= t.hi + step / 2 && t.values.size() < 1000; v += step) {
    t.values.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  }
  return t;
}

std::string tick_label(double value, double step) {
  if (value == 0) return "0";
  char buf[48];
  const double a = std::fabs(value), s = std::fabs(step) > 0 ? std::fabs(step) : a;
  const double mag = std::max(a, s);
  // The decimals that tell neighbouring ticks apart: the step's, in the label's unit.
  const auto decimals_in = [&](double unit) {
    return std::max(0, static_cast<int>(std::ceil(-std::log10(s / unit) - 1e-9)));
  };
  if (std::isfinite(mag) && mag < 1e15) {
    if (mag >= 1e4) {  // 40k, 1.5M: a suffix while it needs few decimals (10000.1 is not 10.000k)
      const double unit = mag >= 1e12 ? 1e12 : mag >= 1e9 ? 1e9 : mag >= 1e6 ? 1e6 : 1e3;
      const char* suffix = mag >= 1e12 ? "T" : mag >= 1e9 ? "G" : mag >= 1e6 ? "M" : "k";
      const int d = decimals_in(unit);
      if (d <= 3) {
        std::snprintf(buf, sizeof(buf), "%.*f%s", d, value / unit, suffix);
        return buf;
      }
    }
    const int d = decimals_in(1.0);
    if (d <= 6) {
      std::snprintf(buf, sizeof(buf), "%.*f", d, value);
      return buf;
    }
  }
  // Very large or small, or a step far below the values: scientific, with the significant
  // digits the step needs.
  const int digits = std::max(0, static_cast<int>(std::ceil(std::log10(mag / s) - 1e-9)));
  std::snprintf(buf, sizeof(buf), "%.*e", std::min(digits, 15), value);
  return buf;
}

void Svg::rect(double x, double y, double w, double h, const std::string& fill, const std::string& extra) {
  body_ += "<rect x=\"" + coord(x) + "\" y=\"" + coord(y) + "\" width=\"" + coord(std::max(w, 0.0)) + "\" height=\"" +
           coord(std::max(h, 0.0)) + "\" fill=\"" + fill + "\"" + extra + "/>\n";
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke, const std::string& extra) {
  body_ += "<line x1=\"" + coord(x1) + "\" y1=\"" + coord(y1) + "\" x2=\"" + coord(x2) + "\" y2=\"" + coord(y2) +
           "\" stroke=\"" + stroke + "\"" + extra + "/>\n";
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                   const std::string& extra) {
  body_ += "<polyline fill=\"none\" stroke=\"" + stroke + "\"" + extra + " points=\"";
  for (size_t i = 0; i < points.size(); ++i) {
    body_ += (i == 0 ? "" : " ") + coord(points[i].first) + "," + coord(points[i].second);
  }
  body_ += "\"/>\n";
}

void Svg::circle(double cx, double cy, double r, const std::string& fill) {
  body_ += "<circle cx=\"" + coord(cx) + "\" cy=\"" + coord(cy) + "\" r=\"" + coord(r) + "\" fill=\"" + fill + "\"/>\n";
}

void Svg::text(double x, double y, const std::string& s, const char* anchor, int size, const std::string& extra) {
  body_ += "<text x=\"" + coord(x) + "\" y=\"" + coord(y) + "\" text-anchor=\"" + anchor + "\" font-size=\"" +
           std::to_string(size) + "\"" + extra + ">" + escape(s) + "</text>\n";
}

void Svg::open_group(const std::string& attrs) { body_ += "<g " + attrs + ">\n"; }

void Svg::close_group() { body_ += "</g>\n"; }

void Svg::place(const Svg& other, double x, double y, double width, double height) {
  body_ += "<svg x=\"" + coord(x) + "\" y=\"" + coord(y) + "\" width=\"" + coord(width) + "\" height=\"" +
           coord(height) + "\">\n" + other.body() + "</svg>\n";
}

std::string to_document(const Picture& p) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + coord(p.width) + "\" height=\"" + coord(p.height) +
         "\" viewBox=\"0 0 " + coord(p.width) + " " + coord(p.height) +
         "\" font-family=\"sans-serif\">\n<rect x=\"0\" y=\"0\" width=\"" + coord(p.width) + "\" height=\"" +
         coord(p.height) + "\" fill=\"white\"/>\n" + p.svg.body() + "</svg>\n";
}

Picture stack_vertically(const std::vector<Picture>& pictures) {
  Picture out;
  for (const Picture& p : pictures) {
    out.svg.place(p.svg, 0, out.height, p.width, p.height);
    out.height += p.height;
    out.width = std::max(out.width, p.width);
  }
  return out;
}

double text_width(const std::string& text, int size) { return 0.58 * size * static_cast<double>(text.size()); }

}  // namespace zdp::plot
