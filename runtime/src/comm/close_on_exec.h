// Gloo and NCCL open their sockets, epoll and event descriptors without close-on-exec. A
// child the rank starts (system(), popen, a tokenizer or data helper the user's program
// execs) would inherit them and, if it outlives the rank, hold the rank's connections open:
// the peers would then wait out the collective timeout instead of seeing the rank's
// connections close at once. Communicators snapshot the open descriptors before they
// connect and mark every descriptor opened since as close-on-exec after.
#pragma once

#include <vector>

namespace zdp {

class NewDescriptorsCloseOnExec {
 public:
  NewDescriptorsCloseOnExec();  // the snapshot: the descriptors open now
  // Sets FD_CLOEXEC on the descriptors opened since the snapshot that lack it; returns how
  // many it set. (A descriptor closed and reopened in between under the same number is
  // taken for an old one and left as it is.)
  int mark() const;

 private:
  std::vector<int> before_;  // sorted
};

// The descriptors open in this process, sorted (from /proc/self/fd; empty where it cannot
// be read).
std::vector<int> open_descriptors();

}  // namespace zdp
