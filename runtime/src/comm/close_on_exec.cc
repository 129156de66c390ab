#include "runtime/src/comm/close_on_exec.h"

#include <dirent.h>
#include <fcntl.h>

#include <algorithm>
#include <cstdlib>

namespace zdp {

std::vector<int> open_descriptors() {
  std::vector<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd < 0 || fd == own) continue;  // ".", ".."
    fds.push_back(static_cast<int>(fd));
  }
  ::closedir(dir);
  std::sort(fds.begin(), fds.end());
  return fds;
}

NewDescriptorsCloseOnExec::NewDescriptorsCloseOnExec() : before_(open_descriptors()) {}

int NewDescriptorsCloseOnExec::mark() const {
  int marked = 0;
  for (const int fd : open_descriptors()) {
    if (std::binary_search(before_.begin(), before_.end(), fd)) continue;
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0 && ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) == 0) ++marked;
  }
  return marked;
}

}  // namespace zdp
