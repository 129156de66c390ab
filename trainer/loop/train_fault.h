// Fault injection for tests of restarts, resumes and liveness: $ZDP_TRAIN_FAULT =
// "rank=R,step=S[,attempt=A][,phase=P][,action=X][,ms=M]" makes rank R act at phase P of
// step S (steps count from 1), in launcher attempt A ($ZDP_ATTEMPT) only when given, so
// a job run with launch.max_restarts dies once and then resumes.
//   phase  after_step (default; step S done, before its checkpoint) | forward (before
//          the first micro-batch of step S) | optimizer (before step S's engine.step(),
//          with its gradient reductions in flight)
//   action kill (default: SIGKILL) | stop (SIGSTOP) | slow (sleep M ms, default 5000) |
//          drop (abort the communicator: its connections close under the peers) |
//          fail (_exit(1): a rank that fails on its own) | exit0 (_exit(0) mid-job: a
//          wrapper script that lost dp-train's exit status)
// The checkpoint's own fault points (during a save) are $ZDP_CKPT_FAULT (zdp/checkpoint.h);
// a fault inside a chosen collective is $ZDP_TEST_COMM (runtime/src/comm/comm_test_hook.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "zdp/context.h"
#include "zdp/status.h"

namespace zdp::trainer {

enum class TrainPhase { kForward, kOptimizer, kAfterStep };
const char* to_string(TrainPhase phase);

struct TrainFault {
  int rank = 0;
  int64_t step = 0;
  std::optional<int> attempt;  // any attempt when absent
  TrainPhase phase = TrainPhase::kAfterStep;
  std::string action = "kill";
  int64_t ms = 5000;

  bool fires(int rank_now, int64_t step_now, int attempt_now, TrainPhase phase_now = TrainPhase::kAfterStep) const {
    return rank_now == rank && step_now == step && phase_now == phase && (!attempt || *attempt == attempt_now);
  }
};

// Parses the variable's value. kInvalidArgument naming the variable, the text and what is
// wrong (an unknown or repeated field, a missing rank or step, a value that is not a
// non-negative integer, an unknown phase or action).
StatusOr<TrainFault> parse_train_fault(const std::string& text);

// Does what `fault` says to this rank (says so on stderr first). Returns after "slow" and
// "drop"; "kill" does not return, "stop" returns only if the rank is continued.
void run_train_fault(const TrainFault& fault, Context& ctx);

}  // namespace zdp::trainer
