// Check macros for NCCL calls: a failure becomes a Status that names the failing call as
// written, NCCL's error text (with its last error message) and where it happened, e.g.
//   NcclError: ncclGetUniqueId(&id) failed: unhandled system error (last NCCL error: ...)
//   at [rank 0/8 node3:4242] comm_nccl_init.cc:49
// A remote error (a peer died, the network broke) is a kPeerFailure instead. Internal:
// only the NCCL communicator's translation units include it.
#pragma once

#include <nccl.h>

#include <string>

#include "zdp/status.h"

namespace zdp {

// "invalid usage (run with NCCL_DEBUG=WARN for details) (last NCCL error: ...)".
inline std::string nccl_error_text(ncclResult_t result) {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(nullptr);  // the argument is unused by NCCL
  if (last != nullptr && *last != '\0') text += " (last NCCL error: " + std::string(last) + ")";
  return text;
}

// A remote error means a peer died or the network broke: report it as such.
inline StatusCode nccl_status_code(ncclResult_t result) {
  return result == ncclRemoteError ? StatusCode::kPeerFailure : StatusCode::kNcclError;
}

// The Status of a failed NCCL call `expr` (OK for ncclSuccess).
inline Status nccl_error_status(ncclResult_t result, const char* expr, const char* file, int line) {
  if (result == ncclSuccess) return Status::Ok();
  return Status(nccl_status_code(result),
                std::string(expr) + " failed: " + nccl_error_text(result) + " at " + error_site(file, line));
}

}  // namespace zdp

// Returns a kNcclError (kPeerFailure for ncclRemoteError) Status when `call` does not
// return ncclSuccess. Calls that may answer ncclInProgress are handled explicitly instead.
#define ZDP_NCCL_RETURN_IF_ERROR(call)                                              \
  do {                                                                              \
    const ncclResult_t zdp_nccl_result_ = (call);                                   \
    if (zdp_nccl_result_ != ncclSuccess) {                                          \
      return ::zdp::nccl_error_status(zdp_nccl_result_, #call, __FILE__, __LINE__); \
    }                                                                               \
  } while (0)
