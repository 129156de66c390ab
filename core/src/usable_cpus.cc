#include "core/internal/usable_cpus.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "core/internal/parse_decimal.h"

namespace zdp {
namespace {

std::string first_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

}  // namespace

int cores_of_cpu_max(std::string_view text) {
  const size_t space = text.find(' ');
  if (space == std::string_view::npos) return -1;
  int64_t quota = 0, period = 0;
  if (!parse_decimal(text.substr(0, space), 1, int64_t{1} << 50, &quota) ||
      !parse_decimal(text.substr(space + 1), 1, int64_t{1} << 40, &period)) {
    return -1;  // "max 100000": no quota
  }
  return static_cast<int>(std::min<int64_t>((quota + period - 1) / period, 1 << 20));
}

int usable_cpu_cores() {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) cores = std::min(cores, CPU_COUNT(&set));
  // cgroup v2, then v1's quota and period.
  int quota_cores = cores_of_cpu_max(first_line("/sys/fs/cgroup/cpu.max"));
  if (quota_cores < 0) {
    const std::string q = first_line("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
    const std::string p = first_line("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
    if (!q.empty() && !p.empty()) quota_cores = cores_of_cpu_max(q + " " + p);
  }
  if (quota_cores > 0) cores = std::min(cores, quota_cores);
  return std::max(1, cores);
}

}  // namespace zdp
