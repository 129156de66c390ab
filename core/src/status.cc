// Status formatting and the error-site string used by every check macro.
#include "zdp/status.h"

#include <unistd.h>

#include <cstring>

#include "zdp/log.h"

namespace zdp {

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kTimeout: return "Timeout";
    case StatusCode::kPeerFailure: return "PeerFailure";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kCudaError: return "CudaError";
    case StatusCode::kNcclError: return "NcclError";
    case StatusCode::kCublasError: return "CublasError";
    case StatusCode::kOutOfMemory: return "OutOfMemory";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(zdp::to_string(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

void Status::throw_if_error() const {
  if (!ok()) throw Error(*this);
}

std::string error_site(const char* file, int line) {
  const ProcessIdentity id = process_identity();
  const char* base = std::strrchr(file, '/');
  const std::string who = id.role.empty() ? "rank " + std::to_string(id.rank) + "/" + std::to_string(id.world_size)
                                           : id.role;
  return "[" + who + " " + id.host + ":" + std::to_string(::getpid()) + "] " + (base ? base + 1 : file) + ":" +
         std::to_string(line);
}

}  // namespace zdp
