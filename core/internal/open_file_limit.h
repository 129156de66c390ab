// The soft limit on open files, raised to the hard one. A job's store holds two
// connections a rank and each Gloo rank one connection a peer, so the usual soft limit of
// 1024 stopped a job of a few hundred ranks with "Too many open files" (torchrun and
// mpirun leave it to the user; most never raise it). dp-launch raises it for itself and,
// inherited, its ranks; zdp::init raises it too, for ranks started by torchrun or srun.
#pragma once

#include <cstdint>

namespace zdp {

// Raises RLIMIT_NOFILE's soft limit to its hard limit where it is lower. Returns the soft
// limit in force afterwards (-1 when it cannot be read; unlimited as INT64_MAX).
int64_t raise_open_file_limit();

}  // namespace zdp
