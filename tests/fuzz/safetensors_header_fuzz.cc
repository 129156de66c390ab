// Fuzz target: the safetensors header parser (zdp/safetensors.h decode_header). Input: the
// JSON after the 8-byte length. Properties: no crash or sanitizer report; an accepted
// header has ascending, hole-free offsets that agree with dtype x shape, and encodes to
// bytes that decode to the same tensors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "zdp/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  zdp::StatusOr<zdp::safetensors::Header> header = zdp::safetensors::decode_header(json, "fuzz.safetensors");
  if (!header.ok()) return 0;
  int64_t expect = 0;
  for (const zdp::safetensors::TensorInfo& t : header->tensors) {
    if (t.begin != expect || t.end < t.begin) std::abort();
    if (t.bytes() != t.numel() * zdp::safetensors::dtype_size(t.dtype)) std::abort();
    expect = t.end;
  }
  const std::string encoded = zdp::safetensors::encode_header(*header);
  if (encoded.size() < 8) std::abort();
  zdp::StatusOr<zdp::safetensors::Header> again =
      zdp::safetensors::decode_header(encoded.substr(8), "fuzz.safetensors (re-encoded)");
  if (!again.ok() || again->tensors.size() != header->tensors.size()) std::abort();
  for (size_t i = 0; i < header->tensors.size(); ++i) {
    const auto& a = header->tensors[i];
    const auto& b = again->tensors[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.begin != b.begin || a.end != b.end) {
      std::abort();
    }
  }
  return 0;
}
