// The SVG primitives every zdp plot is drawn with (line_chart.h, bar_chart.h): an element
// buffer with rectangles, lines, polylines, circles and escaped text, round axis ticks,
// and the palette. Hand-written SVG: the charts are a few dozen elements, and a plotting
// library would add a runtime dependency to every program that writes one
// (plot/README.md says which were considered).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace zdp::plot {

// Text for an XML attribute or element: & < > " escaped.
std::string escape(const std::string& text);
// A coordinate with one decimal ("12.5"): enough for a screen, short in the file.
std::string coord(double v);

// The n-th colour of a palette of 10 that stays distinguishable in print (Tableau 10).
const char* palette(size_t n);

// Round ticks covering [lo, hi]: steps of 1, 2 or 5 x 10^k, about `target` of them. `lo`
// and `hi` are widened to whole steps; `values` runs from lo to hi inclusive.
struct Ticks {
  double lo = 0, hi = 1, step = 1;
  std::vector<double> values;
};
Ticks nice_ticks(double lo, double hi, int target = 5);
// A tick's label with as many decimals as the step needs ("0.25", "40", "1.5k").
std::string tick_label(double value, double step);

// An SVG fragment being built: elements in drawing order, positioned in pixels.
class Svg {
 public:
  void rect(double x, double y, double w, double h, const std::string& fill, const std::string& extra = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, const std::string& extra = "");
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                const std::string& extra = "");
  void circle(double cx, double cy, double r, const std::string& fill);
  // anchor: "start", "middle" or "end"; `extra` adds attributes (font-weight, transform).
  void text(double x, double y, const std::string& s, const char* anchor = "middle", int size = 12,
            const std::string& extra = "");
  // <g attrs>...</g> around what is drawn between open and close.
  void open_group(const std::string& attrs);
  void close_group();
  // Another fragment, drawn at (x, y) as a nested <svg> of its size.
  void place(const Svg& other, double x, double y, double width, double height);
  const std::string& body() const { return body_; }

 private:
  std::string body_;
};

// A whole picture: a fragment and its size.
struct Picture {
  double width = 0, height = 0;
  Svg svg;
};

// The document: <svg xmlns=... width height> on a white background, the picture, </svg>.
std::string to_document(const Picture& picture);

// Pictures one above the other, left-aligned, as one picture as wide as the widest.
Picture stack_vertically(const std::vector<Picture>& pictures);

// Estimated width in pixels of `text` at `size` (sans-serif): for laying out labels.
double text_width(const std::string& text, int size);

}  // namespace zdp::plot
