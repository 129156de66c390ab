// SHA-256 (FIPS 180-4), incremental: what deterministic mode prints so that a user can
// compare two runs' parameters by one line (trainer/loop/param_hash.h). Not for secrets
// (no constant-time claims), just a stable, well-known digest.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace zdp {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  // The digest of everything updated so far. The object is spent afterwards.
  std::array<uint8_t, 32> finish();
  // finish() as 64 lowercase hex digits (sha256sum's spelling).
  std::string finish_hex();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;      // bytes in buf_
  uint64_t length_ = 0;  // bytes updated in all
};

}  // namespace zdp
