// The emulated NCCL (nccl_emulation.h): communicators whose collectives are queued on the
// emulated GPU's streams as work that finishes once every rank has reached it, exchanging
// their data through files.
#include "testing/simt/nccl_emulation.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "testing/simt/emulated_gpu_device.h"
#include "testing/simt/nccl_exchange.h"

// NCCL's opaque communicator (nccl.h declares struct ncclComm): the emulation's state,
// shared with the collectives still queued when the communicator goes.
struct ncclComm {
  std::shared_ptr<zdp_emu::CommState> state;
};

namespace zdp_emu {
namespace {

constexpr char kIdPrefix[] = "zdp-emulated-nccl:";

std::mutex g_mu;  // guards the three below
std::string g_directory;
std::string g_last_error;
int g_communicators = 0;
std::atomic<bool> g_remote_errors{false};  // set_emulated_nccl_peer_death

ncclResult_t refuse(ncclResult_t result, const std::string& why) {
  set_last_error(why);
  return result;
}

// The send/recv calls of the group the calling thread has open (ncclGroupStart), if any.
struct GroupedTransfer {
  ncclComm_t comm;
  cudaStream_t stream;
  Transfer transfer;
};
thread_local int t_group_depth = 0;
thread_local std::vector<GroupedTransfer> t_group;

// Queues `op` on `stream` as the communicator's next collective: it runs once the ones
// issued before it have, whatever their streams, and finishes once every rank has written
// its part. A nonblocking communicator answers ncclInProgress, as NCCL 2.28's do (the call
// completes in a helper job that ncclCommGetAsyncError reports on).
ncclResult_t issue(ncclComm_t comm, cudaStream_t stream, Op op) {
  if (stream == nullptr) return refuse(ncclInvalidArgument, std::string(op.name) + ": the emulation needs a stream");
  CommState& c = *comm->state;
  if (!c.ready) {
    return refuse(ncclInvalidUsage, std::string(op.name) + " on a communicator still initialising (poll "
                                                          "ncclCommGetAsyncError until it is ready)");
  }
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    seq = c.issued++;
  }
  auto state = comm->state;
  auto exchange = std::make_shared<Exchange>(state, std::move(op), seq);
  reinterpret_cast<StreamQueue*>(stream)->submit_polled([exchange]() { return exchange->poll(); });
  return c.blocking ? ncclSuccess : ncclInProgress;
}

// NCCL's argument checks (argcheck.cc): a communicator, a known type and op, and device
// buffers (CudaPtrCheck).
ncclResult_t check_call(const char* name, ncclComm_t comm, ncclDataType_t type, const ncclRedOp_t* op) {
  if (comm == nullptr) return refuse(ncclInvalidArgument, std::string(name) + ": comm is NULL");
  if (comm->state->aborted) return refuse(ncclInvalidUsage, std::string(name) + ": communicator was aborted");
  if (type_size(type) == 0) {
    return refuse(ncclInvalidArgument, std::string(name) + ": data type " + std::to_string(static_cast<int>(type)) +
                                           " is not one zdp uses (the emulation has fp32, fp16, bf16, int32, int64)");
  }
  if (op != nullptr && *op != ncclSum && *op != ncclAvg && *op != ncclMax) {
    return refuse(ncclInvalidArgument, std::string(name) + ": reduction op " + std::to_string(static_cast<int>(*op)) +
                                           " is not one zdp uses");
  }
  if (op != nullptr && *op == ncclAvg && (type == ncclInt64 || type == ncclInt32)) {
    return refuse(ncclInvalidArgument, std::string(name) + ": ncclAvg on an integer type");
  }
  return ncclSuccess;
}

ncclResult_t check_buffer(const char* name, const char* role, const void* ptr, size_t bytes) {
  if (bytes == 0) return ncclSuccess;
  if (ptr == nullptr) return refuse(ncclInvalidArgument, std::string(name) + ": " + role + " is NULL");
  if (zdp::testing::emulated_memory_kind(ptr) != zdp::testing::EmulatedMemory::kDevice ||
      !zdp::testing::in_emulated_allocation(ptr, bytes)) {
    return refuse(ncclInvalidArgument, std::string(name) + ": " + role + " is not " + std::to_string(bytes) +
                                           " bytes of device memory (CudaPtrCheck)");
  }
  return ncclSuccess;
}

ncclResult_t collective(Op op, ncclComm_t comm, cudaStream_t stream) {
  const ncclRedOp_t* red = op.kind == Op::Kind::kAllReduce || op.kind == Op::Kind::kReduceScatter ? &op.red : nullptr;
  ncclResult_t r = check_call(op.name, comm, op.type, red);
  if (r != ncclSuccess) return r;
  const size_t n = static_cast<size_t>(comm->state->nranks);
  const size_t bytes = op.count * type_size(op.type);
  const bool root = op.kind != Op::Kind::kBroadcast || op.root == comm->state->rank;
  if (op.kind == Op::Kind::kBroadcast && (op.root < 0 || op.root >= comm->state->nranks)) {
    return refuse(ncclInvalidArgument, std::string(op.name) + ": root " + std::to_string(op.root) + " is not a rank");
  }
  r = check_buffer(op.name, "sendbuff", op.send,
                   root ? (op.kind == Op::Kind::kReduceScatter ? bytes * n : bytes) : 0);
  if (r == ncclSuccess) {
    r = check_buffer(op.name, "recvbuff", op.recv, op.kind == Op::Kind::kAllGather ? bytes * n : bytes);
  }
  if (r != ncclSuccess) return r;
  return issue(comm, stream, std::move(op));
}

ncclResult_t point_to_point(const char* name, bool send, const void* ptr, size_t count, ncclDataType_t type, int peer,
                            ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = check_call(name, comm, type, nullptr);
  if (r != ncclSuccess) return r;
  if (peer < 0 || peer >= comm->state->nranks) {
    return refuse(ncclInvalidArgument, std::string(name) + ": peer " + std::to_string(peer) + " is not a rank");
  }
  const size_t bytes = count * type_size(type);
  r = check_buffer(name, send ? "sendbuff" : "recvbuff", ptr, bytes);
  if (r != ncclSuccess) return r;
  t_group.push_back(GroupedTransfer{comm, stream, Transfer{peer, send, const_cast<void*>(ptr), bytes}});
  if (t_group_depth > 0) return ncclSuccess;
  ++t_group_depth;  // a call outside a group is a group of its own
  return nccl_group_end();
}

}  // namespace

