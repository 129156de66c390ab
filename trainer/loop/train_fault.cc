// Parsing and running $ZDP_TRAIN_FAULT.
#include "trainer/loop/train_fault.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "core/internal/key_value_list.h"

namespace zdp::trainer {

const char* to_string(TrainPhase phase) {
  switch (phase) {
    case TrainPhase::kForward: return "forward";
    case TrainPhase::kOptimizer: return "optimizer";
    case TrainPhase::kAfterStep: return "after_step";
  }
  return "?";
}

StatusOr<TrainFault> parse_train_fault(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument,
                  "ZDP_TRAIN_FAULT=\"" + text + "\": " + why +
                      " (expected \"rank=R,step=S[,attempt=A][,phase=after_step|forward|optimizer]"
                      "[,action=kill|stop|slow|drop|fail|exit0][,ms=M]\")");
  };
  TrainFault fault;
  StatusOr<std::vector<KeyValue>> items = split_key_values(text);
  if (!items.ok()) return bad(items.status().message());
  bool has_rank = false, has_step = false;
  for (const KeyValue& item : *items) {
    const std::string& key = item.key;
    const std::string& value = item.value;
    if (key == "phase") {
      if (value == "forward") fault.phase = TrainPhase::kForward;
      else if (value == "optimizer") fault.phase = TrainPhase::kOptimizer;
      else if (value == "after_step") fault.phase = TrainPhase::kAfterStep;
      else return bad("unknown phase '" + value + "'");
      continue;
    }
    if (key == "action") {
      if (value != "kill" && value != "stop" && value != "slow" && value != "drop" && value != "fail" &&
          value != "exit0") {
        return bad("unknown action '" + value + "'");
      }
      fault.action = value;
      continue;
    }
    const int64_t max = key == "rank" || key == "attempt" ? INT32_MAX
                        : key == "step"                  ? INT64_MAX
                        : key == "ms"                    ? kMaxHookPauseMs
                                                         : -1;
    if (max < 0) return bad("unknown field '" + key + "'");
    const StatusOr<int64_t> v = integer_value(item, 0, max);
    if (!v.ok()) return bad(v.status().message());
    if (key == "rank") {
      fault.rank = static_cast<int>(*v);
      has_rank = true;
    } else if (key == "step") {
      fault.step = *v;
      has_step = true;
    } else if (key == "attempt") {
      fault.attempt = static_cast<int>(*v);
    } else {
      fault.ms = *v;
    }
  }
  if (!has_rank || !has_step) return bad("rank and step are required");
  return fault;
}

void run_train_fault(const TrainFault& fault, Context& ctx) {
  std::string what = fault.action == "kill"   ? "killing this rank"
                     : fault.action == "stop" ? "stopping this rank (SIGSTOP)"
                     : fault.action == "slow" ? "pausing this rank for " + std::to_string(fault.ms) + " ms"
                     : fault.action == "fail" ? "ending this rank with exit code 1"
                     : fault.action == "exit0" ? "ending this rank with exit code 0"
                                              : "dropping this rank's connections";
  what += fault.phase == TrainPhase::kAfterStep ? " after step "
          : fault.phase == TrainPhase::kForward ? " before the forward pass of step "
                                                : " before the optimizer step of step ";
  std::fprintf(stderr, "dp-train: rank %d: ZDP_TRAIN_FAULT: %s%lld (attempt %d)\n", ctx.rank(), what.c_str(),
               static_cast<long long>(fault.step), ctx.launch_env().attempt);
  std::fflush(nullptr);
  if (fault.action == "kill") {
    ::raise(SIGKILL);
  } else if (fault.action == "stop") {
    ::raise(SIGSTOP);
  } else if (fault.action == "slow") {
    std::this_thread::sleep_for(std::chrono::milliseconds(fault.ms));
  } else if (fault.action == "drop") {
    ctx.comm().abort("ZDP_TRAIN_FAULT: this rank's connections were dropped");
  } else if (fault.action == "fail" || fault.action == "exit0") {
    ::_exit(fault.action == "fail" ? 1 : 0);  // at once: no Context release, as a process that dies
  }
}

}  // namespace zdp::trainer
