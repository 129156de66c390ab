// A write to a closed socket or pipe fails with EPIPE instead of killing the process.
// Gloo's TCP pairs write without MSG_NOSIGNAL, and dp-launch writes to terminals and pipes
// that may close: the default SIGPIPE would end the process with no message naming why.
// SIG_IGN would do that too, but an ignored signal stays ignored across exec, so every
// program the process starts (a data helper, a shell pipeline, the ranks of `dp-launch
// scale`) would run with SIGPIPE ignored and `producer | head` would never end. A handler
// that does nothing has the same effect here and is reset to the default by exec.
#pragma once

namespace zdp {

// Installs the do-nothing SIGPIPE handler unless the program chose its own disposition
// (a handler, or SIG_IGN). Returns true when SIGPIPE no longer kills this process.
bool survive_broken_pipes();

}  // namespace zdp
