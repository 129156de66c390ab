// write_file_atomically and write_fully: POSIX writes, so the errno of a failure survives.
#include "core/internal/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace zdp {

int write_fully(int fd, const std::string& text) {
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

Status write_file_atomically(const std::string& path, const std::string& text, const std::string& what) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const auto failed = [&](const std::string& action, int err) {
    std::remove(tmp.c_str());
    return Status(StatusCode::kIoError, "cannot " + action + " " + what + " '" + tmp + "': " + std::strerror(err));
  };
  // O_EXCL: in a folder others can write to (a log_dir under /tmp), a link planted at the
  // temporary name must not make this write truncate another file. A leftover of the same
  // name (a crashed process had this pid) is unlinked, which removes a link, not its target.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }
  if (fd < 0) {
    const int err = errno;
    return Status(StatusCode::kIoError, "cannot create " + what + " '" + tmp + "': " + std::strerror(err));
  }
  const int write_err = write_fully(fd, text);
  // close() reports what a network file system kept for it (EDQUOT, ENOSPC).
  const int close_err = ::close(fd) != 0 ? errno : 0;
  if (write_err != 0) return failed("write", write_err);
  if (close_err != 0) return failed("write", close_err);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return Status(StatusCode::kIoError, "cannot rename " + what + " '" + tmp + "' to '" + path + "': " +
                                            std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace zdp
