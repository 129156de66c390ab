// The launcher's lifeline. PR_SET_PDEATHSIG kills the process the launcher forks when the
// launcher dies, but not what that process started: a rank run through a wrapper script
// (launch.program = "train.sh") went on training, and writing checkpoints, after its
// dp-launch was SIGKILLed. So dp-launch holds the write end of a pipe and every rank
// inherits the read end, named by $ZDP_LIFELINE_FD; zdp::init watches it, and when the
// last write end closes (the launcher is gone, however it died) the rank stops its
// process group; zdp::init then clears the rank's PR_SET_PDEATHSIG, which would kill it
// first (when dp-launch forked it directly, or a wrapper exec'd it) and leave the group
// running. dp-launch scale gives the dp-launch it runs one the same way.
#pragma once

#include <functional>

#include "zdp/status.h"

namespace zdp::lifeline {

inline constexpr const char* kEnv = "ZDP_LIFELINE_FD";

struct Pipe {
  int read_fd = -1;   // handed to children (close-on-exec cleared in the child only)
  int write_fd = -1;  // kept by the parent, close-on-exec: no child holds it
};
// A pipe with both ends close-on-exec. kIoError names errno.
StatusOr<Pipe> create();

// The descriptor $ZDP_LIFELINE_FD names, when it is open and a pipe; -1 otherwise (not set,
// or not a pipe: nothing is watched). Made close-on-exec, so that what this process
// starts does not hold the parent's lifeline beyond it.
int from_env();

// Starts a thread that waits on `fd` and calls `on_loss` once every write end is closed.
// Once per process: later calls do nothing.
void watch(int fd, std::function<void()> on_loss);

}  // namespace zdp::lifeline
