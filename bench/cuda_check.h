// The GPU benchmarks' check of a CUDA runtime call: a benchmark has nothing to recover,
// so a failure prints the program, the call and CUDA's message, and exits 1.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define ZDP_BENCH_CHECK_CUDA(program, call)                                                   \
  do {                                                                                        \
    const cudaError_t err_ = (call);                                                          \
    if (err_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s: %s: %s\n", program, #call, cudaGetErrorString(err_));         \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
