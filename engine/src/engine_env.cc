// EngineEnv: an engine's rank, device, communicator and error conventions.
#include "engine/src/engine_env.h"

namespace zdp {

EngineEnv::EngineEnv(Context& context)
    : ctx(context),
      ctx_life(context.lifetime()),
      device(context.device()),
      comm(context.comm()),
      rank(context.rank()),
      world(context.world_size()),
      who("rank " + std::to_string(context.rank())),
      timeout(context.collective_timeout()) {}

Status EngineEnv::context_alive(const char* call) const {
  if (!ctx_life.expired()) return Status::Ok();
  return Status(StatusCode::kInvalidArgument,
                who + ": " + call + ": the engine's Context was destroyed or moved from (it must outlive the engine, "
                      "in place: its device, communicator and store went with it)");
}

Status EngineEnv::invalid(const std::string& what) const {
  return Status(StatusCode::kInvalidArgument, who + ": " + what);
}

Status EngineEnv::allocate(DeviceBuffer& buffer, int64_t bytes, MemCategory category, const char* what, bool zero) {
  StatusOr<DeviceBuffer> made = device.allocate(bytes, category);
  if (!made.ok()) return made.status().with_context(what);
  buffer = std::move(*made);
  return zero && bytes > 0 ? exec->memset(buffer.data(), 0, bytes) : Status::Ok();
}

}  // namespace zdp
