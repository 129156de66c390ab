// Checkpoint directories (checkpoint_dirs.h), find_latest_checkpoint() and
// resolve_checkpoint().
#include "runtime/internal/checkpoint_dirs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/internal/input_file.h"
#include "core/internal/output_file.h"
#include "runtime/internal/checkpoint_state.h"
#include "zdp/checkpoint.h"
#include "zdp/log.h"

namespace zdp {
namespace checkpoint {
namespace {

Status io_error(const std::string& what, int err) {
  return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError, what + ": " + std::strerror(err));
}

}  // namespace

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// "step-<digits><suffix>" -> the step; -1 for any other name.
int64_t step_of(const std::string& name, const std::string& suffix) {
  const std::string prefix = "step-";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  if (digits.size() > 1 && digits[0] == '0') return -1;  // only checkpoint_dir_name()'s spelling
  return std::stoll(digits);
}

namespace {

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

}  // namespace

Status make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status(StatusCode::kIoError, "cannot create directory " + path + ": " + ec.message());
  return Status::Ok();
}

Status sync_dir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("open directory " + path + " to fsync it", errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some filesystems cannot fsync a directory (EINVAL); their renames are durable anyway.
  if (rc != 0 && err != EINVAL) return io_error("fsync directory " + path, err);
  return Status::Ok();
}

Status remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return Status(StatusCode::kIoError, "cannot remove " + path + ": " + ec.message());
  return Status::Ok();
}

Status write_file_synced(const std::string& path, const std::string& text) {
  // Not through a link: one planted in a shared checkpoint folder would have this rank
  // overwrite whatever file it points to.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return io_error("cannot create " + path + (errno == ELOOP ? " (a symbolic link is there)" : ""), errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return io_error("write " + path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error("fsync " + path, err);
  }
  if (::close(fd) != 0) return io_error("close " + path, errno);
  return Status::Ok();
}

Status write_file_atomic(const std::string& dir, const std::string& name, const std::string& text) {
  // A temporary name of this process's own, created exclusively (a link planted at a fixed
  // ".latest.tmp" was written through, and then renamed over `latest`), fsynced, renamed,
  // and the folder fsynced.
  ZDP_RETURN_IF_ERROR(write_file_atomically(dir + "/" + name, text, "checkpoint file '" + name + "'"));
  return sync_dir(dir);  // again, to report its failure (write_file_atomically's is best effort)
}