bool peer_death_is_remote_error() { return zdp_emu::g_remote_errors; }

void set_last_error(const std::string& why) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_last_error = "emulated NCCL: " + why;
}

ncclResult_t nccl_get_unique_id(ncclUniqueId* id) {
  if (id == nullptr) return refuse(ncclInvalidArgument, "ncclGetUniqueId: id is NULL");
  std::string folder;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    // A program the test starts (dp-launch's ranks) takes the folder from its environment.
    const char* from_env = std::getenv("ZDP_EMULATED_NCCL_DIR");
    const std::string directory = !g_directory.empty() ? g_directory : from_env != nullptr ? from_env : "";
    if (directory.empty()) {
      g_last_error =
          "emulated NCCL: no folder for its exchanges (zdp::testing::set_emulated_nccl_directory, or "
          "$ZDP_EMULATED_NCCL_DIR)";
      return ncclInvalidUsage;
    }
    folder = directory + "/comm-" + std::to_string(::getpid()) + "-" + std::to_string(g_communicators++);
  }
  const std::string text = kIdPrefix + folder;
  if (text.size() >= sizeof(id->internal)) return refuse(ncclInvalidUsage, "folder name too long: " + folder);
  if (::mkdir(folder.c_str(), 0700) != 0) {
    return refuse(ncclSystemError, "cannot create " + folder + ": " + std::strerror(errno));
  }
  std::memset(id, 0, sizeof(*id));
  std::memcpy(id->internal, text.data(), text.size());
  return ncclSuccess;
}

