// The CUDA device a GPU test runs on: the GPU, or in a build of the SIMT emulation
// (ZDP_SIMT_EMULATION, testing/simt/) the emulated one: kind() kCuda, so the code under test
// takes its GPU path, with the emulated kernels, cuBLASLt and queued streams.
#pragma once

#include <memory>

#include "testing/gpu_probe.h"
#include "zdp/device.h"
#if defined(ZDP_SIMT_EMULATION)
#include "testing/simt/emulated_gpu_device.h"
#endif

namespace zdp::testing {

inline StatusOr<std::unique_ptr<Device>> test_cuda_device() {
#if defined(ZDP_SIMT_EMULATION)
  return create_emulated_gpu_device();
#else
  return create_cuda_device(0);
#endif
}

// Whether test_cuda_device() has a device to give, asked without initialising CUDA in this
// process (gpu_probe.h: for tests that fork GPU ranks).
inline bool test_cuda_device_without_init() {
#if defined(ZDP_SIMT_EMULATION)
  return true;
#else
  return cuda_devices_without_init() > 0;
#endif
}

}  // namespace zdp::testing
