// The emulated NCCL's communicator state and its collectives' exchange (nccl_emulation.h):
// each rank writes its part of collective #seq into the communicator's folder, renamed into
// place whole, then reads every rank's once all are there.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace zdp_emu {

struct CommState {
  std::string folder;  // the communicator's, inside set_emulated_nccl_directory's
  int rank = 0;
  int nranks = 1;
  bool blocking = true;
  std::atomic<bool> ready{false};    // every rank has initialised
  std::atomic<bool> aborted{false};  // aborted or destroyed: queued collectives end at once
  std::mutex mu;                     // guards the fields below
  uint64_t issued = 0;               // collectives queued, in order
  uint64_t completed = 0;            // of them, finished on this rank (in order)
  std::vector<long> pids;            // every rank's process, once ready
  ncclResult_t async_error = ncclSuccess;
  std::map<uint64_t, std::vector<std::string>> written;  // this rank's files, by collective
};

// One send or receive of a group.
struct Transfer {
  int peer = 0;
  bool send = false;
  void* ptr = nullptr;
  size_t bytes = 0;
};

struct Op {
  const char* name;  // the NCCL call, for messages
  enum class Kind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kGroup } kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t red;
  int root;
  std::vector<Transfer> transfers;  // kGroup
};

// Collective #seq of one rank, as queued on its stream.
class Exchange {
 public:
  Exchange(std::shared_ptr<CommState> state, Op op, uint64_t seq)
      : state_(std::move(state)), op_(std::move(op)), seq_(seq) {}

  // std::nullopt while an earlier collective of the communicator or another rank's part
  // is missing; "" once done (or the communicator was aborted); else why it failed (also
  // the communicator's asynchronous error).
  std::optional<std::string> poll();

 private:
  std::string deposit();
  std::string combine();
  std::string failed(const std::string& why);
  // With peer_death_is_remote_error(): rank q's process has exited, so the communicator's
  // asynchronous error becomes ncclRemoteError, naming it.
  void report_if_gone(int q);
  std::string part(int from, int to = -1) const;

  std::shared_ptr<CommState> state_;
  Op op_;
  uint64_t seq_;
  bool deposited_ = false;
};

// Bytes of one element of the types zdp uses, else 0.
size_t type_size(ncclDataType_t type);
// Writes `bytes` to `path` under a temporary name, then renames it there (so a reader
// never sees part of it); false with `why` on failure.
bool write_file(const std::string& path, const void* data, size_t bytes, std::string* why);
// ncclSuccess once every rank of the world has initialised (with the same world size),
// ncclInProgress before, or the communicator's asynchronous error.
ncclResult_t check_ready(CommState& state);
// What ncclGetLastError says next (nccl_emulation.cc).
void set_last_error(const std::string& why);
// Whether a dead peer's process is reported as ncclRemoteError
// (set_emulated_nccl_peer_death, nccl_emulation.cc).
bool peer_death_is_remote_error();

}  // namespace zdp_emu
