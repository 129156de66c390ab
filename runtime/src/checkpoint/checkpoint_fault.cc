// ZDP_CKPT_FAULT: a rank that dies at a chosen point of a checkpoint save, for tests of
// the atomicity promise (checkpoint_fault.h).
#include "runtime/internal/checkpoint_fault.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <sstream>

namespace zdp::checkpoint {
namespace {

bool parse_int(const std::string& text, int64_t& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtoll(text.c_str(), &end, 10);
  return end != nullptr && *end == '\0';
}

}  // namespace

StatusOr<FaultSpec> parse_fault(const std::string& text) {
  FaultSpec spec;
  std::istringstream in(text);
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument, "ZDP_CKPT_FAULT='" + text + "': " + why +
                                                    " (expected rank=R,at=create|write|checksum|commit|latest"
                                                    "[,step=N][,attempt=A][,action=exit|kill|stop|slow][,ms=M])");
  };
  for (std::string part; std::getline(in, part, ',');) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos) return bad("'" + part + "' is not key=value");
    const std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    int64_t n = 0;
    if (key == "at") {
      if (value != "create" && value != "write" && value != "checksum" && value != "commit" && value != "latest") {
        return bad("unknown point '" + value + "'");
      }
      spec.at = value;
    } else if (key == "action") {
      if (value != "exit" && value != "kill" && value != "stop" && value != "slow") {
        return bad("unknown action '" + value + "'");
      }
      spec.action = value;
    } else if (key == "rank" || key == "step" || key == "attempt" || key == "ms") {
      if (!parse_int(value, n) || n < 0) return bad(key + " '" + value + "' is not an integer >= 0");
      if (key == "rank") spec.rank = static_cast<int>(n);
      if (key == "step") spec.step = n;
      if (key == "attempt") spec.attempt = static_cast<int>(n);
      if (key == "ms") spec.ms = n;
    } else {
      return bad("unknown key '" + key + "'");
    }
  }
  if (spec.rank < 0 || spec.at.empty()) return bad("rank and at are required");
  return spec;
}

Status fault_point(const char* point, int rank, int64_t step) {
  const char* text = std::getenv("ZDP_CKPT_FAULT");
  if (text == nullptr || *text == '\0') return Status::Ok();
  ZDP_ASSIGN_OR_RETURN(const FaultSpec spec, parse_fault(text));
  if (spec.rank != rank || spec.at != point || (spec.step >= 0 && spec.step != step)) return Status::Ok();
  if (spec.attempt >= 0) {
    const char* attempt = std::getenv("ZDP_ATTEMPT");
    if (std::atoi(attempt ? attempt : "0") != spec.attempt) return Status::Ok();
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
