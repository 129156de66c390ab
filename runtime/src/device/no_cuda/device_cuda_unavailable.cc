// CUDA entry points of a build without CUDA: they say so instead of failing to link.
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

}  // namespace zdp
