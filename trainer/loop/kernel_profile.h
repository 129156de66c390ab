// dp-train's per-kernel timing (profile.kernels, gpt only): on rank 0 a KernelTimer
// (trainer/models/kernel_regions.h) times the model's kernel regions over the profile's
// measured steps (the same warm-up and active steps as zdp::Profiler), and at the end
// rank 0 writes <profile dir>/kernels.json and prints the regions' mean time per step.
// `dp-launch plan CONFIG --from-profile DIR` reads the file (planner/kernel_profile_file.h).
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "trainer/models/kernel_regions.h"
#include "trainer/models/model.h"
#include "trainer/models/ops.h"
#include "zdp/config.h"
#include "zdp/context.h"
#include "zdp/engine.h"

namespace zdp::trainer {

class KernelProfile {
 public:
  // Null (nothing to do) unless profile.enabled and profile.kernels, on rank 0. Attaches
  // the timer to `ops`. REQUIRES: engine finalized, ops' stream set; all outlive this.
  static StatusOr<std::unique_ptr<KernelProfile>> create(Context& ctx, Engine& engine, Ops& ops, const Config& config,
                                                         const Model& model, int64_t first_step);
  ~KernelProfile();

  // Around each training iteration's micro-batches: `step` is the trainer's step number.
  void begin_step(int64_t step);
  void end_step();
  // After the last step: waits for the compute stream, writes kernels.json and prints the
  // table to `out` (when not null).
  Status finish(std::FILE* out);

 private:
  KernelProfile(Engine& engine, Ops& ops, const Config& config, const Model& model, int64_t first_step,
                std::unique_ptr<KernelTimer> timer);
  Engine& engine_;
  Ops& ops_;
  const Config& config_;
  const Model& model_;
  const int64_t first_step_;
  std::unique_ptr<KernelTimer> timer_;
  bool armed_ = false;
};

}  // namespace zdp::trainer
