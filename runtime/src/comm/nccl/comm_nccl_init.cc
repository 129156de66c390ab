// create_nccl_communicator: rank 0's NCCL unique id reaches the other ranks through the
// store; every rank then checks in through the store (with the timeout), so that a rank
// that never starts fails the others there instead of hanging them inside NCCL, and
// initialises a nonblocking communicator (ncclConfig_t::blocking = 0): no call waits
// inside NCCL, so the initialisation itself (a rank that dies after checking in) and every
// later call are bounded by the timeout, and an abort never races a thread inside NCCL
// (NCCL's fault-tolerance model; comm_nccl.cc).
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "core/internal/cuda_check.h"
#include "core/internal/nccl_check.h"
#include "runtime/src/comm/close_on_exec.h"
#include "runtime/src/comm/nccl/nccl_communicator.h"
#include "runtime/src/comm/nccl/nccl_wait.h"
#include "zdp/comm.h"
#include "zdp/log.h"
#include "zdp/store.h"

namespace zdp {

using nccl::Clock;
using nccl::format_duration;

StatusOr<std::unique_ptr<Communicator>> create_nccl_communicator(Store& store, int rank, int world_size,
                                                                 Device& device, const CommOptions& options) {
  const std::string who = "rank " + std::to_string(rank) + ": nccl communicator";
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return Status(StatusCode::kInvalidArgument,
                  who + ": rank " + std::to_string(rank) + " is not in a world of " + std::to_string(world_size));
  }
  if (device.kind() != DeviceKind::kCuda) {
    return Status(StatusCode::kInvalidArgument,
                  who + ": NCCL needs a CUDA device, got '" + device.name() + "'; use backend = \"gloo\"");
  }
  set_process_identity(rank, world_size);

  // Every rank counts its own NCCL communicators in the store, so the k-th communicator of
  // every rank meets under the same key, also when the ranks are threads of one process.
  StatusOr<int64_t> generation = store.add("nccl/generation/rank" + std::to_string(rank), 1);
  if (!generation.ok()) return generation.status().with_context(who);
  const std::string key = "nccl/unique_id/" + std::to_string(*generation - 1);

  // NCCL's bootstrap sockets (rank 0's listening one opens in ncclGetUniqueId) and those it
  // opens at initialisation: marked close-on-exec below. Connections it opens later, at a
  // first collective, keep NCCL's own flags.
  const NewDescriptorsCloseOnExec close_on_exec;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank == 0) {
    ZDP_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    Status set = store.set(key, std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
    if (!set.ok()) return set.with_context(who + ": publishing the NCCL unique id");
  } else {
    StatusOr<std::string> value = store.get(key, options.timeout);
    if (!value.ok()) return value.status().with_context(who + ": waiting for rank 0's NCCL unique id");
    if (value->size() != sizeof(id)) {
      return Status(StatusCode::kInvalidArgument, who + ": store key '" + key + "' holds " +
                                                      std::to_string(value->size()) + " bytes, not an NCCL unique id (" +
                                                      std::to_string(sizeof(id)) + " bytes)");
    }
    std::memcpy(&id, value->data(), sizeof(id));
  }

  // Check in: the initialisation below waits for every rank, so it starts only once all
  // of them are here (a rank that dies in the next moments makes it time out below).
  const auto start = Clock::now();
  const std::string check_in = "nccl/ready/" + std::to_string(*generation - 1) + "/";
  Status checked_in = store.set(check_in + std::to_string(rank), "1");
  std::vector<std::string> everyone;
  for (int r = 0; r < world_size; ++r) everyone.push_back(check_in + std::to_string(r));
  if (checked_in.ok()) checked_in = store.wait(everyone, options.timeout);
  if (!checked_in.ok()) {
    return Status(checked_in.code() == StatusCode::kTimeout ? StatusCode::kTimeout : checked_in.code(),
                  who + ": not every rank of the world of " + std::to_string(world_size) + " checked in within " +
                      format_duration(options.timeout) + " (are all ranks starting?): " + checked_in.message());
  }

  ZDP_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index()));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, world_size, id, rank, &config);
  if (r == ncclInProgress && comm != nullptr) r = nccl::settle(comm, Clock::now() + options.timeout, nullptr);
  close_on_exec.mark();
  if (r == ncclInProgress) {
    if (comm != nullptr) (void)ncclCommAbort(comm);
    return Status(StatusCode::kTimeout, who + ": ncclCommInitRankConfig (world " + std::to_string(world_size) + ", " +
                                            device.name() + ") did not finish within " +
                                            format_duration(options.timeout) +
                                            " (a rank may have died or hung after checking in)");
  }
  if (r != ncclSuccess) {
    if (comm != nullptr) (void)ncclCommAbort(comm);
    return Status(nccl_status_code(r), who + ": ncclCommInitRankConfig (world " + std::to_string(world_size) + ", " +
                                           device.name() + ") failed: " + nccl_error_text(r) + " at " +
                                           error_site(__FILE__, __LINE__));
  }

  // From here on an error must not leak the communicator.
  StatusOr<DeviceBuffer> scratch = device.allocate(sizeof(int32_t), MemCategory::kWorkspace);
  Status ready = scratch.status();
  if (ready.ok()) ready = ZDP_CUDA_STATUS(cudaMemset(scratch->data(), 0, sizeof(int32_t)));
  if (!ready.ok()) {
    (void)ncclCommAbort(comm);
    return ready.with_context(who + ": barrier scratch");
  }

  int version = 0;
  (void)ncclGetVersion(&version);
  ZDP_LOG(kInfo) << "nccl communicator ready: rank " << rank << "/" << world_size << " on " << device.name()
                 << " (NCCL " << version << ") in "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count() << " ms";
  return nccl::make_communicator(rank, world_size, device, options, comm, std::move(scratch).value());
}

}  // namespace zdp
