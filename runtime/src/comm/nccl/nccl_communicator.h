// The NCCL communicator's constructor, for create_nccl_communicator (comm_nccl_init.cc),
// which rendezvouses on the unique id and initialises `comm` before handing it over.
#pragma once

#include <nccl.h>

#include <memory>

#include "zdp/comm.h"
#include "zdp/device.h"

namespace zdp::nccl {

// Takes ownership of the initialised communicator `comm` and of `scratch` (one zeroed
// int32 for barrier()), and starts the watchdog thread.
std::unique_ptr<Communicator> make_communicator(int rank, int world_size, Device& device, const CommOptions& options,
                                                ncclComm_t comm, DeviceBuffer scratch);

}  // namespace zdp::nccl
