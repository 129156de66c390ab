// param_sha256 (param_hash.h).
#include "trainer/loop/param_hash.h"

#include <cstdint>
#include <cstring>

#include "core/internal/sha256.h"

namespace zdp::trainer {

StatusOr<std::string> param_sha256(Engine& engine) {
  static_assert(sizeof(float) == 4);
  Sha256 sha;
  const int n = static_cast<int>(engine.param_names().size());
  for (int i = 0; i < n; ++i) {
    ZDP_ASSIGN_OR_RETURN(const std::vector<float> master, engine.gather_master(Param{i}));
    if (engine.rank() != 0) continue;
    for (float v : master) {  // little-endian whatever the host's order
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      const uint8_t le[4] = {static_cast<uint8_t>(bits), static_cast<uint8_t>(bits >> 8),
                             static_cast<uint8_t>(bits >> 16), static_cast<uint8_t>(bits >> 24)};
      sha.update(le, 4);
    }
  }
  return engine.rank() == 0 ? sha.finish_hex() : std::string();
}

}  // namespace zdp::trainer
