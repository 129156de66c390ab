// RLIMIT_NOFILE's soft limit up to the hard one (open_file_limit.h).
#include "core/internal/open_file_limit.h"

#include <sys/resource.h>

#include <limits>

namespace zdp {

int64_t raise_open_file_limit() {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return -1;
  if (files.rlim_cur < files.rlim_max) {
    rlimit raised = files;
    raised.rlim_cur = files.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) files = raised;
  }
  if (files.rlim_cur == RLIM_INFINITY) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(files.rlim_cur);
}

}  // namespace zdp
