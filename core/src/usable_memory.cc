#include "core/internal/usable_memory.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "core/internal/input_file.h"
#include "core/internal/parse_decimal.h"

namespace zdp {
namespace {

// The limit file's first line; "" where there is none (no cgroup, or another version's).
std::string limit_text(const char* path) {
  StatusOr<std::string> text = read_input_file(path, "cgroup memory limit", 4096);
  if (!text.ok()) return "";
  return text->substr(0, text->find('\n'));
}

}  // namespace

int64_t bytes_of_memory_limit(std::string_view text) {
  int64_t bytes = 0;
  // Above 2^60 (1 EiB) is v1's "unlimited" (LONG_MAX rounded down to a page).
  if (!parse_decimal(text, 1, int64_t{1} << 60, &bytes)) return -1;
  return bytes;
}

int64_t usable_memory_bytes() {
  const int64_t page = std::max<int64_t>(1, ::sysconf(_SC_PAGE_SIZE));
  int64_t bytes = std::max<int64_t>(1, ::sysconf(_SC_PHYS_PAGES)) * page;
  for (const char* limit : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t allowed = bytes_of_memory_limit(limit_text(limit));
    if (allowed > 0) bytes = std::min(bytes, allowed);
  }
  return std::max(bytes, page);
}

}  // namespace zdp
