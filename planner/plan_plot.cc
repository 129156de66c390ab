// plan_svg(): the plan as two bar-chart panels (plan_plot.h).
#include "planner/plan_plot.h"

#include <algorithm>

#include "plot/bar_chart.h"

namespace zdp::launcher {
namespace {

constexpr double kMiB = 1024.0 * 1024.0, kGiB = 1024.0 * kMiB;

std::string world_label(const WorldPlan& w, bool configured) {
  return std::to_string(w.world_size) + (w.world_size == 1 ? " rank" : " ranks") + (configured ? " (configured)" : "");
}

}  // namespace

std::string plan_svg(const PlanReport& rep, const PlannerInputs& in) {
  // MiB, or GiB for models whose ranks hold several of them.
  int64_t largest = 0;
  for (const WorldPlan& w : rep.worlds) {
    for (const StagePlan& s : w.stages) largest = std::max(largest, s.total);
  }
  const bool gib = largest >= (int64_t{4} << 30);
  const double unit = gib ? kGiB : kMiB;
  const std::string unit_name = gib ? "GiB" : "MiB";
  plot::BarChart memory;
  memory.title = "dp-launch plan: " + rep.model.description;
  memory.subtitle = unit_name + " per rank by category for each ZeRO stage; dashed outline = the recommended stage";
  memory.y_label = unit_name + " per rank";
  memory.categories = {"params", "grads", "optimizer", "buckets", "workspace", "activations, other"};
  memory.lines.push_back({"device memory per rank: " + format_bytes(in.device_memory), static_cast<double>(in.device_memory) / unit});
  plot::BarChart time;
  time.title = "predicted step time";
  time.subtitle = "compute + the communication that overlap does not hide (the assumptions are in plan.jsonl)";
  time.y_label = "ms per step";
  time.categories = {"compute", "exposed communication"};
  for (const WorldPlan& w : rep.worlds) {
    const std::string label = world_label(w, &w == &rep.worlds.front());
    const std::string caption = "global batch " + std::to_string(w.global_batch);
    plot::BarGroup mem{label, caption, {}}, step{label, caption, {}};
    for (const StagePlan& s : w.stages) {
      const MemoryPlan& p = s.memory;
      const bool recommended = s.stage == w.recommended;
      const std::string name = "stage " + std::to_string(s.stage);
      const double engine = static_cast<double>(p.total());
      mem.bars.push_back({name,
                          {static_cast<double>(p.bytes(MemCategory::kParams)) / unit,
                           static_cast<double>(p.bytes(MemCategory::kGrads)) / unit,
                           static_cast<double>(p.bytes(MemCategory::kOptimizer)) / unit,
                           static_cast<double>(p.bytes(MemCategory::kBuckets)) / unit,
                           static_cast<double>(p.bytes(MemCategory::kWorkspace)) / unit,
                           (static_cast<double>(s.total) - engine) / unit},
                          recommended});
      step.bars.push_back({name, {s.time.compute_s * 1e3, s.time.exposed_comm_s * 1e3}, recommended});
    }
    memory.groups.push_back(std::move(mem));
    time.groups.push_back(std::move(step));
  }
  return plot::to_document(plot::stack_vertically({plot::bar_chart(memory), plot::bar_chart(time)}));
}

}  // namespace zdp::launcher