ncclResult_t nccl_comm_init_rank_config(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                        ncclConfig_t* config) {
  if (comm == nullptr) return refuse(ncclInvalidArgument, "ncclCommInitRankConfig: comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return refuse(ncclInvalidArgument, "ncclCommInitRankConfig: rank " + std::to_string(rank) + " of " +
                                           std::to_string(nranks));
  }
  const std::string text(id.internal, strnlen(id.internal, sizeof(id.internal)));
  if (text.rfind(kIdPrefix, 0) != 0) {
    return refuse(ncclInvalidArgument, "ncclCommInitRankConfig: not a unique id of the emulated NCCL");
  }
  auto state = std::make_shared<CommState>();
  state->folder = text.substr(sizeof(kIdPrefix) - 1);
  state->rank = rank;
  state->nranks = nranks;
  state->blocking = config == nullptr || config->blocking != 0;
  std::string why;
  const std::string mine = std::to_string(nranks) + " " + std::to_string(::getpid());
  if (!write_file(state->folder + "/init.r" + std::to_string(rank), mine.data(), mine.size(), &why)) {
    return refuse(ncclSystemError, "ncclCommInitRankConfig: " + why);
  }
  *comm = new ncclComm{state};
  if (!state->blocking) return ncclInProgress;
  ncclResult_t r = ncclInProgress;
  while ((r = check_ready(*state)) == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return r;
}

ncclResult_t nccl_comm_get_async_error(ncclComm_t comm, ncclResult_t* state) {
  if (comm == nullptr || state == nullptr) return refuse(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
  *state = check_ready(*comm->state);
  return ncclSuccess;
}

// Both let the communicator's queued collectives finish without moving anything, as the
// kernels of an aborted communicator exit (zdp destroys only a drained one).
ncclResult_t nccl_comm_abort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  comm->state->aborted = true;
  delete comm;
  return ncclSuccess;
}

ncclResult_t nccl_comm_destroy(ncclComm_t comm) {
  if (comm == nullptr) return refuse(ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
  comm->state->aborted = true;
  delete comm;
  return ncclSuccess;
}

ncclResult_t nccl_get_version(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* nccl_get_error_string(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* nccl_get_last_error(ncclComm_t) {
  thread_local std::string copy;
  std::lock_guard<std::mutex> lock(g_mu);
  copy = g_last_error;
  return copy.c_str();
}

ncclResult_t nccl_all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                             ncclComm_t comm, cudaStream_t stream) {
  return collective(Op{"ncclAllReduce", Op::Kind::kAllReduce, send, recv, count, type, op, 0, {}}, comm, stream);
}

ncclResult_t nccl_reduce_scatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                 ncclComm_t comm, cudaStream_t stream) {
  return collective(Op{"ncclReduceScatter", Op::Kind::kReduceScatter, send, recv, count, type, op, 0, {}}, comm,
                    stream);
}

ncclResult_t nccl_all_gather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                             cudaStream_t stream) {
  return collective(Op{"ncclAllGather", Op::Kind::kAllGather, send, recv, count, type, ncclSum, 0, {}}, comm, stream);
}

ncclResult_t nccl_broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                            cudaStream_t stream) {
  return collective(Op{"ncclBroadcast", Op::Kind::kBroadcast, send, recv, count, type, ncclSum, root, {}}, comm,
                    stream);
}

ncclResult_t nccl_send(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return point_to_point("ncclSend", true, send, count, type, peer, comm, stream);
}

ncclResult_t nccl_recv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  return point_to_point("ncclRecv", false, recv, count, type, peer, comm, stream);
}

ncclResult_t nccl_group_start() {
  ++t_group_depth;
  return ncclSuccess;
}

