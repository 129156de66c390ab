// The CUDA runtime calls of the SIMT emulation that keep none of the scheduler's state
// (simt.h): the launchers' stream-ordered copies and fills, and the errors' names.
#include <cstring>
#include <string>

namespace zdp_emu {

// The launchers copy and fill device memory only (device to device).
cudaError_t memcpy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  submit(stream, [=] {
    std::memmove(dst, src, bytes);
    return std::string();
  });
  return cudaSuccess;
}

cudaError_t memcpy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                            cudaMemcpyKind, cudaStream_t stream) {
  if (width > dpitch || width > spitch) return cudaErrorInvalidValue;  // the runtime's check
  if (width == 0 || height == 0) return cudaSuccess;
  submit(stream, [=] {
    for (size_t row = 0; row < height; ++row) {
      std::memmove(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch, width);
    }
    return std::string();
  });
  return cudaSuccess;
}

cudaError_t memset_async(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  submit(stream, [=] {
    std::memset(dst, value, bytes);
    return std::string();
  });
  return cudaSuccess;
}

const char* error_name(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaError (not one the emulation reports)";
  }
}

const char* error_string(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorLaunchFailure: return "unspecified launch failure (the emulation's reason is on stderr)";
    default: return "an error the emulation does not report";
  }
}

}  // namespace zdp_emu
