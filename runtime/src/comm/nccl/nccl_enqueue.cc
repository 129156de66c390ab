// nccl_enqueue.h: a collective as NCCL calls; the all-to-all as point-to-point ones.
#include "runtime/src/comm/nccl/nccl_enqueue.h"

#include <cuda_runtime.h>

#include "runtime/src/comm/nccl/nccl_mapping.h"

namespace zdp::nccl {

ncclResult_t enqueue_collective(ncclComm_t comm, int rank, int world_size, const CollectiveDesc& desc, const void* send_buffer,
                                void* recv_buffer, const AllToAllShape* shape, void* scratch, cudaStream_t s) {
  const size_t count = static_cast<size_t>(desc.count);
  const ncclDataType_t type = nccl_type(desc.dtype);
  const ncclRedOp_t op = nccl_op(desc.reduce);
  switch (desc.op) {
    case CollectiveOp::kAllReduce: return ncclAllReduce(send_buffer, recv_buffer, count, type, op, comm, s);
    case CollectiveOp::kReduceScatter: return ncclReduceScatter(send_buffer, recv_buffer, count, type, op, comm, s);
    case CollectiveOp::kAllGather: return ncclAllGather(send_buffer, recv_buffer, count, type, comm, s);
    case CollectiveOp::kBroadcast: return ncclBroadcast(send_buffer, recv_buffer, count, type, desc.root, comm, s);
    case CollectiveOp::kBarrier: return ncclAllReduce(scratch, scratch, 1, ncclInt32, ncclSum, comm, s);
    case CollectiveOp::kAllToAll:
      return enqueue_all_to_all(comm, rank, world_size, desc, send_buffer, recv_buffer, shape, s);
  }
  return ncclInvalidArgument;
}

ncclResult_t enqueue_all_to_all(ncclComm_t comm, int rank, int world_size, const CollectiveDesc& desc, const void* send_buffer,
                                void* recv_buffer, const AllToAllShape* shape, cudaStream_t s) {
  const size_t bytes = static_cast<size_t>(desc.bytes());
  const ncclDataType_t type = nccl_type(desc.dtype);
  const bool shared = shape != nullptr && shape->send_shared;
  auto count_of = [&](int q) {
    return shape == nullptr ? static_cast<size_t>(desc.count) : static_cast<size_t>(shape->counts[static_cast<size_t>(q)]);
  };
  const char* send = static_cast<const char*>(send_buffer);
  auto send_at = [&](int q) { return send + (shared ? 0 : static_cast<size_t>(q) * bytes); };
  char* recv = static_cast<char*>(recv_buffer);
  // No peer chunk to move (a world of 1, or a shape with every peer's count 0): no NCCL
  // call at all, as an empty group has nothing to do.
  bool any_peer = false;
  for (int peer = 0; peer < world_size; ++peer) any_peer = any_peer || (peer != rank && count_of(peer) > 0);
  if (!any_peer) return ncclSuccess;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  for (int peer = 0; peer < world_size; ++peer) {
    if (peer == rank || count_of(peer) == 0) continue;
    r = ncclSend(send_at(peer), count_of(peer), type, peer, comm, s);
    if (r == ncclSuccess || r == ncclInProgress) {
      r = ncclRecv(recv + static_cast<size_t>(peer) * bytes, count_of(peer), type, peer, comm, s);
    }
    if (r != ncclSuccess && r != ncclInProgress) break;
  }
  const ncclResult_t end = ncclGroupEnd();  // ncclInProgress: launch() settles it
  if (r != ncclSuccess && r != ncclInProgress) return r;
  return end;
}

ncclResult_t copy_own_chunk(int rank, const CollectiveDesc& desc, const void* send_buffer, void* recv_buffer,
                            const AllToAllShape* shape, cudaStream_t s) {
  const size_t bytes = static_cast<size_t>(desc.bytes());
  const size_t own = (shape == nullptr ? static_cast<size_t>(desc.count)
                                       : static_cast<size_t>(shape->counts[static_cast<size_t>(rank)])) *
                     dtype_size(desc.dtype);
  if (own == 0) return ncclSuccess;
  const char* send = static_cast<const char*>(send_buffer) +
                     (shape != nullptr && shape->send_shared ? 0 : static_cast<size_t>(rank) * bytes);
  char* recv = static_cast<char*>(recv_buffer) + static_cast<size_t>(rank) * bytes;
  return cudaMemcpyAsync(recv, send, own, cudaMemcpyDeviceToDevice, s) == cudaSuccess ? ncclSuccess
                                                                                      : ncclUnhandledCudaError;
}

}  // namespace zdp::nccl
