// train.deterministic promises the same bits at any world size, but only when every rank
// runs the same GEMM kernels: OpenBLAS's DYNAMIC_ARCH build picks its kernels from the
// CPU it loads on, and kernels for different cores round differently, so one job on
// nodes of two CPU generations (AVX2 and AVX-512) gave other bits than either alone, and
// exited 0. Checked at the start, as the data is (trainer/data/same_data.h).
#pragma once

#include <chrono>
#include <string>

#include "zdp/status.h"
#include "zdp/store.h"

namespace zdp::trainer {

// Rank 0 publishes its Ops::arithmetic_libraries() through the job's store; every other
// rank compares its own with it, and every rank waits for all `world_size` verdicts.
// kInvalidArgument on every rank when one differs, naming it, both libraries and the fix
// (OPENBLAS_CORETYPE on every node; on GPUs one model and library version).
// REQUIRES: every rank calls it.
Status check_same_arithmetic(Store& store, int rank, int world_size, const std::string& mine,
                             std::chrono::milliseconds timeout);

}  // namespace zdp::trainer
