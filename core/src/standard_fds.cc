// /dev/null on closed standard descriptors (standard_fds.h).
#include "core/internal/standard_fds.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace zdp {

int open_missing_standard_fds() {
  int opened = 0;
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // open() returns the lowest free number: this one, as the lower ones are open.
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd < 0) return -1;
    if (null_fd != fd) {  // not reached while the lower numbers are open; kept exact anyway
      ::dup2(null_fd, fd);
      ::close(null_fd);
    }
    ++opened;
  }
  return opened;
}

}  // namespace zdp
