// lifeline::create / from_env / watch (runtime/internal/lifeline.h).
#include "runtime/internal/lifeline.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace zdp::lifeline {

StatusOr<Pipe> create() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return Status(StatusCode::kIoError, std::string("lifeline pipe: ") + std::strerror(errno));
  }
  return Pipe{fds[0], fds[1]};
}

int from_env() {
  const char* text = std::getenv(kEnv);
  if (text == nullptr || *text == '\0') return -1;
  int fd = -1;
  const char* end = text + std::strlen(text);
  if (std::from_chars(text, end, fd).ptr != end || fd < 3) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return -1;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) != O_RDONLY) return -1;
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

void watch(int fd, std::function<void()> on_loss) {
  static std::once_flag started;
  std::call_once(started, [fd, &on_loss] {
    std::thread([fd, on_loss = std::move(on_loss)] {
      char byte;
      for (;;) {
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, -1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) return;  // EBADF and the like: nothing left to watch
        // Nobody writes to the lifeline: readable means end of file, every writer gone.
        const ssize_t n = ::read(fd, &byte, 1);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n > 0) continue;
        on_loss();
        return;
      }
    }).detach();
  });
}

}  // namespace zdp::lifeline
