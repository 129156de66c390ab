// scale_svg(): the scaling report as a line chart (scale_plot.h).
#include "planner/scale_plot.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "plot/line_chart.h"

namespace zdp::launcher {

std::string scale_svg(const ScaleReport& report, const std::string& title) {
  plot::LineChart chart;
  chart.title = title;
  const int base = report.rows.empty() ? 1 : report.rows.front().point.world_size;
  chart.subtitle = "same per-rank batch at every world size (weak scaling); speed-up = samples/s over one rank's" +
                   (base == 1 ? std::string()
                              : std::string(" (estimated as K = ") + std::to_string(base) + "'s / " +
                                    std::to_string(base) + ": no run of one rank)");
  chart.x_label = "world size K (ranks)";
  chart.y_label = "speed-up";
  chart.y2_label = "samples/s";
  chart.x_integer = true;
  chart.y_from_zero = true;
  plot::Series measured{"measured speed-up", {}, {}, plot::Axis::kLeft, plot::Mark::kLineAndPoints, plot::palette(0)};
  plot::Series ideal{"ideal (speed-up = K)", {}, {}, plot::Axis::kLeft, plot::Mark::kDashedLine, "#888888"};
  plot::Series rate{"samples/s", {}, {}, plot::Axis::kRight, plot::Mark::kPoints, plot::palette(4)};
  int largest = 1;
  double fastest = 1;  // the largest measured speed-up
  for (const ScaleRow& r : report.rows) {
    fastest = std::max(fastest, r.speedup);
    const double k = r.point.world_size;
    measured.x.push_back(k);
    measured.y.push_back(r.speedup);
    rate.x.push_back(k);
    rate.y.push_back(r.point.samples_per_s);
    largest = std::max(largest, r.point.world_size);
  }
  ideal.x = {1.0, static_cast<double>(largest)};
  ideal.y = ideal.x;
  chart.series = {ideal, measured, rate};
  if (report.fit) {
    char name[96];
    std::snprintf(name, sizeof(name), "Amdahl fit, serial fraction s = %.3f", report.fit->serial_fraction);
    plot::Series amdahl{name, {}, {}, plot::Axis::kLeft, plot::Mark::kLine, plot::palette(2)};
    const double s = report.fit->serial_fraction;
    // s < 0 (better than linear) has a pole at K = (1 - s) / -s: the law means nothing past
    // it, and the curve stops where it leaves the chart's range, which holds every measured
    // point (it stopped at twice the largest K, below a measured speed-up of 7.6 at K = 2
    // that the fit met exactly).
    const double top = std::max(2.0 * largest, 1.25 * fastest);
    bool clipped = false;
    for (int i = 0; i < kAmdahlSamples; ++i) {
      const double k = 1.0 + (largest - 1.0) * i / (kAmdahlSamples - 1);
      const double denominator = s + (1.0 - s) / k;
      if (!(denominator > 0) || 1.0 / denominator > top) {
        clipped = true;
        break;
      }
      amdahl.x.push_back(k);
      amdahl.y.push_back(1.0 / denominator);
    }
    chart.series.push_back(amdahl);
    if (clipped) {
      char pole[128];
      std::snprintf(pole, sizeof(pole), "the fit leaves the chart above speed-up %.3g (its pole: K = %.3g)", top,
                    s < 0 ? (1.0 - s) / -s : 0.0);
      chart.notes.push_back(pole);
    }
    std::snprintf(name, sizeof(name), "1 / (s + (1 - s) / K), rms error %.3f", report.fit->rms_error);
    chart.notes.push_back(name);
  } else {
    chart.notes.push_back("no Amdahl fit: it needs K = 1 and a larger K");
  }
  return plot::to_document(plot::line_chart(chart));
}

}  // namespace zdp::launcher
