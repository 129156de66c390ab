// Internals of the CUDA device shared with the NCCL communicator: access to a zdp
// Stream's cudaStream_t and its sticky error state (runtime/internal/stream_error_state.h,
// where positions and waits between streams are explained). Not part of the public API.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "runtime/internal/stream_error_state.h"
#include "zdp/device.h"
#include "zdp/status.h"

namespace zdp::cuda {

// What the communicator needs of a CUDA stream.
struct StreamHandle {
  cudaStream_t stream = nullptr;
  int device_index = -1;
  std::shared_ptr<StreamErrorState> state;
};

// The CUDA side of `stream`; kInvalidArgument when it is not a stream of a CUDA device.
StatusOr<StreamHandle> stream_handle(Stream& stream);

}  // namespace zdp::cuda
