// loss_svg(): a LossHistory as a line chart (loss_plot.h).
#include "trainer/loop/loss_plot.h"

#include <filesystem>

#include "plot/line_chart.h"

namespace zdp::trainer {

std::string loss_svg(const LossHistory& history, const std::string& title, int64_t resumed_at) {
  plot::LineChart chart;
  chart.title = title;
  chart.subtitle = "mean loss over the global batch per step";
  if (history.stride() > 1) chart.subtitle += " (each point the mean of " + std::to_string(history.stride()) + " steps)";
  if (resumed_at > 0) chart.subtitle += "; resumed at step " + std::to_string(resumed_at) + ", earlier steps from the checkpoint";
  chart.x_label = "step";
  chart.y_label = "loss (nats per token)";
  chart.y2_label = "tokens/s";
  chart.x_integer = true;
  plot::Series train{"train loss", {}, {}, plot::Axis::kLeft, plot::Mark::kLine, plot::palette(0)};
  plot::Series rate{"tokens/s", {}, {}, plot::Axis::kRight, plot::Mark::kLine, "#b8b8b8"};
  for (const LossHistory::Point& p : history.points()) {
    train.x.push_back(static_cast<double>(p.step));
    train.y.push_back(p.loss);
    rate.x.push_back(static_cast<double>(p.step));
    rate.y.push_back(p.tokens_per_s);
  }
  plot::Series held_out{"held-out loss", {}, {}, plot::Axis::kLeft, plot::Mark::kLineAndPoints, plot::palette(2)};
  for (const auto& [step, loss] : history.evals()) {
    held_out.x.push_back(static_cast<double>(step));
    held_out.y.push_back(loss);
  }
  chart.series = {rate, train, held_out};  // the rate first: drawn under the losses
  return plot::to_document(plot::line_chart(chart));
}

std::string loss_svg_path(const std::string& log_dir) { return (std::filesystem::path(log_dir) / "loss.svg").string(); }

}  // namespace zdp::trainer
