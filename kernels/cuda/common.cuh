// Helpers of the CUDA launchers: grid sizing for grid-stride loops, the launch check, and
// 16-byte vector loads/stores of 8 elements (two float4 for fp32, one uint4 for 16-bit
// types) with streaming cache hints: optimizer data is touched once per step.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/internal/cuda_check.h"
#include "kernels/common.h"
#include "kernels/philox.h"

namespace zdp::kernels::cuda {

inline constexpr int kBlock = 256;
inline constexpr int kVec = 8;  // elements per thread and loop iteration

// Blocks for a grid-stride loop over `items` thread-items: enough to fill every SM
// (8 blocks of 256 threads = 2048 threads each), no more than the work needs.
inline StatusOr<int> grid_for(int64_t items) {
  int device = 0, sms = 0;
  ZDP_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  ZDP_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t wanted = (items + kBlock - 1) / kBlock;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted, int64_t{sms} * 8)));
}

// True for the errors a kernel raises while it runs, which CUDA reports at a later call
// (sticky: the context is lost), not for a launch's own (configuration, kernel image).
inline bool asynchronous_fault(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorMisalignedAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
      return true;
    default:
      return false;
  }
}

// The status of the launch just made (bad configuration, missing kernel image, ...). A
// fault of an earlier kernel surfaces here too, and the message says so: it named this
// kernel, which did nothing wrong, on exactly the first run on a new GPU.
inline Status check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status::Ok();
  if (asynchronous_fault(err)) {
    return Status(StatusCode::kCudaError, std::string(what) + ": a kernel or copy on this device faulted (" +
                                              cuda_error_text(err) + "; this one, or one before it: CUDA reports a "
                                              "fault at a later call): rerun with CUDA_LAUNCH_BLOCKING=1 to name "
                                              "the kernel, or under compute-sanitizer");
  }
  return Status(StatusCode::kCudaError, std::string(what) + ": kernel launch failed: " + cuda_error_text(err));
}

// True when every pointer is 16-byte aligned, so the 8-element vector path may be used.
template <typename... Ptrs>
bool aligned16(const Ptrs*... ptrs) {
  return ((reinterpret_cast<uintptr_t>(ptrs) % 16 == 0) && ...);
}

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ void load8(const float* p, float (&x)[8]) {
  const float4 a = __ldcs(reinterpret_cast<const float4*>(p));
  const float4 b = __ldcs(reinterpret_cast<const float4*>(p) + 1);
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

__device__ __forceinline__ void load4(const float* p, float (&x)[4]) {
  const float4 a = __ldcs(reinterpret_cast<const float4*>(p));
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
}

__device__ __forceinline__ void load8(const Bf16* p, float (&x)[8]) {
  const uint4 r = __ldcs(reinterpret_cast<const uint4*>(p));
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) x[2 * i] = bf16_lo(w[i]), x[2 * i + 1] = bf16_hi(w[i]);
}

__device__ __forceinline__ void load8(const Half* p, float (&x)[8]) {
  const uint4 r = __ldcs(reinterpret_cast<const uint4*>(p));
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = f16_to_f32_branchless(static_cast<uint16_t>(w[i] & 0xffffu));
    x[2 * i + 1] = f16_to_f32_branchless(static_cast<uint16_t>(w[i] >> 16));
  }
}

__device__ __forceinline__ void store8(float* p, const float (&x)[8]) {
  __stcs(reinterpret_cast<float4*>(p), make_float4(x[0], x[1], x[2], x[3]));
  __stcs(reinterpret_cast<float4*>(p) + 1, make_float4(x[4], x[5], x[6], x[7]));
}

template <typename T>  // Bf16 or Half
__device__ __forceinline__ void store8_16(T* p, const T (&x)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = static_cast<uint32_t>(x[2 * i].bits) | (static_cast<uint32_t>(x[2 * i + 1].bits) << 16);
  __stcs(reinterpret_cast<uint4*>(p), make_uint4(w[0], w[1], w[2], w[3]));
}
__device__ __forceinline__ void store8(Bf16* p, const Bf16 (&x)[8]) { store8_16(p, x); }
__device__ __forceinline__ void store8(Half* p, const Half (&x)[8]) { store8_16(p, x); }

// Stochastic-rounding bits of the 8 elements at global indices first .. first + 7: one
// Philox call when they form one group, two otherwise.
__device__ __forceinline__ void random8(uint64_t seed, uint64_t step, uint64_t first, uint32_t (&bits)[8]) {
  const uint64_t g0 = first / kRandomGroup;
  const Philox4x32 r0 = random_group(seed, step, g0);
  if (first % kRandomGroup == 0) {
#pragma unroll
    for (int e = 0; e < 8; ++e) bits[e] = random_lane16(r0, e);
    return;
  }
  const Philox4x32 r1 = random_group(seed, step, g0 + 1);
  const int lane0 = static_cast<int>(first % kRandomGroup);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int lane = lane0 + e;
    bits[e] = lane < kRandomGroup ? random_lane16(r0, lane) : random_lane16(r1, lane - kRandomGroup);
  }
}

// Weight decay of the 8 elements from global index `first` (one binary search, then a walk).
__device__ __forceinline__ void decay8(const DecaySegment* segments, int64_t num, int64_t first, float default_wd,
                                       float (&wd)[8]) {
  if (num == 0) {
#pragma unroll
    for (int e = 0; e < 8; ++e) wd[e] = default_wd;
    return;
  }
  int64_t cursor = first_segment_ending_after(segments, num, first);
#pragma unroll
  for (int e = 0; e < 8; ++e) wd[e] = weight_decay_at(segments, num, first + e, default_wd, cursor);
}

}  // namespace zdp::kernels::cuda
