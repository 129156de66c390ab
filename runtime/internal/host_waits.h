// Counts of the calling thread's host waits for device work, kept by the CPU and CUDA
// devices: what tests read around an engine call to check that a step never blocks the
// host where a GPU engine would not (a wait that drains the streams removes all overlap
// and exposes every launch). Thread-local, so ranks run as threads and the devices'
// worker threads do not disturb each other's counts.
#pragma once

#include <cstdint>

namespace zdp {

struct HostWaits {
  int64_t synchronize = 0;   // Stream::synchronize
  int64_t event_waits = 0;   // Event::wait, outside a StreamOrderWait
  int64_t copies = 0;        // Device::memcpy (synchronous by contract; a CUDA one blocks)
  int64_t stream_order = 0;  // Event::wait inside a StreamOrderWait (below)
  // Seconds inside StreamOrderWait scopes (the outermost): on the CPU, where the compute
  // stream is the calling thread, the time it waited for the communication stream, which
  // a rank's forward + backward time leaves out (a fast rank that waits for a slow peer's
  // gathers read as slow as that peer).
  double stream_order_seconds = 0;
  // The waits a CUDA engine would also make on the host (stream_order excluded).
  int64_t blocking() const { return synchronize + event_waits + copies; }
};

// The counts of the calling thread since it started. CPU device: every call. CUDA device:
// synchronize() and Event::wait() only when the work was not finished at the first query
// (a wait that returns at once blocks nothing), every memcpy().
HostWaits host_waits();

// Inside its scope, Event::wait calls of this thread count as `stream_order`: the CPU
// engine's compute stream is the calling thread, so its "compute waits for the
// communication stream" (on CUDA a cudaStreamWaitEvent, no host wait) is a host wait.
class StreamOrderWait {
 public:
  StreamOrderWait();
  ~StreamOrderWait();
  StreamOrderWait(const StreamOrderWait&) = delete;
  StreamOrderWait& operator=(const StreamOrderWait&) = delete;

 private:
  int64_t start_ns_ = 0;  // the outermost scope's start (steady clock); 0 in nested ones
};

namespace host_waits_detail {
void count_synchronize();
void count_event_wait();  // as stream_order inside a StreamOrderWait
void count_copy();
}  // namespace host_waits_detail

}  // namespace zdp
