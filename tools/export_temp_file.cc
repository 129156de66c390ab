// ExportTempFile (export_temp_file.h).
#include "tools/export_temp_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <iterator>

namespace zdp::ckpt_tool {
namespace {

namespace fs = std::filesystem;

// What the handler removes: a fixed buffer, since a handler may not allocate.
char g_path[PATH_MAX];
volatile sig_atomic_t g_armed = 0;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[std::size(kSignals)];

void remove_and_die(int sig) {
  if (g_armed) ::unlink(g_path);
  // The signal's own end (the exit status a shell reports as 128 + sig) ...
  ::signal(sig, SIG_DFL);
  sigset_t self;  // blocked while its handler runs: unblocked, so that raise() ends us here
  sigemptyset(&self);
  sigaddset(&self, sig);
  ::sigprocmask(SIG_UNBLOCK, &self, nullptr);
  ::raise(sig);
  // ... except as a namespace's init (PID 1 in a container), which the kernel spares a
  // signal left at its default: the export must end all the same, its file gone.
  _exit(128 + sig);
}

// "<digits>" -> the pid; -1 for any other text.
pid_t pid_of(const std::string& digits) {
  if (digits.empty() || digits.size() > 9) return -1;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
  }
  return static_cast<pid_t>(std::stol(digits));
}

}  // namespace

StatusOr<std::unique_ptr<ExportTempFile>> ExportTempFile::create(const std::string& target, mode_t mode,
                                                                  bool keep_mode, std::vector<std::string>* removed) {
  const fs::path t(target);
  const std::string prefix = t.filename().string() + ".tmp-";
  const fs::path dir = t.has_parent_path() ? t.parent_path() : fs::path(".");
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.compare(0, prefix.size(), prefix) != 0) continue;
      const pid_t pid = pid_of(name.substr(prefix.size()));
      // Only a process that is gone, or this one's pid (one export a process: a leftover
      // of a killed run that had this pid, as every run has in a container as PID 1): a
      // running export of the same target keeps its file.
      if (pid <= 0 || (pid != ::getpid() && (::kill(pid, 0) == 0 || errno != ESRCH))) continue;
      const std::string leftover = (dir / name).string();
      struct stat st {};
      if (::lstat(leftover.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(leftover.c_str()) == 0) {
        removed->push_back(leftover);
      }
    }
    ::closedir(d);
  }
  const std::string path = target + ".tmp-" + std::to_string(::getpid());
  if (path.size() >= sizeof(g_path)) return Status(StatusCode::kInvalidArgument, "export: the path " + path + " is too long");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    return Status(err == EEXIST ? StatusCode::kInvalidArgument : StatusCode::kIoError,
                  "export: creating the temporary file " + path + " failed: " + std::strerror(err) +
                      (err == EEXIST ? " (remove it first)" : ""));
  }
  const bool moded = !keep_mode || ::fchmod(fd, mode & 07777) == 0;
  const int err = errno;
  ::close(fd);
  std::unique_ptr<ExportTempFile> file(new ExportTempFile(path));
  if (!moded) {
    return Status(StatusCode::kIoError, "export: giving " + path + " the replaced file's permissions failed: " +
                                            std::strerror(err));
  }
  return file;
}

ExportTempFile::ExportTempFile(std::string path) : path_(std::move(path)) {
  std::memcpy(g_path, path_.c_str(), path_.size() + 1);
  g_armed = 1;
  struct sigaction sa {};
  sa.sa_handler = remove_and_die;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    ::sigaction(kSignals[i], nullptr, &g_previous[i]);
    // A signal the process ignores (nohup's SIGHUP) stays ignored; one it handles stays
    // its own handler's.
    if (g_previous[i].sa_handler == SIG_DFL) ::sigaction(kSignals[i], &sa, nullptr);
  }
}

ExportTempFile::~ExportTempFile() {
  // Removed before the handlers are disarmed: a signal between the two then finds nothing
  // to remove (ENOENT) rather than a file no handler removes any more.
  if (!renamed_) ::unlink(path_.c_str());
  g_armed = 0;
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
}

Status ExportTempFile::rename_to(const std::string& target) {
  if (std::rename(path_.c_str(), target.c_str()) != 0) {
    return Status(StatusCode::kIoError,
                  "export: renaming " + path_ + " to " + target + " failed: " + std::strerror(errno));
  }
  g_armed = 0;  // the target now: a signal from here on must not remove it
  renamed_ = true;
  return Status::Ok();
}

}  // namespace zdp::ckpt_tool
