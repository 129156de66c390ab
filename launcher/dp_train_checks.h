// What dp-train's ranks would refuse or ignore, said by dp-launch before any rank starts
// (--dry-run too) rather than in every rank's log once the job runs: the CPU ranks' fp32
// GEMM against a 16-bit model.dtype, the mlp's fp32-only arithmetic, arguments dp-train
// would read as settings, a missing token file or resume checkpoint, and the settings
// that do nothing at the world size this launch resolved. Another launch.program reads
// the config as it likes: none of this applies to it.
#pragma once

#include <string>
#include <vector>

#include "launcher/launch_plan.h"

namespace zdp::launcher {

// Whether `program` (launch.program; empty: the default) is dp-train.
bool runs_dp_train(const std::string& program);

// Appends to `errors` what stops the launch and to plan->notes / plan->inert what a dry
// run or the console should say. A dry run on a machine without CUDA devices plans for a
// node with GPUs: what only this machine's lack of them refuses is a note there.
void check_dp_train_ranks(const Config& config, const PlanInputs& inputs, LaunchPlan* plan,
                          std::vector<std::string>* errors);

}  // namespace zdp::launcher
