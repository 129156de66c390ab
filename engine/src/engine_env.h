// What every part of one engine shares: where it runs (rank, world, device, communicator,
// and the two streams of Exec, made by finalize()), the label and timeout of its errors,
// and the sticky failure that stops it. The parts (ParamGatherer, GradReducer,
// OptimizerState, Timeline) each hold a reference to it; nothing in it changes after
// finalize() but the failure, which only ever goes from OK to failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/src/exec.h"
#include "zdp/comm.h"
#include "zdp/context.h"
#include "zdp/device.h"
#include "zdp/status.h"

namespace zdp {

inline void* elem_ptr(void* base, int64_t elems, DType dtype) {
  return static_cast<char*>(base) + elems * static_cast<int64_t>(dtype_size(dtype));
}

// The first failure that broke an engine's state: every later call returns it (the job
// must stop, as after a dead peer).
class StickyFailure {
 public:
  const Status& status() const { return first_; }
  bool ok() const { return first_.ok(); }
  // Keeps the first failure and returns it: `status` when none came before (OK stays OK),
  // else the earlier one.
  Status fail(const Status& status) {
    if (first_.ok()) first_ = status;
    return first_;
  }

 private:
  Status first_;
};

struct EngineEnv {
  explicit EngineEnv(Context& context);

  Context& ctx;
  std::weak_ptr<const void> ctx_life;  // expires with the context (destroyed or moved from)
  Device& device;
  Communicator& comm;
  const int rank;
  const int world;
  const std::string who;                    // "rank 3": the prefix of its errors
  const std::chrono::milliseconds timeout;  // the collective timeout
  int instance = -1;                        // its number among the engines finalized (finalize()): its store keys
  std::unique_ptr<Exec> exec;               // the streams; made by finalize()
  StickyFailure failure;

  // kInvalidArgument "rank r: what".
  Status invalid(const std::string& what) const;
  // kInvalidArgument naming `call` once the context is gone (the engine must not
  // outlive it: its device, communicator and store went with it); OK while it lives.
  // A check on every call (layer() runs per layer and micro-batch): the message is built
  // only when it fails.
  Status context_alive(const char* call) const;
  // Allocates `bytes` accounted under `category` into `buffer` (zeroed on the compute
  // stream when `zero`); errors name `what`. REQUIRES: exec made.
  Status allocate(DeviceBuffer& buffer, int64_t bytes, MemCategory category, const char* what, bool zero);
  // For calls that cannot return a Status (param(), grad(), a scope's end): the next
  // grad_ready(), layer() or step() returns it.
  void defer(const Status& status) { (void)failure.fail(status); }
};

}  // namespace zdp
