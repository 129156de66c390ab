// How many CUDA devices this machine has, asked in a forked child, so that the calling
// process never initialises CUDA: a process that has cannot fork ranks that use CUDA
// (the children inherit a CUDA state they cannot use). For tests and benchmarks that
// fork GPU ranks (fork_ranks.h) and must skip, or size themselves, first.
#pragma once

namespace zdp::testing {

// 0 without a GPU, a driver, or a CUDA build (and when the child cannot be forked).
int cuda_devices_without_init();

}  // namespace zdp::testing
