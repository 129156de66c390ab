// The device the SIMT emulation's model tests run on: a zdp::Device that says it is a
// CUDA device (kind() == kCuda), so that code which branches on the device (trainer/models'
// Ops, the engine's buffer layout) takes its GPU path, while its memory is host memory and
// its streams do their work at once, in the calling thread, as the emulated kernel
// launches and the emulated cuBLASLt do (testing/simt/simt.h, cublaslt_emulation.h). One
// order for everything, the order of the calls: what this device cannot show is a missing
// wait between two streams (each wait here is already satisfied). Host waits are counted
// as the CUDA device counts them (runtime/internal/host_waits.h: every memcpy(), and a
// synchronize() or Event::wait() only when the work was unfinished, which here it never
// is): a test that a step never waits on the host passes here without showing it.
#pragma once

#include <memory>

#include "zdp/device.h"

namespace zdp::testing {

// Allocations are 256-byte aligned, as cudaMalloc's are; under ASan the rounding slack past
// the requested bytes is poisoned (a read past a buffer is reported, as on the CPU device).
std::unique_ptr<Device> create_emulated_gpu_device();

}  // namespace zdp::testing
