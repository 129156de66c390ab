// `dp-launch plan --from-profile DIR --baseline DIR0`: two profiled runs of one model on one
// kind of device, region by region: what a change of kernels did, measured side by side
// (the GPU check runs a baseline build beside the current one on the same card, so that
// a change is judged against that card's figures, not against another machine's run).
// Two CPU runs as well: `plan` then prints this table alone, there being no step model.
// Pure arithmetic (profile_diff_test checks it by hand).
#pragma once

#include <string>
#include <vector>

#include "planner/kernel_profile_file.h"
#include "zdp/status.h"

namespace zdp::launcher {

struct RegionDiff {
  trainer::KernelRegion region = trainer::KernelRegion::kAdamW;
  double baseline_s = -1;  // per step; < 0: the baseline has no such region
  double measured_s = -1;  // per step; < 0: the measured run has none
};

struct ProfileDiff {
  std::vector<RegionDiff> rows;  // every region either run has, in the step's order
  // Over the regions both runs have (a region in one run only is its own row, outside these).
  double baseline_both_s = 0, measured_both_s = 0;
  // Over every region of each run.
  double baseline_regions_s = 0, measured_regions_s = 0;
  double baseline_step_s = -1, measured_step_s = -1;  // profile.jsonl's mean step; < 0: none
};

// A region "moved" when its time changed by at least this fraction (the GPU check's runs
// spread by a few percent a region between machines; side by side on one card, less).
inline constexpr double kMovedFraction = 0.03;

// kInvalidArgument (naming the field and both values) when the two runs are of another
// model, dtype, micro-batch or accumulation, or ran on different devices. The two may differ
// in attention (fused or batched): that is a change worth measuring.
StatusOr<ProfileDiff> diff_profiles(const MeasuredKernels& measured, const MeasuredKernels& baseline);

// The table: each region's baseline and measured ms a step, their ratio and difference;
// the totals; and one line "moved by 3% or more: NAME B -> M ms (R); ..." (or "none").
std::string format_profile_diff(const ProfileDiff& d, const MeasuredKernels& measured, const MeasuredKernels& baseline);

}  // namespace zdp::launcher
