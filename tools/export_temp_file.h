// The temporary file dp-ckpt export writes beside its target and renames over it when
// complete. An export of a 100 GB model preallocates the whole file first, so what an
// interrupted one leaves matters: a SIGINT, SIGTERM or SIGHUP removes the file before the
// process ends, and the next export of the same target removes what a killed one
// (SIGKILL, a crash) left. The file is created exclusively (O_EXCL: never a file or hard
// link planted at the predictable name) and, where it replaces a file (--force), with
// that file's permissions, so a private export stays private.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "zdp/status.h"

namespace zdp::ckpt_tool {

class ExportTempFile {
 public:
  // "<target>.tmp-<pid>": first removes every regular file "<target>.tmp-<digits>" whose
  // process no longer runs, or that has this process's pid (a killed run's that had it, as
  // every run has as a container's PID 1) (their paths appended to `removed`), then
  // creates this process's, empty, with `mode` (the replaced file's when `keep_mode`; 0666
  // less the umask for a new target). One at a time in a process (the signal handlers
  // name one file).
  static StatusOr<std::unique_ptr<ExportTempFile>> create(const std::string& target, mode_t mode, bool keep_mode,
                                                          std::vector<std::string>* removed);
  ExportTempFile(const ExportTempFile&) = delete;
  ExportTempFile& operator=(const ExportTempFile&) = delete;
  // Removes the file unless renamed, and restores the signals' earlier handlers.
  ~ExportTempFile();

  const std::string& path() const { return path_; }
  // Renames the file over `target`; the file is the target's from then on.
  Status rename_to(const std::string& target);

 private:
  explicit ExportTempFile(std::string path);
  std::string path_;
  bool renamed_ = false;
};

}  // namespace zdp::ckpt_tool
