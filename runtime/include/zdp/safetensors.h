// The safetensors file format (what `pip install safetensors` reads and writes), with
// positioned reads and writes so that many processes can fill one file in parallel and
// a reader can take any byte range without loading the rest.
//
// Format: 8 bytes, a little-endian uint64 N; N bytes of JSON, an object mapping each
// tensor name to {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]} plus an
// optional "__metadata__" object of string -> string; then the data region. Offsets are
// bytes relative to the first byte after the JSON, tensors are stored row-major, little
// endian, back to back with no holes, and the last one ends at the end of the file. We
// pad the JSON with spaces to a multiple of 8 bytes (as the Python package does), so
// the data region starts 8-byte aligned.
//
// Errors name the file, and the tensor or byte range involved.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "zdp/status.h"

namespace zdp::safetensors {

// Bytes per element of a safetensors dtype ("F64" 8, "F32" 4, "BF16" and "F16" 2, "I64"
// 8, "I32" 4, "I16" 2, "I8"/"U8"/"BOOL" 1, ...); 0 for a name the format does not have.
int64_t dtype_size(const std::string& dtype);

struct TensorSpec {
  std::string name;
  std::string dtype;  // "F32", "BF16", ...
  std::vector<int64_t> shape;
};

struct TensorInfo {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0;  // data_offsets, relative to the data region
  int64_t end = 0;
  int64_t numel() const;  // product of shape (1 for a scalar)
  int64_t bytes() const { return end - begin; }
};

struct Header {
  std::vector<TensorInfo> tensors;              // ascending data offsets
  std::map<std::string, std::string> metadata;  // "__metadata__"
  // Index of `name` in tensors, or -1.
  int find(const std::string& name) const;
  // The size of the data region: the end of the last tensor.
  int64_t data_bytes() const { return tensors.empty() ? 0 : tensors.back().end; }
};

// A header for `tensors` stored back to back in the given order. kInvalidArgument for
// an empty or duplicate name, the reserved name "__metadata__", an unknown dtype, or a
// negative dimension.
StatusOr<Header> make_header(const std::vector<TensorSpec>& tensors,
                             const std::map<std::string, std::string>& metadata = {});

// The bytes before the data region: the 8-byte length and the padded JSON. Tensors
// appear in the JSON in header order, so equal headers encode to equal bytes (every rank
// can compute the file's first bytes on its own).
std::string encode_header(const Header& header);

// Parses and checks the JSON of a header (the N bytes after the length). `where` names the
// file in errors. kInvalidArgument for malformed JSON, a missing or wrongly typed field,
// an unknown dtype, offsets that disagree with dtype x shape, or tensors that overlap or
// leave holes.
StatusOr<Header> decode_header(const std::string& json, const std::string& where);

namespace detail {
// An open file descriptor, closed when destroyed; moving it moves the ownership (so
// Reader and Writer need no hand-written move operations).
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  OwnedFd(OwnedFd&& other) noexcept : fd_(other.release()) {}
  OwnedFd& operator=(OwnedFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  ~OwnedFd() { reset(); }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();  // closes the descriptor, if any

 private:
  int fd_ = -1;
};
}  // namespace detail

// Read access to one file. Move-only; closes the file when destroyed.
class Reader {
 public:
  // Opens `path`, reads and checks its header, and checks that the file size equals
  // header + data region: kNotFound for a missing file, kIoError naming both sizes for a
  // truncated (or overlong) one, kInvalidArgument for a bad header.
  static StatusOr<Reader> open(const std::string& path);
  Reader(Reader&& other) noexcept = default;
  Reader& operator=(Reader&& other) noexcept = default;

  const Header& header() const { return header_; }
  // Index of `name` in header().tensors, or -1: Header::find's answer in constant time (a
  // file may hold hundreds of thousands of tensors, and checks look each one up).
  int find(const std::string& name) const;
  const std::string& path() const { return path_; }
  int64_t data_start() const { return data_start_; }  // 8 + JSON length
  int64_t file_bytes() const { return data_start_ + header_.data_bytes(); }
  // Reads `bytes` bytes at `offset` of the data region into `dst` (pread; kIoError
  // naming the file and the range on a short read).
  Status read(int64_t offset, void* dst, int64_t bytes) const;
  // The first data_start() bytes of the file as they are on disk (for checksums).
  StatusOr<std::string> read_header_bytes() const;

 private:
  Reader() = default;
  detail::OwnedFd fd_;
  std::string path_;
  Header header_;
  std::unordered_map<std::string, int> index_;  // tensor name -> index in header_.tensors
  int64_t data_start_ = 0;
};

// Write access. Move-only; closes the file when destroyed (without fsync: call sync()).
class Writer {
 public:
  // Creates or truncates `path` (a symbolic link there is refused, not followed), writes
  // the encoded header and extends the file to its final size (fallocate(2) where the
  // filesystem supports it, so a later pwrite cannot run out of space half way; ftruncate
  // otherwise). The data region reads as zeros until written.
  static StatusOr<Writer> create(const std::string& path, const Header& header);
  // Opens a file that another process created with create() and the same header (the
  // parallel save): checks that its size and its first bytes match. kNotFound when the
  // file is not there (e.g. not on a shared filesystem).
  static StatusOr<Writer> open_existing(const std::string& path, const Header& header);
  Writer(Writer&& other) noexcept = default;
  Writer& operator=(Writer&& other) noexcept = default;

  const std::string& path() const { return path_; }
  int64_t data_start() const { return data_start_; }
  // Writes `bytes` bytes from `src` at `offset` of the data region (pwrite; kIoError
  // naming the file and the range, e.g. on ENOSPC). REQUIRES: the range lies inside the
  // data region (kInvalidArgument otherwise).
  Status write(int64_t offset, const void* src, int64_t bytes);
  // fsync: the written data is on stable storage.
  Status sync();
  // Closes the file, reporting a close() failure (delayed write errors on some
  // filesystems).
  Status close();

 private:
  // Takes `fd`; `head` is encode_header(header).
  Writer(int fd, std::string path, const std::string& head, const Header& header);
  detail::OwnedFd fd_;
  std::string path_;
  int64_t data_start_ = 0;
  int64_t data_bytes_ = 0;
};

}  // namespace zdp::safetensors
