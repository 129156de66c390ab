// NCCL on the emulated GPU (testing/simt/emulated_gpu_device.h), for running zdp's NCCL
// communicator (runtime/src/comm/nccl/) unchanged with several ranks where no GPU is, and
// none with two GPUs has ever been lent: ranks as threads of one process (each on its own
// emulated device index) or as forked processes.
//
// Force-included (after simt.h) into a second copy of the communicator's sources and into
// the tests that create it. Its macros send the NCCL calls and the few CUDA runtime calls
// the communicator makes (events, cudaSetDevice, cudaPointerGetAttributes, cudaMemset) to
// the emulation, and rename the copy's symbols (namespace nccl -> nccl_emu,
// create_nccl_communicator -> create_nccl_communicator_emu, nccl_check.h's helpers) so
// that it links beside the real one.
//
// What it emulates, from NCCL 2.28's documentation and its argument checks (argcheck.cc):
// - A nonblocking communicator (ncclConfig_t::blocking = 0): ncclCommInitRankConfig answers
//   ncclInProgress, and ncclCommGetAsyncError says ncclInProgress until every rank of the
//   world has initialised. A blocking one waits for them in the call.
// - The collectives of zdp's communicator (all-reduce with sum, avg and max, reduce-scatter,
//   all-gather, broadcast) and grouped send/recv, on fp32, fp16, bf16, int32 (the barrier)
//   and int64. A call
//   checks its arguments as NCCL does (a null or non-device buffer, a bad root or peer, an
//   unknown type or op: ncclInvalidArgument, with ncclGetLastError's text), then queues the
//   collective on the stream as work that finishes only once every rank has reached it, as
//   NCCL's kernel spins until its peers do: the stream's later work, its events and its
//   synchronize wait, and a rank that never comes leaves it unfinished until the
//   communicator is aborted (ncclCommAbort lets it finish without moving anything, as the
//   aborted kernels exit). One communicator's collectives run in the order they were
//   issued, whatever their streams (NCCL orders them through its own stream).
// - The data moves through files in a folder the test gives (set_emulated_nccl_directory;
//   the unique id carries the communicator's subfolder), so ranks in separate processes
//   need nothing else. Each rank writes its contribution (renamed into place whole), then
//   reads the others'. Reductions go in rank order, each partial result rounded to the
//   type (fp16 and bf16 via fp32), as NCCL's ring rounds at every hop; avg multiplies each
//   input by 1/n first (NCCL's pre-multiplied sum for floating types).
// - When it runs, a collective checks again that its buffers are live device memory of the
//   emulated GPU (a freed buffer is the illegal address a GPU would fault on) and fails
//   its stream naming the call.
// - A peer whose process died: by default nothing notices (as NCCL over NVLink or shared
//   memory: the communicator's watchdog must time out); with EmulatedPeerDeath::kRemoteError
//   (emulated_nccl_communicator.h) the waiting rank's asynchronous error becomes
//   ncclRemoteError, naming it, as NCCL's network transports report a closed connection.
// Not emulated: NCCL's algorithms, protocols and timing.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "testing/simt/emulated_nccl_communicator.h"  // set_emulated_nccl_directory
#include "zdp/device.h"
#include "zdp/status.h"

namespace zdp {

// The emulated GPUs as the tests of the NCCL communicator ask for CUDA devices
// (create_cuda_device, cuda_device_count): two of them, so that ranks as threads of one
// process each have a device index of their own.
StatusOr<std::unique_ptr<Device>> create_emulated_cuda_device(int index);
int emulated_cuda_device_count();

}  // namespace zdp

namespace zdp_emu {

ncclResult_t nccl_get_unique_id(ncclUniqueId* id);
ncclResult_t nccl_comm_init_rank_config(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config);
ncclResult_t nccl_comm_get_async_error(ncclComm_t comm, ncclResult_t* state);
ncclResult_t nccl_comm_abort(ncclComm_t comm);
ncclResult_t nccl_comm_destroy(ncclComm_t comm);
ncclResult_t nccl_get_version(int* version);
const char* nccl_get_error_string(ncclResult_t result);
const char* nccl_get_last_error(ncclComm_t comm);
ncclResult_t nccl_all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                             ncclComm_t comm, cudaStream_t stream);
ncclResult_t nccl_reduce_scatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                 ncclComm_t comm, cudaStream_t stream);
ncclResult_t nccl_all_gather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                             cudaStream_t stream);
ncclResult_t nccl_broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t nccl_send(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t nccl_recv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t nccl_group_start();
ncclResult_t nccl_group_end();

// The CUDA runtime calls of the communicator that simt.h does not answer. Events mark a
// position of an emulated stream (StreamQueue); a query runs the stream as far as it can.
cudaError_t set_device(int device);
cudaError_t event_create_with_flags(cudaEvent_t* event, unsigned flags);
cudaError_t event_record(cudaEvent_t event, cudaStream_t stream);
cudaError_t event_query(cudaEvent_t event);
cudaError_t event_destroy(cudaEvent_t event);
cudaError_t pointer_get_attributes(cudaPointerAttributes* attributes, const void* ptr);
cudaError_t memset_now(void* ptr, int value, size_t bytes);

}  // namespace zdp_emu

#define ncclGetUniqueId ::zdp_emu::nccl_get_unique_id
#define ncclCommInitRankConfig ::zdp_emu::nccl_comm_init_rank_config
#define ncclCommGetAsyncError ::zdp_emu::nccl_comm_get_async_error
#define ncclCommAbort ::zdp_emu::nccl_comm_abort
#define ncclCommDestroy ::zdp_emu::nccl_comm_destroy
#define ncclGetVersion ::zdp_emu::nccl_get_version
#define ncclGetErrorString ::zdp_emu::nccl_get_error_string
#define ncclGetLastError ::zdp_emu::nccl_get_last_error
#define ncclAllReduce ::zdp_emu::nccl_all_reduce
#define ncclReduceScatter ::zdp_emu::nccl_reduce_scatter
#define ncclAllGather ::zdp_emu::nccl_all_gather
#define ncclBroadcast ::zdp_emu::nccl_broadcast
#define ncclSend ::zdp_emu::nccl_send
#define ncclRecv ::zdp_emu::nccl_recv
#define ncclGroupStart ::zdp_emu::nccl_group_start
#define ncclGroupEnd ::zdp_emu::nccl_group_end

#define cudaSetDevice ::zdp_emu::set_device
#define cudaEventCreateWithFlags ::zdp_emu::event_create_with_flags
#define cudaEventRecord ::zdp_emu::event_record
#define cudaEventQuery ::zdp_emu::event_query
#define cudaEventDestroy ::zdp_emu::event_destroy
#define cudaPointerGetAttributes ::zdp_emu::pointer_get_attributes
#define cudaMemset ::zdp_emu::memset_now

// The emulated copy's own names (see the file comment).
#define nccl nccl_emu
#define create_nccl_communicator create_nccl_communicator_emu
#define nccl_error_text nccl_error_text_emu
#define nccl_status_code nccl_status_code_emu
#define nccl_error_status nccl_error_status_emu
// The tests' devices (nccl_comm_test): the emulated ones.
#define create_cuda_device create_emulated_cuda_device
#define cuda_device_count emulated_cuda_device_count
