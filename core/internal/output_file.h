// Writing a whole file so that a reader never sees half of it (a temporary file and a
// rename), and so that a failure says why: "No space left on device" on a full disk rather
// than "cannot write", and no temporary file is left behind.
#pragma once

#include <string>

#include "zdp/status.h"

namespace zdp {

// Writes `text` to `path` through `path`.tmp.<pid> and a rename. `what` names the file's
// role in messages ("run summary"). kIoError: "cannot write run summary 'x.tmp.12':
// No space left on device" (errno's text from the write, close or rename that failed).
Status write_file_atomically(const std::string& path, const std::string& text, const std::string& what);

// Writes all of `text` to `fd`, retrying short writes and EINTR. 0, or the errno of the
// write that failed (ENOSPC, EPIPE, ...): callers decide whether that is fatal.
int write_fully(int fd, const std::string& text);

}  // namespace zdp
