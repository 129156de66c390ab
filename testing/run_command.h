// Runs a shell command (stderr folded into stdout) and returns its exit code and output:
// how tests drive the real dp-launch, dp-train, dp-ckpt and python3.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace zdp::testing {

struct CommandRun {
  int exit_code = -1;  // -1 when the command did not exit normally
  std::string output;
};

inline CommandRun run_command(const std::string& command) {
  CommandRun r;
  std::FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace zdp::testing
