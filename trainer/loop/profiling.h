// dp-train's profiling runs ([profile] enabled): the zdp::Profiler with the model's
// throughput numbers, and the test hook that slows one rank down on purpose.
#pragma once

#include <chrono>
#include <memory>

#include "trainer/models/model.h"
#include "zdp/config.h"
#include "zdp/context.h"
#include "zdp/engine.h"
#include "zdp/profiler.h"

namespace zdp::trainer {

// The profiler of config.profile for `model` (tokens and FLOPs per sample, its
// description) with `dp-launch plan`'s memory model as the plan; `peak_flops` (one
// rank's) when profile.peak_tflops is 0; `first_step`: the step the loop starts at (a
// resumed run's).
std::unique_ptr<Profiler> make_profiler(Context& ctx, Engine& engine, const Config& config, const Model& model,
                                        double peak_flops, int64_t first_step, std::FILE* out);

// TEST HOOK, for the straggler report's test only: ZDP_PROFILE_TEST_DELAY="rank=R,ms=M"
// makes rank R of a profiled run sleep M milliseconds at the end of each micro-batch's
// backward. Zero when the variable is unset (one getenv at start-up, nothing per step) or
// names another rank; kInvalidArgument when it is malformed.
StatusOr<std::chrono::milliseconds> profile_test_delay(int rank);

}  // namespace zdp::trainer
