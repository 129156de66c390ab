// fork/exec of a rank with a pipe for its output, its own process group, and
// PR_SET_PDEATHSIG so that it dies with the launcher. Between fork and exec the child
// makes only async-signal-safe calls (tests/unit/rank_process_test.cc checks it).
#include "launcher/rank_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
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

constexpr std::chrono::milliseconds kExecDeadline{30000};

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

// execvpe's search done before fork: `name` itself when it holds a '/', else the first
// executable file of that name in the launcher's PATH (execvpe searches that one too).
StatusOr<std::string> find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";  // an empty entry is "."
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    begin = end + 1;
  }
  return Status(StatusCode::kNotFound, "cannot run '" + name + "': no executable of that name in PATH (" + dirs + ")");
}

}  // namespace

StatusOr<RankProcess> RankProcess::spawn(const RankSpec& spec) {
  const std::string what = "rank " + std::to_string(spec.rank);
  if (spec.argv.empty()) return Status(StatusCode::kInvalidArgument, what + ": no program to run");
  // Everything the child needs is prepared before fork(): after it, only async-signal-safe
  // calls (docs/design.md, "Fork safety"). The launcher runs the store server's threads,
  // so a lock or an allocation in the child could wait forever on a thread it lacks.
  StatusOr<std::string> found = find_program(spec.argv[0]);
  if (!found.ok()) return Status(found.status().code(), what + ": " + found.status().message());
  const std::string program = *found;
  std::vector<std::string> env_strings = child_environment(spec.env);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  // The rank's stdin: never the launcher's terminal. A rank in its own process group that
  // read it (a breakpoint, input()) was stopped by SIGTTIN without a word.
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) return Status(StatusCode::kIoError, what + ": /dev/null: " + std::strerror(errno));

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ::close(null_fd);
    return Status(StatusCode::kIoError, what + ": pipe: " + std::strerror(errno));
  }
  // An exec failure is reported through a second close-on-exec pipe: EOF means exec worked.
  int exec_fds[2];
  if (::pipe2(exec_fds, O_CLOEXEC) != 0) {
    for (int fd : {pipe_fds[0], pipe_fds[1], null_fd}) ::close(fd);
    return Status(StatusCode::kIoError, what + ": pipe: " + std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {pipe_fds[0], pipe_fds[1], exec_fds[0], exec_fds[1], null_fd}) ::close(fd);
    return Status(StatusCode::kIoError, what + ": fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    // What dp-launch's caller left open (a harness's pipe, a socket) is not the rank's: a
    // rank or what it starts held it past the launcher (as Python's subprocess and so
    // torchrun close them). A plain system call, safe after fork; where the kernel lacks
    // CLOSE_RANGE_CLOEXEC (before 5.11) they stay inherited as before.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    if (spec.inherited_fd >= 0) ::fcntl(spec.inherited_fd, F_SETFD, 0);  // kept across exec
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(program.c_str(), argv.data(), envp.data());
    const int err = errno;
    (void)!::write(exec_fds[1], &err, sizeof(err));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent: no race with an early signal_group()
  ::close(null_fd);
  ::close(pipe_fds[1]);
  ::close(exec_fds[1]);
  // exec follows fork within microseconds; a child that has not got there is stuck on a
  // lock it inherited (the rule above was broken): kill it rather than hang the launcher.
  pollfd exec_poll{exec_fds[0], POLLIN, 0};
  // A signal to the launcher (Ctrl-C) interrupts the poll: that is no verdict on the
  // child, so the wait goes on until the deadline (the supervisor then acts on the signal).
  const auto exec_deadline = std::chrono::steady_clock::now() + kExecDeadline;
  int ready = 0;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(exec_deadline - std::chrono::steady_clock::now());
    ready = ::poll(&exec_poll, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (!(ready < 0 && errno == EINTR)) break;
  }
  int exec_errno = 0;
  const ssize_t n = ready > 0 ? ::read(exec_fds[0], &exec_errno, sizeof(exec_errno)) : -1;
  ::close(exec_fds[0]);
  if (ready <= 0 || n == sizeof(exec_errno)) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(pipe_fds[0]);
    if (ready <= 0) {
      return Status(StatusCode::kInternal, what + ": the child (pid " + std::to_string(pid) + ") did not reach exec of '" +
                                               program + "' within " + std::to_string(kExecDeadline.count() / 1000) +
                                               " s: stuck between fork and exec, killed");
    }
    return Status(StatusCode::kNotFound, what + ": cannot run '" + program + "': " + std::strerror(exec_errno));
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
    // Reaped if it goes within a second; one SIGKILL cannot stop (uninterruptible sleep)
    // is left to init rather than blocking the launcher's exit.
    for (int i = 0; i < 100 && ::waitpid(pid_, nullptr, WNOHANG) == 0; ++i) ::usleep(10000);
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
