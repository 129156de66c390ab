// The CUDA side of the public API: the one zdp header that includes a CUDA header
// (cuda_runtime_api.h), for trainers that launch their own kernels on the engine's
// streams. Only in builds with CUDA (zdp/build_config.h: ZDP_HAVE_CUDA); every other
// public header stays free of CUDA, so CPU trainers never need the toolkit.
#pragma once

#include "zdp/build_config.h"

#if !ZDP_HAVE_CUDA
#error "zdp/cuda.h: this zdp was built without CUDA (ZDP_HAVE_CUDA is 0)"
#endif

#include <cuda_runtime_api.h>

#include "zdp/device.h"

namespace zdp {

// Threads: zdp::init makes the rank's GPU (LOCAL_RANK's) current on the calling thread,
// and the engine launches its kernels on whatever device is current. Call the engine, and
// launch on its streams, from that thread, or make the rank's device current first
// (cudaSetDevice(ctx.device().index())) on any other: a kernel on a stream of another
// device than the current one fails to launch.
//
// The cudaStream_t of a stream of a CUDA device, e.g. cuda_stream(engine.compute_stream())
// for the trainer's forward and backward kernels. REQUIRES: stream.device().kind() ==
// DeviceKind::kCuda. A CPU stream gives nullptr, which CUDA would take for the legacy
// default stream: check the device kind first when the rank may run on the CPU.
inline cudaStream_t cuda_stream(Stream& stream) { return static_cast<cudaStream_t>(stream.native_handle()); }

}  // namespace zdp
