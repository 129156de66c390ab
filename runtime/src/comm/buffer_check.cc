// refuse_collective_buffer (buffer_check.h).
#include "runtime/src/comm/buffer_check.h"

#include <cstdio>

namespace zdp {

const char* to_string(PointerKind kind) {
  switch (kind) {
    case PointerKind::kUnregistered: return "pageable host memory";
    case PointerKind::kPinnedHost: return "pinned host memory";
    case PointerKind::kDevice: return "device memory";
    case PointerKind::kManaged: return "managed memory";
    case PointerKind::kUnknown: return "memory the CUDA runtime does not know";
  }
  return "?";
}

std::string refuse_collective_buffer(const void* ptr, PointerKind kind, int pointer_device, int comm_device,
                                     const char* role) {
  char address[32];
  std::snprintf(address, sizeof(address), "%p", ptr);
  const std::string what = std::string(role) + " " + address + " is ";
  const std::string fix = "; NCCL reads and writes it on the GPU: pass memory of cuda:" +
                          std::to_string(comm_device) + " (stage host values through a device buffer)";
  switch (kind) {
    case PointerKind::kDevice:
      if (pointer_device == comm_device) return "";
      return what + "device memory of cuda:" + std::to_string(pointer_device) + ", not of the communicator's cuda:" +
             std::to_string(comm_device) + fix;
    case PointerKind::kManaged: return "";
    case PointerKind::kUnregistered:
      return what + "pageable host memory (a host vector or stack variable?), an illegal address on the GPU" + fix;
    case PointerKind::kPinnedHost:
      return what + "pinned host memory, which NCCL would read across PCIe element by element" + fix;
    case PointerKind::kUnknown: return what + "not known to the CUDA runtime (a freed or invalid pointer?)" + fix;
  }
  return what + "of an unknown kind" + fix;
}

}  // namespace zdp
