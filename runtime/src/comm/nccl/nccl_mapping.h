// zdp's collective vocabulary in NCCL's terms (data types, reduce ops, call names) and
// where a buffer lives (cudaPointerGetAttributes), for the communicator (comm_nccl.cc).
#pragma once

#include <nccl.h>

#include "runtime/src/comm/buffer_check.h"
#include "zdp/comm.h"

namespace zdp::nccl {

ncclDataType_t nccl_type(DType dtype);
ncclRedOp_t nccl_op(ReduceOp op);
// The NCCL call a collective runs as ("ncclAllReduce"), for messages.
const char* nccl_call_name(CollectiveOp op);
// The kind of memory `ptr` is, and (device memory) its device; kUnknown when CUDA cannot
// say (an invalid pointer).
PointerKind pointer_kind(const void* ptr, int* device);

}  // namespace zdp::nccl
