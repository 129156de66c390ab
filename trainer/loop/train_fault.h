// Fault injection for tests of restarts and resumes: $ZDP_TRAIN_FAULT =
// "rank=R,step=S[,attempt=A]" makes rank R kill itself with SIGKILL right after step S
// (before that step's checkpoint), in launcher attempt A ($ZDP_ATTEMPT) only when given,
// so a job run with launch.max_restarts dies once and then resumes. The checkpoint's own
// fault points (during a save) are $ZDP_CKPT_FAULT (zdp/checkpoint.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "zdp/status.h"

namespace zdp::trainer {

struct TrainFault {
  int rank = 0;
  int64_t step = 0;
  std::optional<int> attempt;  // any attempt when absent

  bool fires(int rank_now, int64_t done, int attempt_now) const {
    return rank_now == rank && done == step && (!attempt || *attempt == attempt_now);
  }
};

// Parses the variable's value. kInvalidArgument naming the variable, the text and what is
// wrong (an unknown or repeated field, a missing rank or step, a value that is not a
// non-negative integer).
StatusOr<TrainFault> parse_train_fault(const std::string& text);

}  // namespace zdp::trainer
