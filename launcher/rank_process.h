// One rank as a child process: spawned with its own environment, in its own process
// group (so a stop reaches whatever it started), its output through a pipe, and killed
// by the kernel if the launcher itself dies (no rank outlives its launcher).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "zdp/status.h"

namespace zdp::launcher {

struct RankSpec {
  int rank = 0;
  std::vector<std::string> argv;              // argv[0] is the program
  std::map<std::string, std::string> env;     // set on top of the launcher's environment
  // A close-on-exec descriptor of the launcher's that the rank inherits (the lifeline's
  // read end, runtime/internal/lifeline.h); -1: none.
  int inherited_fd = -1;
};

// How a rank ended.
struct ExitInfo {
  bool exited = false;  // false while running
  int code = 0;         // exit status when it exited normally
  int signal = 0;       // the signal that killed it, 0 if none
  bool ok() const { return exited && signal == 0 && code == 0; }
  std::string describe() const;  // "exit code 3", "killed by signal 9 (SIGKILL)" (what zdp's codes mean: the supervisor)
};

class RankProcess {
 public:
  // Forks and execs `spec`; stdout and stderr of the child go to output_fd().
  static StatusOr<RankProcess> spawn(const RankSpec& spec);

  RankProcess(RankProcess&& other) noexcept;
  RankProcess& operator=(RankProcess&& other) noexcept;
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;
  ~RankProcess();  // kills and reaps a child still running

  int rank() const { return rank_; }
  pid_t pid() const { return pid_; }
  // Read end of the child's output pipe (non-blocking); -1 once closed.
  int output_fd() const { return output_fd_; }
  void close_output();

  // Reaps the child if it has ended; returns its state either way.
  const ExitInfo& poll();
  const ExitInfo& exit_info() const { return exit_; }
  bool running() const { return pid_ > 0 && !exit_.exited; }
  // Sends `sig` to the rank's whole process group.
  void signal_group(int sig) const;

 private:
  RankProcess() = default;
  int rank_ = -1;
  pid_t pid_ = -1;
  int output_fd_ = -1;
  ExitInfo exit_;
};

}  // namespace zdp::launcher
