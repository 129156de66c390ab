// dp-train's progress record for dp-launch's status line (runtime/internal/job_progress.h):
// after the first step it holds that step's loss and an ETA. It was published before the
// first step's window closed, so the status line read "ETA ?" and no loss for the whole
// second step (a whole step of minutes on a large GPU job).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/internal/job_progress.h"
#include "testing/engine_runs.h"
#include "testing/fork_ranks.h"
#include "testing/temp_dir.h"
#include "trainer/loop/train_loop.h"

namespace zdp::trainer {
namespace {

TEST(TrainProgress, TheFirstStepsRecordHasItsLossAndAnEta) {
  testing::TempDir dir;
  const std::string report = dir.file("record");
  Config c;
  c.model.kind = ModelKind::kMlp;
  c.model.n_layers = 1, c.model.d_model = 8, c.model.vocab_size = 4;
  c.train.global_batch = 4, c.train.micro_batch = 4, c.train.steps = 3;
  c.train.log_every = 1000;  // only the first and the last step are logged
  c.optim.warmup_steps = 0;
  const std::string failures = testing::describe_failures(testing::fork_ranks(1, [&](int rank, int k, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, k, store, 1, c));
    TrainOptions options;
    options.out = std::fopen("/dev/null", "w");
    options.at_phase = [&](Context& at, int64_t step, TrainPhase phase) {
      if (step != 1 || phase != TrainPhase::kAfterStep) return;
      StatusOr<std::string> text = at.store().get(job_keys::kProgress, std::chrono::seconds(5));
      StatusOr<JobProgress> p = text.ok() ? decode_job_progress(*text) : StatusOr<JobProgress>(text.status());
      std::ofstream out(report);
      if (!p.ok()) {
        out << p.status().to_string();
      } else {
        out << p->step << " " << (p->loss >= 0 ? "loss" : "no-loss") << " " << (p->eta_s >= 0 ? "eta" : "no-eta");
      }
    };
    StatusOr<TrainSummary> s = train(ctx, c, options);
    std::fclose(options.out);
    return s.status();
  }));
  ASSERT_EQ(failures, "");
  std::stringstream text;
  text << std::ifstream(report).rdbuf();
  EXPECT_EQ(text.str(), "1 loss eta");
}

}  // namespace
}  // namespace zdp::trainer
