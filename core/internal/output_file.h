// Writing a whole file so that a reader never sees half of it (a temporary file and a
// rename), and so that a failure says why: "No space left on device" on a full disk rather
// than "cannot write", and no temporary file is left behind.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "zdp/status.h"

namespace zdp {

// Writes `text` to `path` through `path`.tmp.<pid> and a rename. `what` names the file's
// role in messages ("run summary"). kIoError: "cannot write run summary 'x' (through its
// temporary file 'x.tmp.12'): No space left on device" (errno's text from the write, close
// or rename that failed; a missing folder is named). The data reaches the disk (fsync)
// before the rename, and the rename before the return (the folder's fsync), so a crash
// leaves the old file or the whole new one.
Status write_file_atomically(const std::string& path, const std::string& text, const std::string& what);
// The same for a file of several parts (a header and a payload) written one after another.
Status write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts,
                             const std::string& what);

// write_file_atomically in two halves, for files that must change together (a corpus's
// train.bin and val.bin): stage each (written and synced under its temporary name, which
// is returned), then commit each (the rename). A failed stage leaves nothing; a staged
// file that will not be committed is removed with discard_staged.
StatusOr<std::string> stage_file(const std::string& path, std::initializer_list<std::string_view> parts,
                                 const std::string& what);
Status commit_staged(const std::string& staged, const std::string& path, const std::string& what);
void discard_staged(const std::string& staged);

// Where a program writes a file the user named (an --out): `path` when nothing is there
// or it is a regular file; the file a symbolic link points to, when that is a regular
// file (the rename then replaces that file, not the link). kInvalidArgument naming `what`
// for a directory, device, FIFO or socket, or a link to one or to nothing: replacing one
// by a rename would turn /dev/null into a regular file.
StatusOr<std::string> output_target(const std::string& path, const std::string& what);

// Writes all of `text` to `fd`, retrying short writes and EINTR. 0, or the errno of the
// write that failed (ENOSPC, EPIPE, ...): callers decide whether that is fatal.
int write_fully(int fd, const std::string& text);

}  // namespace zdp
