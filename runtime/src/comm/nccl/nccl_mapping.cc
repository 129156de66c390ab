// nccl_mapping.h: zdp's enums in NCCL's terms, and buffer classification.
#include "runtime/src/comm/nccl/nccl_mapping.h"

#include <cuda_runtime.h>

namespace zdp::nccl {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return ncclFloat32;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
  }
  return ncclSum;
}

const char* nccl_call_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "ncclAllReduce";
    case CollectiveOp::kReduceScatter: return "ncclReduceScatter";
    case CollectiveOp::kAllGather: return "ncclAllGather";
    case CollectiveOp::kBroadcast: return "ncclBroadcast";
    case CollectiveOp::kBarrier: return "ncclAllReduce (barrier)";
    case CollectiveOp::kAllToAll: return "ncclSend/ncclRecv (all_to_all)";
  }
  return "?";
}

PointerKind pointer_kind(const void* ptr, int* device) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: an invalid pointer, reported as such
    return PointerKind::kUnknown;
  }
  *device = attr.device;
  switch (attr.type) {
    case cudaMemoryTypeUnregistered: return PointerKind::kUnregistered;
    case cudaMemoryTypeHost: return PointerKind::kPinnedHost;
    case cudaMemoryTypeDevice: return PointerKind::kDevice;
    case cudaMemoryTypeManaged: return PointerKind::kManaged;
  }
  return PointerKind::kUnknown;
}

}  // namespace zdp::nccl
