// check_output_dirs: the directories a run will write are found unwritable before it starts,
// not at its first checkpoint or after its last step.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/internal/input_file.h"
#include "zdp/config.h"

namespace zdp {
namespace {

// "" when `dir` is a writable directory or can be created; else why not.
std::string why_unwritable(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path p = fs::absolute(fs::path(dir)).lexically_normal();
  struct stat st {};
  // The nearest part of the path that exists: the directory itself, or where it will be made.
  while (::stat(p.c_str(), &st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) return "cannot look at " + p.string() + ": " + std::strerror(errno);
    if (!p.has_parent_path() || p.parent_path() == p) return "no part of the path exists";
    p = p.parent_path();
  }
  const bool is_target = p == fs::absolute(fs::path(dir)).lexically_normal();
  if (!S_ISDIR(st.st_mode)) {
    return is_target ? "is " + file_kind_text(st.st_mode) + ", not a directory"
                     : "cannot be created: " + p.string() + " is " + file_kind_text(st.st_mode) + ", not a directory";
  }
  // access() also sees a read-only file system (EROFS), which root's permissions do not bypass.
  if (::access(p.c_str(), W_OK | X_OK) != 0) {
    return is_target ? std::string("is not writable: ") + std::strerror(errno)
                     : "cannot be created in " + p.string() + ": " + std::strerror(errno);
  }
  // For root access() says yes to every directory of a writable file system, /proc and
  // /sys included, where creating anything fails: a profile.dir there failed after the
  // whole run. Root's answer is a directory made and removed at once.
  if (::geteuid() == 0) {
    std::string probe = (p / ".zdp-write-probe-XXXXXX").string();
    if (::mkdtemp(probe.data()) == nullptr) {
      return is_target ? std::string("is not writable: ") + std::strerror(errno)
                       : "cannot be created in " + p.string() + ": " + std::strerror(errno);
    }
    ::rmdir(probe.c_str());
  }
  return "";
}

}  // namespace

Status check_output_dirs(const Config& config) {
  struct Dir {
    const char* key;
    const std::string& path;
    const char* role;
  };
  std::vector<Dir> dirs = {{"launch.log_dir", config.launch.log_dir, "the rank logs"}};
  if (!config.checkpoint.dir.empty()) dirs.push_back({"checkpoint.dir", config.checkpoint.dir, "checkpoints"});
  if (config.profile.enabled && !config.profile.dir.empty()) {
    dirs.push_back({"profile.dir", config.profile.dir, "the profile"});
  }
  std::string problems;
  for (const Dir& d : dirs) {
    const std::string why = why_unwritable(d.path);
    if (why.empty()) continue;
    problems += (problems.empty() ? "" : "\n") + config.where(d.key) + ": " + d.key + " (\"" + d.path + "\") " + why +
                "; " + d.role + " could not be written there";
  }
  if (problems.empty()) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, problems);
}

}  // namespace zdp
