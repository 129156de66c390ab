// The per-thread host-wait counters of runtime/internal/host_waits.h.
#include "runtime/internal/host_waits.h"

namespace zdp {
namespace {

thread_local HostWaits counts;
thread_local int stream_order_depth = 0;

}  // namespace

HostWaits host_waits() { return counts; }

StreamOrderWait::StreamOrderWait() { ++stream_order_depth; }
StreamOrderWait::~StreamOrderWait() { --stream_order_depth; }

namespace host_waits_detail {

void count_synchronize() { ++counts.synchronize; }
void count_event_wait() { ++(stream_order_depth > 0 ? counts.stream_order : counts.event_waits); }
void count_copy() { ++counts.copies; }

}  // namespace host_waits_detail
}  // namespace zdp
