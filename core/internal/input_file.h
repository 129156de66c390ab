// Opening and reading a file a user named (a config, a token file, a checkpoint's files, a
// text corpus): the one place that refuses what is not a regular file, never blocks on a
// FIFO or a device while opening it, and bounds what is read, so a directory, /dev/zero or
// a FIFO given by mistake is refused at once, naming the path and what it is.
#pragma once

#include <cstdint>
#include <string>

#include "zdp/status.h"

namespace zdp {

// An open, regular, readable file. Move-only; closes its descriptor when destroyed.
class InputFile {
 public:
  // Opens `path` for reading. `what` names the file's role in messages ("config file",
  // "token file"). kNotFound when it does not exist; kInvalidArgument when it is not a
  // regular file ("config file '/tmp' is a directory, not a regular file") or is larger
  // than `max_bytes` (the message states the limit); kIoError otherwise, with errno's text.
  // The open does not block: a FIFO or device is refused without waiting for a writer.
  static StatusOr<InputFile> open(const std::string& path, const std::string& what, int64_t max_bytes);

  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  int fd() const { return fd_; }
  int64_t size() const { return size_; }  // bytes, at open
  const std::string& path() const { return path_; }
  // The whole file (size() bytes, checked again against the limit while reading: a file
  // that grows past it is refused, one that shrinks is read as it is).
  StatusOr<std::string> read_all() const;
  // Hands the descriptor to the caller, who closes it.
  int release();

 private:
  InputFile() = default;
  int fd_ = -1;
  int64_t size_ = 0;
  int64_t max_bytes_ = 0;
  std::string path_;
  std::string what_;
};

// open() + read_all(): the whole of a small user-named file.
StatusOr<std::string> read_input_file(const std::string& path, const std::string& what, int64_t max_bytes);

// "a directory", "a FIFO", "a character device", "a block device", "a socket", "a regular
// file", ... for a stat mode: what the messages say a path is.
std::string file_kind_text(unsigned mode);

// "4 MiB", "100 MB"-style text of a byte count for limits in messages (binary units).
std::string byte_size_text(int64_t bytes);

}  // namespace zdp
