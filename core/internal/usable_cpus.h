// How many CPU cores this process may use: not the host's count (hardware_concurrency)
// but the cores its affinity mask allows (taskset, Slurm's --cpus-per-task binding, a
// cpuset), capped by its cgroup's CPU quota (docker --cpus, Kubernetes limits). dp-launch
// divides these among its ranks for their OpenMP and OpenBLAS threads: the host's count
// oversubscribed a 2-core allocation of a 64-core host 32 times.
#pragma once

#include <string_view>

namespace zdp {

// At least 1.
int usable_cpu_cores();

// The cores a cgroup v2 cpu.max line ("200000 100000": quota and period in us) allows,
// rounded up; -1 for "max ..." (no quota) or text that is not such a line.
int cores_of_cpu_max(std::string_view text);

}  // namespace zdp
