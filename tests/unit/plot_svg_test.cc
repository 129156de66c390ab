// The plotting module (plot/) and the pictures drawn with it: round ticks, line charts
// (non-finite points left out, the right axis), bar charts (reference lines drawn or named
// above the chart), loss.svg, scale.svg and plan.svg. Every file is checked by a real XML
// parser and rendered to PNG by rsvg-convert (testing/check_svg.py).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include "planner/plan_plot.h"
#include "planner/scale_plot.h"
#include "plot/bar_chart.h"
#include "plot/line_chart.h"
#include "plot/svg.h"
#include "testing/svg_check.h"
#include "testing/temp_dir.h"
#include "trainer/loop/loss_plot.h"

namespace zdp {
namespace {

std::string write(const testing::TempDir& dir, const std::string& name, const std::string& svg) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << svg;
  return path;
}

TEST(PlotTicks, RoundStepsCoverTheRange) {
  const plot::Ticks t = plot::nice_ticks(0, 0.93);
  EXPECT_DOUBLE_EQ(t.step, 0.2);
  EXPECT_DOUBLE_EQ(t.lo, 0);
  EXPECT_NEAR(t.hi, 1.0, 1e-12);
  EXPECT_EQ(t.values.size(), 6u);
  const plot::Ticks u = plot::nice_ticks(1.7, 5.55);
  EXPECT_DOUBLE_EQ(u.step, 1);
  EXPECT_DOUBLE_EQ(u.lo, 1);
  EXPECT_DOUBLE_EQ(u.hi, 6);
  // Values within 2x of DBL_MAX: the last tick was infinite and the loop never ended.
  for (const auto& [lo, hi] : {std::pair{0.0, 1.6e308}, std::pair{-1.7e308, 1.7e308}, std::pair{1.7e308, 1.7e308}}) {
    const plot::Ticks huge = plot::nice_ticks(lo, hi);
    EXPECT_TRUE(std::isfinite(huge.hi) && std::isfinite(huge.step)) << lo << " " << hi;
    EXPECT_GE(huge.values.size(), 2u);
    EXPECT_LE(huge.values.size(), 12u);
  }
  const plot::Ticks one = plot::nice_ticks(3, 3);  // a single value still gets a range
  EXPECT_LT(one.lo, 3);
  EXPECT_GT(one.hi, 3);
  // Subnormal values (5e-324 .. 1e-323): a tenth of them underflowed to 0, the step with
  // it, and every tick was NaN (every point drawn at 0). They get a unit range.
  const plot::Ticks tiny = plot::nice_ticks(5e-324, 1e-323);
  EXPECT_GT(tiny.step, 0);
  EXPECT_LE(tiny.lo, 0);
  EXPECT_GE(tiny.hi, 1e-323);
  for (double v : tiny.values) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(plot::tick_label(0.25, 0.05), "0.25");
  EXPECT_EQ(plot::tick_label(40000, 20000), "40k");
  EXPECT_EQ(plot::tick_label(0, 20000), "0");
  // Neighbouring ticks never share a label (a review found "10.000k" four times for
  // 10000.1 .. 10000.4, "1.000M" for steps 1,000,000 .. 1,000,002, "0.000000" for a 1e-9
  // range, and "15000000G" for 1.5e16).
  const auto distinct = [](double first, double step, int n) {
    std::set<std::string> seen;
    for (int i = 0; i < n; ++i) seen.insert(plot::tick_label(first + i * step, step));
    return static_cast<int>(seen.size()) == n;
  };
  EXPECT_TRUE(distinct(10000.1, 0.1, 6));
  EXPECT_TRUE(distinct(1000000, 1, 3));
  EXPECT_TRUE(distinct(1e-9, 2e-10, 5));
  EXPECT_TRUE(distinct(1.5e16, 1e15, 4));
  EXPECT_TRUE(distinct(0.1, 0.05, 6));
  EXPECT_EQ(plot::tick_label(10000.1, 0.1), "10000.1");
  EXPECT_EQ(plot::tick_label(1000001, 1), "1000001");
  EXPECT_EQ(plot::tick_label(1.5e16, 1e15), "1.50e+16");
  EXPECT_EQ(plot::tick_label(2e12, 1e12), "2T");
  EXPECT_EQ(plot::tick_label(1.5e6, 5e5), "1.5M");
}

TEST(PlotLineChart, SeriesKeepTheirFinitePointsOnBothAxes) {
  testing::TempDir dir;
  plot::LineChart c;
  c.title = "a <title> & more";
  c.x_label = "step";
  c.y_label = "loss";
  c.y2_label = "rate";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  c.series.push_back({"left", {1, 2, 3, 4, 5}, {2, 1.5, nan, 1.2, 1.1}, plot::Axis::kLeft, plot::Mark::kLine, ""});
  c.series.push_back({"right", {1, 5}, {100, 300}, plot::Axis::kRight, plot::Mark::kLineAndPoints, ""});
  c.series.push_back({"single", {3}, {1.4}, plot::Axis::kLeft, plot::Mark::kLine, ""});  // drawn as a marker
  const std::string svg = plot::to_document(plot::line_chart(c));
  EXPECT_NE(svg.find("a &lt;title&gt; &amp; more"), std::string::npos);
  const testing::CommandRun r =
      testing::check_svg(ZDP_SOURCE_DIR, write(dir, "line.svg", svg), {"--series", "left=4", "--series", "right=2",
                                                                       "--series", "single=1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // The checker itself fails on a wrong count.
  const testing::CommandRun wrong = testing::check_svg(ZDP_SOURCE_DIR, dir.path() + "/line.svg", {"--series", "left=5"});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("series 'left' has 4 points, expected 5"), std::string::npos) << wrong.output;
}

// Whole-number x values over a short range (steps 1-3, world sizes 1 and 3) were put on
// an axis from lo to lo + 1: the last point was drawn at x = 1110 in a 600-wide plot.
TEST(PlotLineChart, WholeNumbersOnAShortRangeStayInsideThePlot) {
  for (const std::vector<double>& xs : std::vector<std::vector<double>>{{1, 2, 3}, {1, 3}, {2, 4}, {1, 2}, {7}, {0, 5}}) {
    plot::LineChart c;
    c.x_integer = true;
    c.series.push_back({"s", xs, std::vector<double>(xs.size(), 1.0), plot::Axis::kLeft, plot::Mark::kLineAndPoints, ""});
    const std::string svg = plot::to_document(plot::line_chart(c));
    // Every coordinate pair of the series' polyline and markers lies within the plot's
    // x extent: 70 (left axis) to 590 (its right end).
    // The series' own group (the legend's marker lies right of the plot, as it should).
    const size_t open = svg.find("class=\"series\"");
    ASSERT_NE(open, std::string::npos) << svg;
    const std::string group = svg.substr(open, svg.find("</g>", open) - open);
    std::vector<double> drawn;
    const std::regex polyline(" points=\"([^\"]*)\""), circle(" cx=\"([0-9.]+)\"");
    for (auto it = std::sregex_iterator(group.begin(), group.end(), polyline); it != std::sregex_iterator(); ++it) {
      std::istringstream pairs((*it)[1].str());
      for (std::string xy; pairs >> xy;) drawn.push_back(std::stod(xy.substr(0, xy.find(','))));
    }
    for (auto it = std::sregex_iterator(group.begin(), group.end(), circle); it != std::sregex_iterator(); ++it) {
      drawn.push_back(std::stod((*it)[1].str()));
    }
    int seen = 0;
    for (const double x : drawn) {
      EXPECT_GE(x, 70.0) << svg;
      EXPECT_LE(x, 590.0 + 1e-9) << "x values " << xs.front() << ".." << xs.back() << "\n" << svg;
      ++seen;
    }
    EXPECT_GT(seen, 0) << svg;
  }
}

TEST(PlotBarChart, AReferenceLineFarAboveTheBarsIsNamedNotDrawn) {
  testing::TempDir dir;
  plot::BarChart c;
  c.title = "bars";
  c.categories = {"a", "b"};
  c.groups = {{"g1", "first", {{"x", {1, 2}, false}, {"y", {2, 2}, true}}}, {"g2", "", {{"x", {3, -1}, false}}}};
  c.lines = {{"near", 5}, {"far", 1000}};
  const std::string svg = plot::to_document(plot::bar_chart(c));
  EXPECT_NE(svg.find("far (above the chart)"), std::string::npos);
  EXPECT_EQ(svg.find("data-name=\"far\""), std::string::npos);
  const testing::CommandRun r =
      testing::check_svg(ZDP_SOURCE_DIR, write(dir, "bars.svg", svg), {"--bars", "3", "--refline", "near"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A NaN or infinite value is missing: no height, and the bar's total reads n/a (it was
// data-total="nan" over a rectangle collapsed to 0, with every later one drawn from 0).
TEST(PlotBarChart, NonFiniteValuesAreMissingNotDrawn) {
  plot::BarChart c;
  c.categories = {"a", "b", "c"};
  c.groups = {{"g", "", {{"x", {1, std::nan(""), 2}, false}, {"y", {INFINITY, 1, 1}, false}, {"z", {1, 1, 1}, false}}}};
  const std::string svg = plot::to_document(plot::bar_chart(c));
  EXPECT_EQ(svg.find("nan"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("inf"), std::string::npos) << svg;
  EXPECT_NE(svg.find("data-label=\"x\" data-total=\"n/a\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("data-label=\"z\" data-total=\"3\""), std::string::npos) << svg;
  // x's drawn part is 1 + 2 = 3, as tall as z: the same top.
  const auto top_of = [&](const std::string& label) {
    const size_t g = svg.find("data-label=\"" + label + "\"");
    const size_t close = svg.find("</g>", g);
    double top = 1e9;
    for (size_t at = svg.find(" y=\"", g); at < close; at = svg.find(" y=\"", at + 1)) {
      top = std::min(top, std::stod(svg.substr(at + 4)));
    }
    return top;
  };
  EXPECT_DOUBLE_EQ(top_of("x"), top_of("z"));
}

TEST(LossSvg, TrainHeldOutAndRateSeries) {
  testing::TempDir dir;
  trainer::LossHistory h;
  for (int s = 1; s <= 40; ++s) h.add_step(s, 5.0 / s, 1000 + s);
  for (int s : {0, 20, 40}) h.add_eval(s, 5.0 / (s + 1));
  const std::string svg = trainer::loss_svg(h, "mlp, 2 ranks", 10);
  EXPECT_NE(svg.find("resumed at step 10"), std::string::npos);
  const testing::CommandRun r = testing::check_svg(
      ZDP_SOURCE_DIR, write(dir, "loss.svg", svg),
      {"--series", "train loss=40", "--series", "held-out loss=3", "--series", "tokens/s=40"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(ScaleSvg, MeasuredIdealAmdahlAndThroughput) {
  testing::TempDir dir;
  std::vector<launcher::ScalePoint> points(3);
  points[0] = {1, 2, 16, 10, 0.1, 50.0, 0, 0, "1"};
  points[1] = {2, 2, 32, 10, 0.125, 80.0, 0, 0, "2"};
  points[2] = {4, 2, 64, 10, 0.16, 125.0, 0, 0, "4"};
  const launcher::ScaleReport report = launcher::make_scale_report(points).value();
  const std::string svg = launcher::scale_svg(report, "scale");
  char amdahl[64];
  std::snprintf(amdahl, sizeof(amdahl), "Amdahl fit, serial fraction s = %.3f=%d", report.fit->serial_fraction,
                launcher::kAmdahlSamples);
  const testing::CommandRun r = testing::check_svg(ZDP_SOURCE_DIR, write(dir, "scale.svg", svg),
                                                   {"--series", "measured speed-up=3", "--series", "samples/s=3",
                                                    "--series", "ideal (speed-up = K)=2", "--series", amdahl});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(svg.find("no run of one rank"), std::string::npos);
  // Without a run of one rank the speed-up is K = 2's samples/s over 2: the subtitle says so.
  const std::vector<launcher::ScalePoint> from_two(points.begin() + 1, points.end());
  const std::string two = launcher::scale_svg(launcher::make_scale_report(from_two).value(), "scale");
  EXPECT_NE(two.find("(estimated as K = 2's / 2: no run of one rank)"), std::string::npos) << two;
}

// Better than linear (s < 0): the law has a pole at K = (1 - s) / -s, which the fit keeps
// past the largest K, and the curve is drawn up to it whole, reaching the measured points
// it fits: it was cut at twice the largest K (8 here, the fit reaching 13.9 at K = 4;
// 3.9 with a speed-up of 7.6 at K = 2), mid-air below the points.
TEST(ScaleSvg, ANegativeSerialFractionsCurveReachesTheMeasuredSpeedups) {
  testing::TempDir dir;
  std::vector<launcher::ScalePoint> points(3);
  points[0] = {1, 2, 16, 100, 3.36, 4.8, 0, 0, "1"};  // measured on a loaded machine: s = -0.24
  points[1] = {2, 2, 32, 100, 0.895, 35.8, 0, 0, "2"};
  points[2] = {4, 2, 64, 100, 0.970, 66.0, 0, 0, "4"};
  for (size_t runs : {3u, 2u}) {
    const std::vector<launcher::ScalePoint> some(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(runs));
    const launcher::ScaleReport report = launcher::make_scale_report(some).value();
    ASSERT_LT(report.fit->serial_fraction, 0);
    const double s = report.fit->serial_fraction;
    EXPECT_GT((1 - s) / -s, static_cast<double>(some.back().world_size)) << "the pole is past the largest K";
    const std::string svg = launcher::scale_svg(report, "scale");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(svg, m, std::regex(R"re(data-name="Amdahl fit[^"]*" data-axis="left" data-points="(\d+)")re")));
    EXPECT_EQ(std::stoi(m[1]), launcher::kAmdahlSamples) << runs << " runs";
    EXPECT_EQ(svg.find("the fit leaves the chart"), std::string::npos);
    const testing::CommandRun r = testing::check_svg(ZDP_SOURCE_DIR, write(dir, "scale.svg", svg),
                                                     {"--series", "measured speed-up=" + std::to_string(runs)});
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

TEST(PlanSvg, MemoryAndStepTimeBarsPerWorldAndStage) {
  testing::TempDir dir;
  StatusOr<Config> config = load_config(std::string(ZDP_SOURCE_DIR) + "/configs/quickstart.toml", {});
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  launcher::PlannerInputs in;
  in.worlds = {2, 4};
  in.device_memory = int64_t{24} << 20;  // near the bars: the line is drawn
  in.memory_origin = "test";
  in.link = {50e-6, 2e9, "test"};
  in.flops_per_s = 20e9;
  in.flops_origin = "test";
  const launcher::PlanReport report = launcher::build_plan_report(*config, "quickstart.toml", in).value();
  const std::string svg = launcher::plan_svg(report, in);
  EXPECT_NE(svg.find("2 ranks (configured)"), std::string::npos);
  const testing::CommandRun r = testing::check_svg(ZDP_SOURCE_DIR, write(dir, "plan.svg", svg),
                                                   {"--bars", "16", "--refline", "device memory per rank"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Text that goes into an SVG (host and device names from profiles) is escaped for XML, and
// a C0 control character (which XML 1.0 cannot hold at all) becomes '?'.
TEST(PlotSvg, EscapedTextIsValidXmlText) {
  EXPECT_EQ(plot::escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
  EXPECT_EQ(plot::escape(std::string("host\x1b[2J\x07\0x", 11)), "host?[2J??x");
  EXPECT_EQ(plot::escape("tab\tline\n"), "tab\tline\n");
  // A byte that starts no UTF-8 sequence (a Latin-1 file name) becomes '?'; XML parsers
  // refused the SVG. Valid sequences stay whole.
  EXPECT_EQ(plot::escape("caf\xe9 \xc3\xa9 \xe2\x9c\x93 \xc3"), "caf? \xc3\xa9 \xe2\x9c\x93 ?");
  // U+FFFE and U+FFFF are UTF-8 but not XML characters; U+FFFD stays.
  EXPECT_EQ(plot::escape("\xef\xbf\xbe \xef\xbf\xbf \xef\xbf\xbd"), "? ? \xef\xbf\xbd");
}

}  // namespace
}  // namespace zdp
