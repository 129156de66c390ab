// all_reduce_i64 (host_collective.h): host values through one device buffer.
#include "engine/src/host_collective.h"

namespace zdp {

Status all_reduce_i64(EngineEnv& env, std::vector<int64_t>& values, ReduceOp op, const std::string& what) {
  if (values.empty()) return Status::Ok();
  const int64_t bytes = static_cast<int64_t>(values.size() * sizeof(int64_t));
  StatusOr<DeviceBuffer> buffer = env.device.allocate(bytes, MemCategory::kWorkspace);
  if (!buffer.ok()) return buffer.status().with_context(env.who + ": " + what);
  // Device::memcpy is synchronous and ordered before the stream work issued after it.
  ZDP_RETURN_IF_ERROR(env.device.memcpy(buffer->data(), values.data(), static_cast<size_t>(bytes)));
  ZDP_RETURN_IF_ERROR(env.comm.all_reduce(buffer->data(), buffer->data(), static_cast<int64_t>(values.size()),
                                          DType::kI64, op, env.exec->comm()));
  ZDP_RETURN_IF_ERROR(env.exec->synchronize(env.who + ": " + what));
  return env.device.memcpy(values.data(), buffer->data(), static_cast<size_t>(bytes));
}

}  // namespace zdp
