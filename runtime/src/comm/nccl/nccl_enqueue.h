// One collective as NCCL calls on a stream. NCCL has no all-to-all: one group of a send and a receive per peer (NCCL runs them
// concurrently), and the own chunk as a copy on the same stream, queued only once NCCL
// has settled the group (on a nonblocking communicator nothing may be queued on its
// stream before: comm_nccl.cc). A shape trims each chunk to its peer's count (0: nothing
// posted; the sizes are symmetric) and may send one shared chunk to every peer.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "zdp/comm.h"

namespace zdp::nccl {

// The NCCL call (or group) of `desc`; ncclInProgress when it is still settling. A barrier is
// an all-reduce of the one int32 at `scratch` (NCCL has none: the cheapest full exchange).
ncclResult_t enqueue_collective(ncclComm_t comm, int rank, int world_size, const CollectiveDesc& desc, const void* send_buffer,
                                void* recv_buffer, const AllToAllShape* shape, void* scratch, cudaStream_t s);
// The all-to-all's group of sends and receives; ncclInProgress when it is still settling.
ncclResult_t enqueue_all_to_all(ncclComm_t comm, int rank, int world_size, const CollectiveDesc& desc, const void* send_buffer,
                                void* recv_buffer, const AllToAllShape* shape, cudaStream_t s);
// The copy of this rank's own chunk.
ncclResult_t copy_own_chunk(int rank, const CollectiveDesc& desc, const void* send_buffer, void* recv_buffer,
                            const AllToAllShape* shape, cudaStream_t s);

}  // namespace zdp::nccl
