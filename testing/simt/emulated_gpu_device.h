// The device the SIMT emulation's model tests run on: a zdp::Device that says it is a
// CUDA device (kind() == kCuda), so that code which branches on the device (trainer/models'
// Ops, the engine's Exec and buffer layout, the optimizer) takes its GPU path, while its
// memory is host memory and its kernels are the emulated ones (testing/simt/simt.h,
// cublaslt_emulation.h).
//
// Its streams are queues: a launch, an async copy, a cuBLASLt call or a host task given to
// a stream runs only when something waits for it: the host (synchronize(), an event's
// wait() or ready()), another stream's queued wait (Stream::wait), or a free (cudaFree waits
// for the whole device). Work nobody waited for has not happened, the latest a GPU could
// run it: a read that no wait orders after the write it needs sees the old bytes, and a
// write that no wait orders after a read of the old value lands first. So a missing
// cudaStreamWaitEvent between the engine's compute and communication streams, or a host
// read (Device::memcpy, which as on the CUDA device waits for no stream) before the stream
// was synchronized, changes the results here, where on a GPU it would depend on timing.
//
// Host waits are counted as the CUDA device counts them (runtime/internal/host_waits.h:
// every memcpy(), a synchronize() or Event::wait() only when the work was unfinished at
// the first query): the queued work runs at the query, so those never count, and a test
// that a step never waits on the host passes here without showing it.
//
// Work that waits for other ranks (the emulated NCCL's collectives, nccl_emulation.h) stays
// unfinished until they arrive, as a kernel spinning on a GPU: a host wait polls it with the
// emulation's lock released, an event's ready() and a stream's queued wait say "not yet", and
// the stream's later work waits. Each stream also keeps the CUDA device's sticky error state
// by position (runtime/internal/stream_error_state.h), which the NCCL communicator fails
// when it gives up on a collective; cuda::stream_handle gives it to the communicator.
#pragma once

#include <cstddef>
#include <memory>

#include "zdp/device.h"

namespace zdp::testing {

// Allocations are 256-byte aligned, as cudaMalloc's are; under ASan the rounding slack past
// the requested bytes is poisoned (a read past a buffer is reported, as on the CPU device).
// `index` is the CUDA device index it reports (ranks on "GPUs" 0 and 1 of one process); all
// of them share one emulated GPU's memory map and queues.
std::unique_ptr<Device> create_emulated_gpu_device(int index = 0);

// Whether [p, p + bytes) lies inside one live allocation of an emulated device (device or
// pinned memory: what its kernels and libraries may touch). Pageable host memory, a freed
// buffer and a range running past its allocation's end are not.
bool in_emulated_allocation(const void* p, size_t bytes);
// What the emulated GPUs' memory map says of `p` (cudaPointerGetAttributes): pageable host
// memory or freed (kNone), or device or pinned memory, with the index of the device that
// allocated it in `device` where given.
enum class EmulatedMemory { kNone, kDevice, kPinned };
EmulatedMemory emulated_memory_kind(const void* p, int* device = nullptr);

// What runs first when the host waits for a stream (synchronize(), an event). kLatest:
// that stream's work alone (and what its queued waits need): the other streams' work waits
// as long as it can, so a stream that reads another's results without waiting for them
// reads old bytes. kOthersFirst: every other stream's queued work first, as far as its own
// waits let it: work a GPU could run early runs early, so a stream that writes what
// another has yet to read (or reads what it has yet to write) without a wait is overtaken.
// kAlternate (the default): the two by turns, wait by wait, so one test run tries both.
enum class StreamOrder { kLatest, kOthersFirst, kAlternate };
void set_stream_order(StreamOrder order);

}  // namespace zdp::testing