std::vector<int64_t> complete_steps(const std::string& root) {
  std::vector<int64_t> steps;
  for (const std::string& name : entries(root)) {
    const int64_t step = step_of(name, "");
    if (step >= 0 && is_file(root + "/" + name + "/" + kCheckpointStateFile)) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

Status remove_leftovers(const std::string& root) {
  for (const std::string& name : entries(root)) {
    const int64_t old_step = step_of(name, ".old");
    // A save that replaced step-N and stopped between its two renames (where the file
    // system cannot exchange them) left step-N.old complete and no step-N: put it back.
    if (old_step >= 0 && !is_dir(root + "/" + checkpoint_dir_name(old_step)) &&
        is_file(root + "/" + name + "/" + kCheckpointStateFile)) {
      const std::string back = root + "/" + checkpoint_dir_name(old_step);
      ZDP_LOG(kInfo) << "checkpoint: restoring " << root << "/" << name << " to " << back
                     << " (an interrupted save was replacing it)";
      if (::rename((root + "/" + name).c_str(), back.c_str()) != 0) return io_error("rename " + name + " to " + back, errno);
      ZDP_RETURN_IF_ERROR(sync_dir(root));
      continue;
    }
    // step-N.pruned: a prune that stopped, or failed, while removing it. Not a checkpoint
    // any more, so one that cannot be removed (NFS keeps a folder whose file another
    // process holds open) is left with a warning: failing here stopped the next save.
    if (step_of(name, ".pruned") >= 0) {
      const Status removed = remove_tree(root + "/" + name);
      if (!removed.ok()) ZDP_LOG(kWarn) << "checkpoint: " << root << "/" << name << " stays: " << removed.to_string();
      continue;
    }
    // latest.tmp.<pid>: a write of `latest` that stopped before its rename.
    if (step_of(name, ".tmp") >= 0 || old_step >= 0 || name.rfind(std::string(kCheckpointLatestFile) + ".tmp.", 0) == 0) {
      ZDP_LOG(kInfo) << "checkpoint: removing " << root << "/" << name << " (left by an interrupted save)";
      ZDP_RETURN_IF_ERROR(remove_tree(root + "/" + name));
    }
  }
  return Status::Ok();
}

Status commit_dir(const std::string& root, const std::string& tmp_name, int64_t step) {
  const std::string final_path = root + "/" + checkpoint_dir_name(step);
  const std::string tmp_path = root + "/" + tmp_name;
  if (is_dir(final_path)) {
    // Replacing a step: one atomic exchange, so that step-N is complete at every moment;
    // the old one is then under the temporary name and removed.
    if (::renameat2(AT_FDCWD, tmp_path.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0) {
      ZDP_RETURN_IF_ERROR(sync_dir(root));
      return remove_tree(tmp_path);
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
      return io_error("exchange " + tmp_path + " with " + final_path, errno);
    }
    // A file system without the exchange (NFS, some parallel ones): two renames, and
    // remove_leftovers() puts step-N.old back if a crash comes between them.
    const std::string old_path = final_path + ".old";
    if (::rename(final_path.c_str(), old_path.c_str()) != 0) {
      return io_error("rename " + final_path + " to " + old_path + " (to replace it)", errno);
    }
    if (::rename(tmp_path.c_str(), final_path.c_str()) != 0) return io_error("rename " + tmp_path + " to " + final_path, errno);
    ZDP_RETURN_IF_ERROR(sync_dir(root));
    return remove_tree(old_path);
  }
  if (::rename(tmp_path.c_str(), final_path.c_str()) != 0) return io_error("rename " + tmp_path + " to " + final_path, errno);
  return sync_dir(root);
}

Status prune(const std::string& root, int keep, int64_t latest) {
  if (keep <= 0) return Status::Ok();
  std::vector<int64_t> steps = complete_steps(root);  // ascending
  Status first_failure = Status::Ok();
  steps.erase(std::upper_bound(steps.begin(), steps.end(), latest), steps.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i) {
    // Renamed first, atomically, to a name remove_leftovers() clears: a crash in the middle
    // of the removal left step-K with its state.json and without some tensor files, still
    // counted as complete (a resume could pick it).
    const std::string name = checkpoint_dir_name(steps[i]);
    const std::string doomed = root + "/" + name + ".pruned";
    if (::rename((root + "/" + name).c_str(), doomed.c_str()) != 0) return io_error("rename " + name + " to " + doomed, errno);
    ZDP_RETURN_IF_ERROR(sync_dir(root));
    // The others still go when one cannot: it is no checkpoint any more (remove_leftovers
    // tries it again at the next save).
    const Status removed = remove_tree(doomed);
    if (!removed.ok() && first_failure.ok()) first_failure = removed;
  }
  return first_failure;
}

}  // namespace checkpoint

StatusOr<std::string> find_latest_checkpoint(const std::string& root) {
  const std::vector<int64_t> steps = checkpoint::complete_steps(root);
  if (steps.empty()) {
    std::string why = "no complete checkpoint (step-<N>/state.json) in " + root;
    if (checkpoint::is_dir(root)) {
      // A folder that cannot be listed (EACCES, EIO, a stale NFS handle) is not an empty
      // one: read as "none", resume = "auto" started the run over and moved `latest` back.
      DIR* d = ::opendir(root.c_str());
      if (d == nullptr) return checkpoint::io_error("list checkpoint directory " + root, errno);
      ::closedir(d);
    } else {
      struct stat st {};
      why = ::stat(root.c_str(), &st) == 0 ? root + " is " + file_kind_text(st.st_mode) + ", not a checkpoint directory"
                                           : "checkpoint directory " + root + " does not exist";
    }
    return Status(StatusCode::kNotFound, why);
  }
  StatusOr<std::string> latest = checkpoint::read_small_file(root + "/" + kCheckpointLatestFile);
  if (latest.ok()) {
    std::string name = *latest;
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    const int64_t step = checkpoint::step_of(name, "");
    if (step >= 0 && std::binary_search(steps.begin(), steps.end(), step)) return root + "/" + name;
    // The name is shown only when it looks like one: the file may hold anything (a binary
    // written over it), and the log is a terminal.
    const bool printable = name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char ch) {
                             return ch >= 0x20 && ch < 0x7f;
                           });
    ZDP_LOG(kWarn) << "checkpoint: " << root << "/latest "
                   << (printable ? "names '" + name + "'"
                                 : "holds " + std::to_string(latest->size()) + " bytes that are not a step-<N> name")
                   << ", which is not a complete checkpoint; using the newest complete one, "
                   << checkpoint_dir_name(steps.back());
  } else if (latest.status().code() != StatusCode::kNotFound) {
    // A `latest` that is there but cannot be read (EACCES, EIO, a folder, too large) is
    // said, as a wrong name is: the newest complete step may not be the one it names.
    ZDP_LOG(kWarn) << "checkpoint: " << latest.status().message() << "; using the newest complete checkpoint, "
                   << checkpoint_dir_name(steps.back());
  }
  return root + "/" + checkpoint_dir_name(steps.back());
}

StatusOr<std::string> resolve_checkpoint(const std::string& path_or_root) {
  std::string path = path_or_root;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (checkpoint::is_file(path + "/" + kCheckpointStateFile)) return path;
  // A state.json that is there but not a file (a folder, a FIFO): said so, not "no state.json".
  struct stat state {};
  if (::lstat((path + "/" + kCheckpointStateFile).c_str(), &state) == 0 && !S_ISREG(state.st_mode)) {
    return Status(StatusCode::kInvalidArgument, path + "/" + kCheckpointStateFile + " is " +
                                                    file_kind_text(state.st_mode) + ", not a checkpoint's state file");
  }
  StatusOr<std::string> latest = find_latest_checkpoint(path);
  if (!latest.ok()) {
    return Status(StatusCode::kNotFound, path + " is neither a checkpoint (no " + kCheckpointStateFile +
                                             ") nor a directory of checkpoints: " + latest.status().message());
  }
  return latest;
}

}  // namespace zdp
