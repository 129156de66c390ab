// fork/exec of a rank with a pipe for its output, its own process group, and
// PR_SET_PDEATHSIG so that it dies with the launcher.
#include "launcher/rank_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace zdp::launcher {

std::string ExitInfo::describe() const {
  if (!exited) return "still running";
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    return "killed by signal " + std::to_string(signal) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "exit code " + std::to_string(code);
}

namespace {

// The child's environment: the launcher's, with `overrides` replacing or adding entries.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (overrides.count(name) == 0) out.push_back(entry);
  }
  for (const auto& [name, value] : overrides) out.push_back(name + "=" + value);
  return out;
}

}  // namespace

StatusOr<RankProcess> RankProcess::spawn(const RankSpec& spec) {
  const std::string what = "rank " + std::to_string(spec.rank);
  if (spec.argv.empty()) return Status(StatusCode::kInvalidArgument, what + ": no program to run");
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return Status(StatusCode::kIoError, what + ": pipe: " + std::strerror(errno));
  }
  // Everything the child needs is prepared before fork(): after it only async-signal-safe calls.
  std::vector<std::string> env_strings = child_environment(spec.env);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();

  // An exec failure is reported through a second close-on-exec pipe: EOF means exec worked.
  int exec_fds[2];
  if (::pipe2(exec_fds, O_CLOEXEC) != 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return Status(StatusCode::kIoError, what + ": pipe: " + std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {pipe_fds[0], pipe_fds[1], exec_fds[0], exec_fds[1]}) ::close(fd);
    return Status(StatusCode::kIoError, what + ": fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::execvpe(argv[0], argv.data(), envp.data());
    const int err = errno;
    (void)!::write(exec_fds[1], &err, sizeof(err));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent: no race with an early signal_group()
  ::close(pipe_fds[1]);
  ::close(exec_fds[1]);
  int exec_errno = 0;
  const ssize_t n = ::read(exec_fds[0], &exec_errno, sizeof(exec_errno));
  ::close(exec_fds[0]);
  if (n == sizeof(exec_errno)) {
    ::waitpid(pid, nullptr, 0);
    ::close(pipe_fds[0]);
    return Status(StatusCode::kNotFound, what + ": cannot run '" + spec.argv[0] + "': " + std::strerror(exec_errno));
  }
  ::fcntl(pipe_fds[0], F_SETFL, ::fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);
  RankProcess p;
  p.rank_ = spec.rank;
  p.pid_ = pid;
  p.output_fd_ = pipe_fds[0];
  return p;
}

RankProcess::RankProcess(RankProcess&& other) noexcept { *this = std::move(other); }

RankProcess& RankProcess::operator=(RankProcess&& other) noexcept {
  if (this != &other) {
    rank_ = other.rank_;
    pid_ = other.pid_;
    output_fd_ = other.output_fd_;
    exit_ = other.exit_;
    other.pid_ = -1;
    other.output_fd_ = -1;
  }
  return *this;
}

RankProcess::~RankProcess() {
  if (running()) {
    signal_group(SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  close_output();
}

void RankProcess::close_output() {
  if (output_fd_ >= 0) ::close(output_fd_);
  output_fd_ = -1;
}

const ExitInfo& RankProcess::poll() {
  if (pid_ <= 0 || exit_.exited) return exit_;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_.exited = true;
    if (WIFEXITED(status)) exit_.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) exit_.signal = WTERMSIG(status);
    // Whatever the rank started in its group goes with it.
    ::kill(-pid_, SIGKILL);
  }
  return exit_;
}

void RankProcess::signal_group(int sig) const {
  if (pid_ > 0) ::kill(-pid_, sig);
}

}  // namespace zdp::launcher
