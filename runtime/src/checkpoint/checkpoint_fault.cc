// ZDP_CKPT_FAULT: a rank that dies at a chosen point of a checkpoint save, for tests of
// the atomicity promise (checkpoint_fault.h).
#include "runtime/internal/checkpoint_fault.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/internal/key_value_list.h"
#include "core/internal/parse_decimal.h"

namespace zdp::checkpoint {

StatusOr<FaultSpec> parse_fault(const std::string& text) {
  FaultSpec spec;
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument, "ZDP_CKPT_FAULT='" + text + "': " + why +
                                                    " (expected rank=R,at=create|write|checksum|commit|latest"
                                                    "[,step=N][,attempt=A][,action=exit|kill|stop|slow][,ms=M])");
  };
  StatusOr<std::vector<KeyValue>> items = split_key_values(text);
  if (!items.ok()) return bad(items.status().message());
  for (const KeyValue& item : *items) {
    const std::string& key = item.key;
    const std::string& value = item.value;
    if (key == "at") {
      if (value != "create" && value != "write" && value != "checksum" && value != "commit" && value != "latest") {
        return bad("unknown point '" + value + "'");
      }
      spec.at = value;
      continue;
    }
    if (key == "action") {
      if (value != "exit" && value != "kill" && value != "stop" && value != "slow") {
        return bad("unknown action '" + value + "'");
      }
      spec.action = value;
      continue;
    }
    const int64_t max = key == "rank" || key == "attempt" ? INT32_MAX
                        : key == "step"                  ? INT64_MAX
                        : key == "ms"                    ? kMaxHookPauseMs
                                                         : -1;
    if (max < 0) return bad("unknown key '" + key + "'");
    const StatusOr<int64_t> n = integer_value(item, 0, max);
    if (!n.ok()) return bad(n.status().message());
    if (key == "rank") spec.rank = static_cast<int>(*n);
    if (key == "step") spec.step = *n;
    if (key == "attempt") spec.attempt = static_cast<int>(*n);
    if (key == "ms") spec.ms = *n;
  }
  if (spec.rank < 0 || spec.at.empty()) return bad("rank and at are required");
  return spec;
}

Status check_fault_target(int rank, bool creator) {
  const char* text = std::getenv("ZDP_CKPT_FAULT");
  if (text == nullptr || *text == '\0' || creator) return Status::Ok();
  ZDP_ASSIGN_OR_RETURN(const FaultSpec spec, parse_fault(text));
  if (spec.rank != rank || (spec.at != "commit" && spec.at != "latest")) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, std::string("ZDP_CKPT_FAULT='") + text + "': rank " +
                                                  std::to_string(rank) + " does not create checkpoints, so it never reaches '" +
                                                  spec.at + "' (only the creating rank commits: rank 0, or local rank 0 per node)");
}

Status fault_point(const char* point, int rank, int64_t step) {
  const char* text = std::getenv("ZDP_CKPT_FAULT");
  if (text == nullptr || *text == '\0') return Status::Ok();
  ZDP_ASSIGN_OR_RETURN(const FaultSpec spec, parse_fault(text));
  if (spec.rank != rank || spec.at != point || (spec.step >= 0 && spec.step != step)) return Status::Ok();
  if (spec.attempt >= 0) {
    const char* attempt = std::getenv("ZDP_ATTEMPT");
    int64_t now = 0;  // the launcher's first attempt when it is not set
    if (attempt != nullptr && !parse_decimal(attempt, 0, INT32_MAX, &now)) {
      return Status(StatusCode::kInvalidArgument, std::string("ZDP_ATTEMPT='") + attempt + "' is not an attempt number");
    }
    if (now != spec.attempt) return Status::Ok();
  }
  if (spec.action == "exit") {
    std::fprintf(stderr, "rank %d: ZDP_CKPT_FAULT: exiting with code %d at '%s' of the save of step %lld\n", rank,
                 kFaultExitCode, point, static_cast<long long>(step));
  } else {
    std::fprintf(stderr, "rank %d: ZDP_CKPT_FAULT: %s at '%s' of the save of step %lld\n", rank, spec.action.c_str(),
                 point, static_cast<long long>(step));
  }
  std::fflush(stderr);
  if (spec.action == "kill") ::raise(SIGKILL);
  if (spec.action == "stop") ::raise(SIGSTOP);
  if (spec.action == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(spec.ms));
  if (spec.action == "exit") ::_exit(kFaultExitCode);
  return Status::Ok();
}

}  // namespace zdp::checkpoint