// The outermost group end issues the group's sends and receives as one collective of
// their communicator (the emulation takes one communicator and stream a group).
ncclResult_t nccl_group_end() {
  if (t_group_depth == 0) return refuse(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<GroupedTransfer> group = std::move(t_group);
  t_group.clear();
  if (group.empty()) return ncclSuccess;
  Op op{"ncclSend/ncclRecv group", Op::Kind::kGroup, nullptr, nullptr, 0, ncclInt8, ncclSum, 0, {}};
  for (const GroupedTransfer& g : group) {
    if (g.comm != group.front().comm || g.stream != group.front().stream) {
      return refuse(ncclInvalidUsage, "a group over several communicators or streams (not emulated)");
    }
    op.transfers.push_back(g.transfer);
  }
  return issue(group.front().comm, group.front().stream, std::move(op));
}

// ---- The CUDA runtime calls of the communicator ------------------------------------

namespace {

// What an event recorded on an emulated stream covers (StreamQueue::mark).
struct RecordedEvent {
  std::function<bool()> reached;  // null until recorded
};

}  // namespace

cudaError_t set_device(int device) {
  return device >= 0 && device < zdp::emulated_cuda_device_count() ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t event_create_with_flags(cudaEvent_t* event, unsigned) {
  if (event == nullptr) return cudaErrorInvalidValue;
  *event = reinterpret_cast<cudaEvent_t>(new RecordedEvent());
  return cudaSuccess;
}

cudaError_t event_record(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr || stream == nullptr) return cudaErrorInvalidValue;  // the emulation has no legacy stream
  reinterpret_cast<RecordedEvent*>(event)->reached = reinterpret_cast<StreamQueue*>(stream)->mark();
  return cudaSuccess;
}

// Runs the stream as far as it can, as a GPU would have by now.
cudaError_t event_query(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidValue;
  auto* e = reinterpret_cast<RecordedEvent*>(event);
  return !e->reached || e->reached() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t event_destroy(cudaEvent_t event) {
  delete reinterpret_cast<RecordedEvent*>(event);
  return cudaSuccess;
}

cudaError_t pointer_get_attributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) return cudaErrorInvalidValue;
  *attributes = cudaPointerAttributes{};
  int device = -1;
  switch (zdp::testing::emulated_memory_kind(ptr, &device)) {
    case zdp::testing::EmulatedMemory::kNone: attributes->type = cudaMemoryTypeUnregistered; break;
    case zdp::testing::EmulatedMemory::kDevice: attributes->type = cudaMemoryTypeDevice; break;
    case zdp::testing::EmulatedMemory::kPinned: attributes->type = cudaMemoryTypeHost; break;
  }
  attributes->device = device;
  return cudaSuccess;
}

cudaError_t memset_now(void* ptr, int value, size_t bytes) {
  if (bytes > 0 && !zdp::testing::in_emulated_allocation(ptr, bytes)) return cudaErrorInvalidValue;
  if (bytes > 0) std::memset(ptr, value, bytes);
  return cudaSuccess;
}

}  // namespace zdp_emu

namespace zdp::testing {

void set_emulated_nccl_directory(const std::string& directory) {
  std::lock_guard<std::mutex> lock(zdp_emu::g_mu);
  zdp_emu::g_directory = directory;
}

std::string emulated_nccl_directory() {
  std::lock_guard<std::mutex> lock(zdp_emu::g_mu);
  return zdp_emu::g_directory;
}

void set_emulated_nccl_peer_death(EmulatedPeerDeath behaviour) {
  zdp_emu::g_remote_errors = behaviour == EmulatedPeerDeath::kRemoteError;
}

}  // namespace zdp::testing

namespace zdp {

StatusOr<std::unique_ptr<Device>> create_emulated_cuda_device(int index) {
  if (index < 0 || index >= emulated_cuda_device_count()) {
    return Status(StatusCode::kInvalidArgument, "no emulated CUDA device " + std::to_string(index) + " (there are " +
                                                    std::to_string(emulated_cuda_device_count()) + ")");
  }
  return testing::create_emulated_gpu_device(index);
}

int emulated_cuda_device_count() { return 2; }

}  // namespace zdp
