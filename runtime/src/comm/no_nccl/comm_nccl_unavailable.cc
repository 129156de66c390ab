// NCCL entry point of a build without NCCL: it says so instead of failing to link.
#include "zdp/comm.h"

namespace zdp {

StatusOr<std::unique_ptr<Communicator>> create_nccl_communicator(Store&, int rank, int, Device&,
                                                                 const CommOptions&) {
  return Status(StatusCode::kUnavailable, "rank " + std::to_string(rank) +
                                              ": the NCCL backend was requested, but this zdp build has no NCCL; "
                                              "use backend = \"gloo\"");
}

}  // namespace zdp
