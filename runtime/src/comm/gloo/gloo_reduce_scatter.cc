// Pipelined ring reduce-scatter over Gloo unbound buffers (see the header for its cost).
#include "runtime/src/comm/gloo/gloo_reduce_scatter.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "runtime/src/comm/gloo/gloo_waits.h"

namespace zdp {
namespace {

// A slice travels as two segments, so the reduction of the first overlaps the transfer
// of the second, within [1 MiB, 16 MiB]. Measured with bench/comm_bench on loopback:
// Gloo's per-message cost makes 1 MiB segments ~25% slower than halves at 32-64 MiB,
// and smaller pieces gain nothing there since transfer and reduction share the cores.
constexpr size_t kMinSegmentBytes = size_t{1} << 20;
constexpr size_t kMaxSegmentBytes = size_t{16} << 20;
// Our slot prefix; Gloo's own collectives use 0x01..0x08.
constexpr uint8_t kReduceScatterSlotPrefix = 0x41;

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

void ring_reduce_scatter(const std::shared_ptr<gloo::Context>& context, const RingReduceScatterArgs& args,
                         std::unique_ptr<char[]>& scratch, size_t& scratch_bytes) {
  const int world = context->size;
  const int rank = context->rank;
  const char* input = static_cast<const char*>(args.send);
  char* output = static_cast<char*>(args.recv);
  const size_t slice = args.slice_bytes;
  const size_t elem = args.element_size;

  if (world == 1 || slice == 0) {
    if (slice > 0 && output != input) std::memmove(output, input, slice);
    return;
  }
  if (scratch_bytes < 2 * slice) {
    scratch.reset(new char[2 * slice]);
    scratch_bytes = 2 * slice;
  }

  const size_t want = std::min(kMaxSegmentBytes, std::max(kMinSegmentBytes, slice / 2));
  const size_t seg_bytes = std::max(elem, want / elem * elem);
  const size_t nseg = (slice + seg_bytes - 1) / seg_bytes;
  const int steps = world - 1;
  const size_t total = static_cast<size_t>(steps) * nseg;
  const int next = (rank + 1) % world;
  const int prev = (rank + world - 1) % world;
  const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, args.tag);
  const auto deadline = Clock::now() + args.timeout;

  auto seg_offset = [&](size_t j) { return j * seg_bytes; };
  auto seg_size = [&](size_t j) { return std::min(seg_bytes, slice - j * seg_bytes); };
  auto chunk = [&](int s, int shift) { return static_cast<size_t>(((rank - s - shift) % world + world) % world); };
  char* half[2] = {scratch.get(), scratch.get() + slice};

  // One unbound buffer per (scratch half, segment): it receives at step s and forwards
  // at step s+1; Gloo allows one pending operation per buffer, which the order below keeps.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> scratch_buf(2 * nseg);
  for (int h = 0; h < 2; ++h) {
    for (size_t j = 0; j < nseg; ++j) {
      scratch_buf[h * nseg + j] = context->createUnboundBuffer(half[h] + seg_offset(j), seg_size(j));
    }
  }
  // Step 0 sends this rank's own input slice (r-1) unreduced.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> input_buf(nseg);
  const size_t first = chunk(0, 1) * slice;
  for (size_t j = 0; j < nseg; ++j) {
    input_buf[j] = context->createUnboundBuffer(const_cast<char*>(input) + first + seg_offset(j), seg_size(j));
  }

  auto send_buffer = [&](size_t t) -> gloo::transport::UnboundBuffer& {
    const size_t s = t / nseg, j = t % nseg;
    return s == 0 ? *input_buf[j] : *scratch_buf[((s - 1) % 2) * nseg + j];
  };
  auto recv_buffer = [&](size_t t) -> gloo::transport::UnboundBuffer& {
    const size_t s = t / nseg, j = t % nseg;
    return *scratch_buf[(s % 2) * nseg + j];
  };

  auto wait = [&](gloo::transport::UnboundBuffer& buffer, bool recv) {
    wait_on(args.waits, buffer, recv, remaining(deadline));
  };
  std::vector<bool> send_done(total, false);
  auto wait_send = [&](size_t t) {
    if (send_done[t]) return;
    wait(send_buffer(t), false);
    send_done[t] = true;
  };

  size_t next_recv = 0;
  for (size_t t = 0; t < total; ++t) {
    const int s = static_cast<int>(t / nseg);
    const size_t j = t % nseg;
    // The data of send t is ready: the input (step 0) or a segment reduced at t - nseg.
    send_buffer(t).send(next, slot);
    // Post receives up to one step ahead; a scratch segment is free again once the send
    // that forwarded its previous contents (t' - nseg) has completed.
    while (next_recv < total && next_recv <= t + nseg) {
      if (next_recv >= nseg) wait_send(next_recv - nseg);
      recv_buffer(next_recv).recv(prev, slot);
      ++next_recv;
    }
    wait(recv_buffer(t), true);
    // Add this rank's contribution to the partial sum that arrived.
    char* incoming = half[s % 2] + seg_offset(j);
    const char* own = input + chunk(s, 2) * slice + seg_offset(j);
    char* dst = s == steps - 1 ? output + seg_offset(j) : incoming;
    args.reduce(dst, incoming, own, seg_size(j) / elem);
  }
  for (size_t t = 0; t < total; ++t) wait_send(t);
}

}  // namespace zdp
