// `dp-launch plan --from-profile DIR`: the GPU step model's prediction (gpu_step_model.h)
// beside what a profiled GPU run measured (kernel_profile_file.h), region by region; the
// efficiencies the measurement implies (each kind of work over the datasheet rate times the
// measured time); and the prediction again with those efficiencies, which the world-size
// table then uses. Pure arithmetic (profile_compare_test checks it by hand).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "planner/gpu_step_model.h"
#include "planner/kernel_profile_file.h"
#include "zdp/status.h"

namespace zdp::launcher {

struct RegionComparison {
  trainer::KernelRegion region = trainer::KernelRegion::kAdamW;
  double predicted_s = 0;        // per step, the sum of the region's kernels
  int64_t predicted_launches = 0;
  double flops = 0, bytes = 0;   // per step, the region's kernels
  bool compute_bound = false;    // the region's larger predicted part is bound by FLOPs
  double measured_s = -1;        // per step; < 0: not measured
  double measured_entries = 0;   // regions entered per step
};

// The efficiency classes calibrated: GpuEfficiency's matmul, attention_matmul,
// fused_attention and memory.
inline constexpr int kNumEfficiencyClasses = 4;
const char* efficiency_class_name(int c);  // "matmul", "attention GEMMs", "fused attention", "memory"

struct ProfileComparison {
  std::string gpu;                       // the GPU table's name
  std::vector<RegionComparison> rows;    // in the order the step runs them
  std::vector<std::string> unpredicted;  // measured regions the prediction has no kernel for
  double predicted_regions_s = 0, measured_regions_s = 0;  // over the rows measured
  GpuStepPrediction predicted;           // with the assumed efficiencies
  double measured_step_s = -1;           // rank 0's mean step (profile.jsonl); < 0: none
  GpuEfficiency assumed, calibrated;
  // Per class: what the measurement implies (before clamping to 100%), < 0 when no kernel
  // of the class was measured.
  std::array<double, kNumEfficiencyClasses> implied{};
  GpuStepPrediction recalibrated;        // with `calibrated`
  // Whether any class was measured (else `calibrated` is the assumed efficiencies).
  bool any_calibrated() const {
    for (double v : implied) {
      if (v > 0) return true;
    }
    return false;
  }
};

// `shape`: the config's model (accum_steps, fused_attention, the world size and stage,
// and from a version-3 profile the engine's buckets, reduce dtype, accumulation,
// determinism and the DGELU choice are taken from the profile, which is what ran).
// kInvalidArgument when the profile is of another model, dtype or micro-batch (naming the
// field and both values) or of no GPU.
StatusOr<ProfileComparison> compare_with_profile(GptShape shape, const GpuSpec& gpu, const GpuEfficiency& assumed,
                                                 const MeasuredKernels& measured);

// What the calibration cannot carry over from the profile to the config `shape` plans
// (`dtype`: the config's model.dtype): one "  note: ..." line for each setting the two ran
// differently (attention path, 16-bit dtype, DGELU epilogue, determinism, reduce dtype,
// accumulation); "" when they agree.
std::string profile_differences(const GptShape& shape, const std::string& dtype, const MeasuredKernels& measured);

std::string format_comparison(const ProfileComparison& c, const MeasuredKernels& measured, const GpuSpec& gpu);

}  // namespace zdp::launcher
