// InputFile: stat before open, a non-blocking open re-checked with fstat (the path may have
// changed in between), and reads bounded by the caller's limit.
#include "core/internal/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace zdp {
namespace {

std::string named(const std::string& what, const std::string& path) { return what + " '" + path + "'"; }

Status not_regular(const std::string& what, const std::string& path, unsigned mode) {
  return Status(StatusCode::kInvalidArgument,
                named(what, path) + " is " + file_kind_text(mode) + ", not a regular file");
}

Status too_large(const std::string& what, const std::string& path, const std::string& size, int64_t max_bytes) {
  return Status(StatusCode::kInvalidArgument, named(what, path) + " is " + size + ", more than the " +
                                                  byte_size_text(max_bytes) + " a " + what + " may have");
}

Status open_error(const std::string& what, const std::string& path, int err) {
  const StatusCode code = err == ENOENT || err == ENOTDIR ? StatusCode::kNotFound : StatusCode::kIoError;
  return Status(code, "cannot read " + named(what, path) + ": " + std::strerror(err));
}

}  // namespace

std::string file_kind_text(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO (named pipe)";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a file";
  }
}

std::string byte_size_text(int64_t bytes) {
  static const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  int64_t v = bytes;
  while (unit < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    ++unit;
  }
  return std::to_string(v) + " " + kUnits[unit];
}

StatusOr<InputFile> InputFile::open(const std::string& path, const std::string& what, int64_t max_bytes) {
  struct stat st {};
  // stat first: opening a FIFO waits for a writer and opening some devices has effects.
  if (::stat(path.c_str(), &st) != 0) return open_error(what, path, errno);
  if (!S_ISREG(st.st_mode)) return not_regular(what, path, st.st_mode);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return open_error(what, path, errno);
  InputFile f;
  f.fd_ = fd;
  f.path_ = path;
  f.what_ = what;
  f.max_bytes_ = max_bytes;
  if (::fstat(fd, &st) != 0) return open_error(what, path, errno);
  if (!S_ISREG(st.st_mode)) return not_regular(what, path, st.st_mode);
  // Regular files ignore O_NONBLOCK; cleared anyway so that nothing downstream sees EAGAIN.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  f.size_ = static_cast<int64_t>(st.st_size);
  if (f.size_ > max_bytes) return too_large(what, path, std::to_string(f.size_) + " bytes", max_bytes);
  return f;
}

InputFile::InputFile(InputFile&& other) noexcept { *this = std::move(other); }

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    max_bytes_ = other.max_bytes_;
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<std::string> InputFile::read_all() const {
  // One byte beyond the limit tells a file that grew past it from one that fits exactly.
  std::string out(static_cast<size_t>(size_) + 1, '\0');
  int64_t done = 0;
  for (;;) {
    if (done == static_cast<int64_t>(out.size())) {
      if (done > max_bytes_) return too_large(what_, path_, "more than " + std::to_string(max_bytes_) + " bytes", max_bytes_);
      out.resize(std::min<size_t>(out.size() * 2, static_cast<size_t>(max_bytes_) + 1));
    }
    const ssize_t n = ::pread(fd_, out.data() + done, out.size() - static_cast<size_t>(done), static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status(StatusCode::kIoError, "cannot read " + named(what_, path_) + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    done += n;
  }
  out.resize(static_cast<size_t>(done));
  return out;
}

int InputFile::release() { return std::exchange(fd_, -1); }

StatusOr<std::string> read_input_file(const std::string& path, const std::string& what, int64_t max_bytes) {
  ZDP_ASSIGN_OR_RETURN(const InputFile f, InputFile::open(path, what, max_bytes));
  return f.read_all();
}

}  // namespace zdp
