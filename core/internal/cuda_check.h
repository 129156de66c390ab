// Check macros for CUDA runtime and cuBLAS(Lt) calls: each failure becomes a Status that
// names the failing call as written, the error's text and enum name, and where it happened
// ("[rank r/K host:pid] file:line"), e.g.
//   CudaError: cudaMalloc(&p, bytes) failed: out of memory (cudaErrorMemoryAllocation)
//   at [rank 1/8 node3:4242] device_cuda.cc:57
// Internal to the runtime (and GPU tests): only CUDA translation units include it.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "zdp/log.h"
#include "zdp/status.h"

namespace zdp {

// "out of memory (cudaErrorMemoryAllocation)".
inline std::string cuda_error_text(cudaError_t err) {
  return std::string(cudaGetErrorString(err)) + " (" + cudaGetErrorName(err) + ")";
}

// The Status of a failed CUDA call `expr` (OK for cudaSuccess). Also clears the calling
// thread's last-error slot, so that a later unrelated cudaGetLastError() (after a kernel
// launch) does not report this error a second time. Sticky errors stay sticky regardless.
inline Status cuda_error_status(cudaError_t err, const char* expr, const char* file, int line) {
  if (err == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();
  return Status(StatusCode::kCudaError,
                std::string(expr) + " failed: " + cuda_error_text(err) + " at " + error_site(file, line));
}

// "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not supported)".
inline std::string cublas_error_text(cublasStatus_t status) {
  return std::string(cublasLtGetStatusName(status)) + " (" + cublasLtGetStatusString(status) + ")";
}

inline Status cublas_error_status(cublasStatus_t status, const char* expr, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status(StatusCode::kCublasError,
                std::string(expr) + " failed: " + cublas_error_text(status) + " at " + error_site(file, line));
}

}  // namespace zdp

// The Status of a CUDA runtime call, as an expression.
#define ZDP_CUDA_STATUS(call) ::zdp::cuda_error_status((call), #call, __FILE__, __LINE__)

// Returns a kCudaError Status from the enclosing function (Status or StatusOr<T>) when
// `call` does not return cudaSuccess.
#define ZDP_CUDA_RETURN_IF_ERROR(call)                                                \
  do {                                                                                \
    const cudaError_t zdp_cuda_err_ = (call);                                         \
    if (zdp_cuda_err_ != cudaSuccess) {                                               \
      return ::zdp::cuda_error_status(zdp_cuda_err_, #call, __FILE__, __LINE__);      \
    }                                                                                 \
  } while (0)

// For destructors and other paths that cannot return: logs the failure and goes on.
#define ZDP_CUDA_CHECK_LOG(call)                                                                     \
  do {                                                                                               \
    const cudaError_t zdp_cuda_err_ = (call);                                                        \
    if (zdp_cuda_err_ != cudaSuccess) {                                                              \
      ZDP_LOG(kError) << ::zdp::cuda_error_status(zdp_cuda_err_, #call, __FILE__, __LINE__).to_string(); \
    }                                                                                                \
  } while (0)

// Returns a kCublasError Status when `call` does not return CUBLAS_STATUS_SUCCESS.
#define ZDP_CUBLAS_RETURN_IF_ERROR(call)                                                \
  do {                                                                                  \
    const cublasStatus_t zdp_cublas_status_ = (call);                                   \
    if (zdp_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                  \
      return ::zdp::cublas_error_status(zdp_cublas_status_, #call, __FILE__, __LINE__); \
    }                                                                                   \
  } while (0)

#define ZDP_CUBLAS_CHECK_LOG(call)                                                                             \
  do {                                                                                                         \
    const cublasStatus_t zdp_cublas_status_ = (call);                                                          \
    if (zdp_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      ZDP_LOG(kError) << ::zdp::cublas_error_status(zdp_cublas_status_, #call, __FILE__, __LINE__).to_string(); \
    }                                                                                                          \
  } while (0)
