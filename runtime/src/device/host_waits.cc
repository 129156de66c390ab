// The per-thread host-wait counters of runtime/internal/host_waits.h.
#include "runtime/internal/host_waits.h"

#include <chrono>

namespace zdp {
namespace {

thread_local HostWaits counts;
thread_local int stream_order_depth = 0;

}  // namespace

HostWaits host_waits() { return counts; }

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

StreamOrderWait::StreamOrderWait() {
  if (stream_order_depth++ == 0) start_ns_ = now_ns();
}
StreamOrderWait::~StreamOrderWait() {
  if (--stream_order_depth == 0) counts.stream_order_seconds += static_cast<double>(now_ns() - start_ns_) * 1e-9;
}

namespace host_waits_detail {

void count_synchronize() { ++counts.synchronize; }
void count_event_wait() { ++(stream_order_depth > 0 ? counts.stream_order : counts.event_waits); }
void count_copy() { ++counts.copies; }

}  // namespace host_waits_detail
}  // namespace zdp
