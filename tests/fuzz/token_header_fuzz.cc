// Fuzz target: the token-file header (runtime/internal/token_header.h decode_token_header). Input:
// a whole token file. Properties: no crash or sanitizer report; an accepted file's count
// is non-negative and accounts for every byte after the header.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "runtime/internal/token_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int64_t bytes = static_cast<int64_t>(size);
  const void* header = bytes >= zdp::kTokenFileHeaderBytes ? data : nullptr;
  zdp::StatusOr<int64_t> count = zdp::decode_token_header(header, bytes, "fuzz.bin");
  if (!count.ok()) return 0;
  if (*count < 0 || zdp::kTokenFileHeaderBytes + 2 * *count != bytes) std::abort();
  return 0;
}
