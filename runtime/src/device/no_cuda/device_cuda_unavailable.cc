// CUDA entry points of a build without CUDA: they say so instead of failing to link.
#include "runtime/internal/stream_clock.h"
#include "zdp/device.h"

namespace zdp {

int cuda_device_count() { return 0; }

StatusOr<int64_t> cuda_device_memory(int index) {
  return Status(StatusCode::kUnavailable,
                "the memory of cuda:" + std::to_string(index) + " was asked for, but this zdp build has no CUDA");
}

StatusOr<std::unique_ptr<Device>> create_cuda_device(int index) {
  return Status(StatusCode::kUnavailable,
                "cuda:" + std::to_string(index) + " requested, but this zdp build has no CUDA (configure with nvcc on "
                "PATH, or -DZDP_CUDA=ON)");
}

StatusOr<std::unique_ptr<StreamClock>> create_cuda_stream_clock(Device&) {
  return Status(StatusCode::kUnavailable, "a CUDA stream clock was asked for, but this zdp build has no CUDA");
}

}  // namespace zdp
