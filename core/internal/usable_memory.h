// How much memory this process may use: not the host's RAM but the smaller of it and its
// cgroup's limit (docker --memory, Kubernetes limits, a Slurm job's cgroup). What
// dp-launch plan sizes CPU ranks by, and what its --calibrate may take when it times a
// model: the host's RAM let a model through that the job's cgroup then OOM-killed.
#pragma once

#include <cstdint>
#include <string_view>

namespace zdp {

// At least one page.
int64_t usable_memory_bytes();

// The bytes a cgroup memory limit file allows: v2's memory.max ("max" or a number) or
// v1's memory.limit_in_bytes (a number; unlimited is a value near 2^63); -1 for "max",
// for v1's unlimited (above 2^60) and for text that is not a limit.
int64_t bytes_of_memory_limit(std::string_view text);

}  // namespace zdp
