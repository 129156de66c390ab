// zdp's NCCL communicator on the emulated NCCL (nccl_emulation.h), for tests that make it
// without that header's renames: the engine's rank runs (testing/engine_runs.h's
// CommFactory), whose inline helpers every test binary must compile alike.
#pragma once

#include <memory>
#include <string>

#include "zdp/comm.h"
#include "zdp/device.h"
#include "zdp/store.h"

namespace zdp {

// create_nccl_communicator (runtime/src/comm/nccl/comm_nccl_init.cc) compiled against the
// emulated NCCL: REQUIRES a device of the emulated GPU and set_emulated_nccl_directory.
StatusOr<std::unique_ptr<Communicator>> create_nccl_communicator_emu(Store& store, int rank, int world_size,
                                                                     Device& device, const CommOptions& options);

}  // namespace zdp

namespace zdp::testing {

// The folder the emulated NCCL's communicators keep their exchanges in (each in a
// subfolder of its own). REQUIRES: set before ncclGetUniqueId, which otherwise takes
// $ZDP_EMULATED_NCCL_DIR (programs a test starts) or fails with ncclInvalidUsage; set
// before forking ranks that use it.
void set_emulated_nccl_directory(const std::string& directory);
// The folder set last ("" when none), for a test that sets its own and restores it.
std::string emulated_nccl_directory();

// What the emulated NCCL does when a rank's process has died while a collective waits for
// it. kSpin (the default): nothing, as NCCL over NVLink or shared memory, which never
// notices; the collective stays unfinished and the communicator's watchdog must time out.
// kRemoteError: ncclCommGetAsyncError reports ncclRemoteError, naming the rank, as NCCL's
// network transports do when the dead peer's connection closes. Set before forking ranks.
enum class EmulatedPeerDeath { kSpin, kRemoteError };
void set_emulated_nccl_peer_death(EmulatedPeerDeath behaviour);

}  // namespace zdp::testing
