// The ZeRO memory formula (see zero_memory.h).
#include "engine/src/zero_memory.h"

#include <string>

namespace zdp {

StatusOr<ZeroMemory> zero_memory_formula(int64_t psi, int world_size, int stage, int compute_bytes, int moments) {
  auto invalid = [](const std::string& message) { return Status(StatusCode::kInvalidArgument, message); };
  if (stage < 0 || stage > 3) return invalid("ZeRO stage must be 0, 1, 2 or 3, got " + std::to_string(stage));
  if (compute_bytes != 2 && compute_bytes != 4) {
    return invalid("compute_bytes must be 2 (bf16/fp16) or 4 (fp32), got " + std::to_string(compute_bytes));
  }
  if (psi < 0) return invalid("parameter count psi must be >= 0, got " + std::to_string(psi));
  if (world_size < 1) return invalid("world_size must be >= 1, got " + std::to_string(world_size));
  if (moments < 0 || moments > 2) {
    return invalid("optimizer moments must be 0, 1 or 2 fp32 tensors, got " + std::to_string(moments));
  }
  const double full = static_cast<double>(psi), share = full / world_size, c = compute_bytes;
  ZeroMemory mem;
  mem.params = c * (stage >= 3 ? share : full);
  mem.grads = c * (stage >= 2 ? share : full);
  const double state = kMasterBytes * (stage >= 1 ? share : full);
  mem.master = state;
  mem.m = moments >= 1 ? state : 0;
  mem.v = moments >= 2 ? state : 0;
  return mem;
}

}  // namespace zdp
