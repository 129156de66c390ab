// plan.svg, written by `dp-launch plan` beside plan.jsonl: two panels with a group per
// world size and a bar per ZeRO stage. Above, the bytes per rank stacked by category
// (params, grads, optimizer, buckets, workspace, activations) with the device memory as a
// line; below, the predicted step time as compute + the communication overlap does not
// hide. The recommended stage's bars are outlined (plot/bar_chart.h).
#pragma once

#include <string>

#include "planner/plan_report.h"

namespace zdp::launcher {

std::string plan_svg(const PlanReport& report, const PlannerInputs& in);

}  // namespace zdp::launcher
