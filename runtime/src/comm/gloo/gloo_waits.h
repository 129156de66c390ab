// Waits on Gloo's unbound buffers that abort() can end. Gloo ends a wait on a peer only at
// its timeout or at an error the peer's side raises: closing this rank's own connections
// (Communicator::abort) does not wake it. A rank that aborted sat in its own ring
// collective until the timeout (launch.collective_timeout_s, 300 s by default), and its
// launcher, which waits 2 s for the rank at fault to exit, blamed the peer it had failed.
// zdp's own collectives on Gloo's point-to-point buffers (the ring reduce-scatter, the
// all-to-all) wait through this. Gloo's own (all-reduce, all-gather, broadcast, barrier)
// cannot be reached from here and still end at their timeout.
#pragma once

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

namespace gloo::transport {
class UnboundBuffer;
}

namespace zdp {

// What a wait that abort() ended throws (a collective's run() turns it into the
// communicator's failure, which the abort recorded first).
struct GlooWaitAborted : std::runtime_error {
  GlooWaitAborted() : std::runtime_error("the wait was ended by this rank's abort()") {}
};

class GlooWaits {
 public:
  // buffer.waitRecv (recv) or waitSend with `timeout`: returns when it completed, throws
  // gloo::IoException as they do (a timeout, a dead peer), GlooWaitAborted when abort()
  // ended it or came before it.
  void wait(gloo::transport::UnboundBuffer& buffer, bool recv, std::chrono::milliseconds timeout);
  // Ends every wait in progress; every later one throws at once. Any thread.
  void abort();

 private:
  std::mutex mu_;
  bool aborted_ = false;
  std::vector<std::pair<gloo::transport::UnboundBuffer*, bool>> waiting_;  // (buffer, recv)
};

// `waits`->wait(buffer, recv, timeout), or Gloo's own wait where there is no GlooWaits.
void wait_on(GlooWaits* waits, gloo::transport::UnboundBuffer& buffer, bool recv, std::chrono::milliseconds timeout);

}  // namespace zdp
