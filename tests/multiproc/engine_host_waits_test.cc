// The engine's step never waits on the host where a GPU engine would not: on 2 CPU ranks
// (forked, Gloo), at every stage, with local and sharded accumulation, fp16 loss scaling
// and overlapped parameter gathers, the host-wait counters (runtime/internal/host_waits.h)
// see no synchronize, no synchronous copy and no event wait inside step_async(); only the
// CPU compute stream's waits for the communication stream (stream_order), which a CUDA
// engine leaves to the GPU. step_stats() then reads the step's outcome.
#include <gtest/gtest.h>

#include <string>

#include "runtime/internal/host_waits.h"
#include "testing/engine_comparisons.h"
#include "testing/engine_runs.h"

namespace zdp {
namespace {

using testing::TinyMlp;

Status run_rank(const EngineOptions& options, int rank, int world, Store& store) {
  ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, world, store));
  Engine engine(ctx, options);
  ZDP_ASSIGN_OR_RETURN(TinyMlp model, TinyMlp::create(engine));
  ZDP_RETURN_IF_ERROR(engine.finalize());
  const int64_t accum = engine.accum_steps();
  const int64_t per_micro = 24 / (world * accum);
  int64_t stream_order = 0;
  for (int step = 0; step < 4; ++step) {
    for (int64_t m = 0; m < accum; ++m) {
      const int64_t first = (m * world + rank) * per_micro;
      Status s = kernels::dispatch_float(options.compute_dtype, "run", [&](auto t) -> Status {
        return model.train_micro<decltype(t)>(engine, step, first, per_micro).status();
      });
      ZDP_RETURN_IF_ERROR(s);
    }
    const HostWaits before = host_waits();
    ZDP_RETURN_IF_ERROR(engine.step_async());
    const HostWaits after = host_waits();
    if (after.blocking() != before.blocking()) {
      return Status(StatusCode::kInternal,
                    "rank " + std::to_string(rank) + ", step " + std::to_string(step) + ": step_async() waited on the host: " +
                        std::to_string(after.synchronize - before.synchronize) + " synchronize, " +
                        std::to_string(after.copies - before.copies) + " synchronous copies, " +
                        std::to_string(after.event_waits - before.event_waits) + " event waits");
    }
    stream_order += after.stream_order - before.stream_order;
    ZDP_ASSIGN_OR_RETURN(StepStats stats, engine.step_stats());
    if (stats.step != step + 1 || !(stats.grad_norm > 0) || stats.skipped) {
      return Status(StatusCode::kInternal, "rank " + std::to_string(rank) + ": step_stats() after step " +
                                               std::to_string(step) + ": step " + std::to_string(stats.step) +
                                               ", grad norm " + std::to_string(stats.grad_norm));
    }
  }
  // The CPU compute stream does wait for the reductions (on the host, being this thread).
  if (stream_order == 0) return Status(StatusCode::kInternal, "no stream-order wait was counted: the counter is broken");
  return Status::Ok();
}

void expect_no_host_waits(const EngineOptions& o, const std::string& what) {
  const auto results = testing::fork_ranks(2, [&](int rank, int world, Store& store) { return run_rank(o, rank, world, store); });
  EXPECT_EQ(testing::describe_failures(results), "") << what;
}

TEST(EngineHostWaits, NoneInsideAStepAtAnyStage) {
  for (int stage = 0; stage <= 3; ++stage) {
    expect_no_host_waits(testing::comparison_options(stage), "stage " + std::to_string(stage));
  }
}

TEST(EngineHostWaits, NoneWithAccumulationLoss16AndOverlappedGathers) {
  for (int stage : {0, 2, 3}) {
    EngineOptions local = testing::comparison_options(stage);
    local.accum_steps = 2;
    expect_no_host_waits(local, "local accumulation, stage " + std::to_string(stage));
    if (stage >= 2) {
      EngineOptions sharded = local;
      sharded.zero.accumulate = GradAccumulation::kSharded;
      expect_no_host_waits(sharded, "sharded accumulation, stage " + std::to_string(stage));
    }
  }
  EngineOptions fp16 = testing::comparison_options(1);
  fp16.compute_dtype = DType::kF16;
  fp16.loss_scale.initial = 256.0;
  expect_no_host_waits(fp16, "fp16 loss scaling, stage 1");
  EngineOptions overlap = testing::comparison_options(2);
  overlap.overlap_param_gather = true;
  expect_no_host_waits(overlap, "overlap_param_gather, stage 2");
}

}  // namespace
}  // namespace zdp
