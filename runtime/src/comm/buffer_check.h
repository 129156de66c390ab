// Which memory a GPU communicator may be handed, as a pure rule (no CUDA types, so the CPU
// build compiles and tests it). NCCL's kernels dereference the pointers on the GPU:
// pageable host memory (a std::vector, a stack variable) is an illegal address there,
// a sticky error that kills the CUDA context; pinned host memory works only by crossing
// PCIe for every element. The NCCL communicator classifies each buffer with
// cudaPointerGetAttributes and refuses what this rule refuses, naming the collective, so a
// one-GPU test (where NCCL's single-rank path never touches the memory) catches the class.
#pragma once

#include <string>

namespace zdp {

// cudaPointerGetAttributes' memory type (cudaMemoryType), or kUnknown when it failed.
enum class PointerKind { kUnregistered, kPinnedHost, kDevice, kManaged, kUnknown };
const char* to_string(PointerKind kind);

// Empty when a collective on device `comm_device` may use `ptr`: device memory of that
// device, or managed memory. Otherwise why not, starting with `role` ("send buffer").
// `pointer_device` is the device the memory belongs to (device memory only).
std::string refuse_collective_buffer(const void* ptr, PointerKind kind, int pointer_device, int comm_device,
                                     const char* role);

}  // namespace zdp
