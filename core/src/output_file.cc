// write_file_atomically, output_target and write_fully: POSIX calls, so the errno of a
// failure survives.
#include "core/internal/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/internal/input_file.h"

namespace zdp {

namespace {

int write_fully(int fd, std::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// The folder holding `path`, synced so that a rename into it survives a crash. Errors are
// ignored: some filesystems refuse to fsync a directory, and the file itself is synced.
void sync_parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}


}  // namespace

int write_fully(int fd, const std::string& text) { return write_fully(fd, std::string_view(text)); }

StatusOr<std::string> stage_file(const std::string& path, std::initializer_list<std::string_view> parts,
                                 const std::string& what) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  // The file the user asked for is named first; its temporary name only in passing.
  const auto cannot = [&](const std::string& action, int err) {
    std::string why = std::strerror(err);
    if (err == ENOENT) {
      const size_t slash = path.find_last_of('/');
      if (slash != std::string::npos && slash > 0) why = "the folder '" + path.substr(0, slash) + "' does not exist";
    }
    return Status(StatusCode::kIoError,
                  "cannot " + action + " " + what + " '" + path + "' (through its temporary file '" + tmp + "'): " + why);
  };
  const auto failed = [&](const std::string& action, int err) {
    std::remove(tmp.c_str());
    return cannot(action, err);
  };
  // O_EXCL: in a folder others can write to (a log_dir under /tmp), a link planted at the
  // temporary name must not make this write truncate another file. A leftover of the same
  // name (a crashed process had this pid) is unlinked, which removes a link, not its target.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }
  if (fd < 0) return cannot("create", errno);
  int write_err = 0;
  for (std::string_view part : parts) {
    if (write_err == 0) write_err = write_fully(fd, part);
  }
  // fsync before the rename: otherwise a crash can leave the new name on an empty file.
  const int sync_err = write_err == 0 && ::fsync(fd) != 0 && errno != EINVAL ? errno : 0;
  // close() reports what a network file system kept for it (EDQUOT, ENOSPC).
  const int close_err = ::close(fd) != 0 ? errno : 0;
  if (write_err != 0) return failed("write", write_err);
  if (sync_err != 0) return failed("sync", sync_err);
  if (close_err != 0) return failed("write", close_err);
  return tmp;
}

Status commit_staged(const std::string& staged, const std::string& path, const std::string& what) {
  if (std::rename(staged.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(staged.c_str());
    return Status(StatusCode::kIoError, "cannot rename " + what + " '" + staged + "' to '" + path + "': " +
                                            std::strerror(err));
  }
  sync_parent(path);
  return Status::Ok();
}

void discard_staged(const std::string& staged) { std::remove(staged.c_str()); }

Status write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts,
                             const std::string& what) {
  ZDP_ASSIGN_OR_RETURN(const std::string staged, stage_file(path, parts, what));
  return commit_staged(staged, path, what);
}

Status write_file_atomically(const std::string& path, const std::string& text, const std::string& what) {
  return write_file_atomically(path, {std::string_view(text)}, what);
}

StatusOr<std::string> output_target(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return path;  // a new file
    const int err = errno;
    return Status(StatusCode::kIoError, "cannot inspect the " + what + " " + path + ": " + std::strerror(err));
  }
  std::string target = path;
  if (S_ISLNK(st.st_mode)) {
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr || ::stat(resolved, &st) != 0) {
      const int err = errno;
      return Status(StatusCode::kInvalidArgument, "the " + what + " " + path +
                                                      " is a symbolic link to nothing that exists (" +
                                                      std::strerror(err) + "): refused");
    }
    target = resolved;
    if (!S_ISREG(st.st_mode)) {
      return Status(StatusCode::kInvalidArgument, "the " + what + " " + path + " is a symbolic link to " + target +
                                                      ", which is " + file_kind_text(st.st_mode) + ": refused");
    }
    return target;
  }
  if (!S_ISREG(st.st_mode)) {
    return Status(StatusCode::kInvalidArgument, "the " + what + " " + path + " exists and is " +
                                                    file_kind_text(st.st_mode) + ": refused (give a file path)");
  }
  return target;
}

}  // namespace zdp
