// Fuzz target: a checkpoint's state.json (runtime/internal/checkpoint_state.h). Input: the
// file's text. Properties: no crash or sanitizer report; an accepted state encodes to text
// that decodes again (so a checkpoint that loads can be saved and loaded once more).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/internal/checkpoint_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  zdp::StatusOr<zdp::CheckpointInfo> info = zdp::checkpoint::decode_state(text, "fuzz/state.json");
  if (!info.ok()) return 0;
  zdp::StatusOr<std::string> encoded = zdp::checkpoint::encode_state(*info);
  if (!encoded.ok()) std::abort();
  if (!zdp::checkpoint::decode_state(*encoded, "fuzz/state.json (re-encoded)").ok()) std::abort();
  return 0;
}
