// The safetensors format (zdp/safetensors.h): header encoding/decoding with
// nlohmann-json, and positioned file access (pread/pwrite loops that name the file and
// range on failure).
#include "zdp/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "core/internal/input_file.h"
#include "core/internal/printable.h"
#include "runtime/internal/json_checked.h"
#include "zdp/dtype.h"

namespace zdp::safetensors {
namespace {

using json = nlohmann::ordered_json;

// The Python package refuses headers above 100 MB; so do we (a corrupt length).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// A tensor's dimensions, offsets and data region are at most 4 EiB: far past any file,
// and small enough that the header's length plus the data region fits int64.
constexpr int64_t kMaxDataBytes = int64_t{1} << 62;
// Far more dimensions than a real tensor has; bounds what a header's shape makes us hold
// (50 million zeros fit in 100 MB of header).
constexpr size_t kMaxDims = 64;

std::string errno_text(int err) { return std::strerror(err); }

Status io_error(const std::string& what, int err) {
  return Status(StatusCode::kIoError, what + ": " + errno_text(err));
}

std::string range_text(int64_t offset, int64_t bytes) {
  return "bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) + ")";
}

// Unsigned, as the header check multiplies: a shape it accepts ([2^61, 4, 0]) has partial
// products up to 2^64 that overflowed int64 (undefined) before the 0 came.
int64_t numel_of(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return static_cast<int64_t>(n);
}

// Reads exactly `bytes` at file offset `pos`; a short read (end of file) is an error.
Status pread_all(int fd, void* dst, int64_t bytes, int64_t pos, const std::string& what) {
  auto* p = static_cast<char*>(dst);
  int64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, p + done, static_cast<size_t>(bytes - done), static_cast<off_t>(pos + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(what, errno);
    if (n == 0) {
      return Status(StatusCode::kIoError, what + ": the file ends after " + std::to_string(pos + done) + " bytes");
    }
    done += n;
  }
  return Status::Ok();
}

Status pwrite_all(int fd, const void* src, int64_t bytes, int64_t pos, const std::string& what) {
  const auto* p = static_cast<const char*>(src);
  int64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pwrite(fd, p + done, static_cast<size_t>(bytes - done), static_cast<off_t>(pos + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(what, errno);
    done += n;
  }
  return Status::Ok();
}

StatusOr<int64_t> file_size(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_error("stat " + path, errno);
  return static_cast<int64_t>(st.st_size);
}

StatusOr<int> open_file(const std::string& path, int flags, const char* what) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd >= 0) return fd;
  const int err = errno;
  const StatusCode code = err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError;
  return Status(code, std::string("cannot open ") + path + " for " + what + ": " + errno_text(err));
}

}  // namespace

int64_t dtype_size(const std::string& dtype) {
  static const std::pair<const char*, int64_t> kSizes[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I64", 8}, {"I32", 4},
      {"I16", 2}, {"I8", 1},  {"U64", 8}, {"U32", 4},  {"U16", 2},     {"U8", 1},      {"BOOL", 1}};
  for (const auto& [name, size] : kSizes) {
    if (dtype == name) return size;
  }
  return 0;
}

int64_t TensorInfo::numel() const { return numel_of(shape); }

int Header::find(const std::string& name) const {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

StatusOr<Header> make_header(const std::vector<TensorSpec>& tensors,
                             const std::map<std::string, std::string>& metadata) {
  Header h;
  h.metadata = metadata;
  std::unordered_set<std::string> names;
  int64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    auto bad = [&](const std::string& why) {
      return Status(StatusCode::kInvalidArgument, "safetensors header: tensor '" + t.name + "': " + why);
    };
    if (t.name.empty()) return bad("empty name");
    if (t.name == "__metadata__") return bad("the name is reserved for the metadata");
    if (!names.insert(t.name).second) return bad("duplicate name");
    const int64_t size = dtype_size(t.dtype);
    if (size == 0) return bad("unknown dtype '" + t.dtype + "'");
    for (int64_t d : t.shape) {
      if (d < 0) return bad("negative dimension in " + format_shape(t.shape));
    }
    const int64_t bytes = numel_of(t.shape) * size;
    h.tensors.push_back(TensorInfo{t.name, t.dtype, t.shape, offset, offset + bytes});
    offset += bytes;
  }
  return h;
}

std::string encode_header(const Header& header) {
  // The object is written member by member: ordered_json's operator[] searches its
  // members one by one, so building the header of n tensors in one took n^2 / 2 string
  // comparisons. Keys and values are dumped exactly as dump() of the whole object would.
  std::string text = "{";
  auto add = [&](const std::string& key, const json& value) {
    if (text.size() > 1) text += ',';
    text += json(key).dump();
    text += ':';
    text += value.dump();
  };
  if (!header.metadata.empty()) {
    json meta = json::object();
    for (const auto& [k, v] : header.metadata) meta[k] = v;
    add("__metadata__", meta);
  }
  for (const TensorInfo& t : header.tensors) {
    add(t.name, json{{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}});
  }
  text += '}';
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

namespace {

// The first key the top-level object of `text` (parsed already) holds twice, or "": a SAX
// pass that keeps only the top level's names (a DOM parser's callback took a minute for
// 50,000 tensors).
class RepeatedKey final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string repeated;
  bool key(string_t& k) override {
    if (depth_ == 1 && repeated.empty() && !seen_.insert(k).second) repeated = k;
    return true;
  }
  bool start_object(std::size_t) override { return ++depth_, true; }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override { return ++depth_, true; }
  bool end_array() override { return --depth_, true; }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  int depth_ = 0;
  std::unordered_set<std::string> seen_;
};

std::string first_repeated_key(const std::string& text) {
  RepeatedKey sax;
  nlohmann::json::sax_parse(text, &sax);
  return sax.repeated;
}

}  // namespace

StatusOr<Header> decode_header(const std::string& text, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument, where + ": safetensors header: " + why);
  };
  // nlohmann::json, a std::map inside: ordered_json inserts by scanning its members, which
  // made a header of n tensors n^2 / 2 comparisons to parse (minutes at 10^5). The file's
  // order is not needed: tensors are put in data order below.
  using unordered = nlohmann::json;
  const unordered j = json_checked::parse<unordered>(text);
  if (j.is_discarded()) {
    return bad("the JSON does not parse (or nests deeper than " + std::to_string(json_checked::kMaxNesting) + " levels)");
  }
  if (!j.is_object()) return bad("the JSON is not an object");
  // As the safetensors package reads it: the object from the first byte (no byte-order
  // mark or other bytes before it), and nothing but JSON whitespace after it (the writers
  // pad with spaces; NUL padding, which nlohmann's parser took as the end, is refused).
  if (text.front() != '{') return bad("bytes before the JSON object");
  const size_t last = text.find_last_not_of(" \t\r\n");
  if (last == std::string::npos || text[last] != '}') return bad("bytes other than spaces after the JSON object");
  // A name given twice: nlohmann keeps the last, and the first one's bytes read as a hole.
  if (const std::string twice = first_repeated_key(text); !twice.empty()) {
    return bad("'" + printable(twice) + "' appears twice");
  }
  Header h;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const unordered& v = it.value();
    if (name.empty()) return bad("a tensor with an empty name");
    if (name == "__metadata__") {
      if (!v.is_object()) return bad("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) return bad("__metadata__ value '" + printable(m.key()) + "' is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tensor = "tensor '" + printable(name) + "': ";
    if (!v.is_object()) return bad(tensor + "not an object");
    const auto dtype = v.find("dtype");
    const auto shape = v.find("shape");
    const auto offsets = v.find("data_offsets");
    if (dtype == v.end() || !dtype->is_string()) return bad(tensor + "missing or non-string \"dtype\"");
    if (shape == v.end() || !shape->is_array()) return bad(tensor + "missing or non-array \"shape\"");
    if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2) {
      return bad(tensor + "\"data_offsets\" is not a pair");
    }
    TensorInfo t;
    t.name = name;
    t.dtype = dtype->get<std::string>();
    const int64_t size = dtype_size(t.dtype);
    if (size == 0) return bad(tensor + "unknown dtype '" + printable(t.dtype) + "'");
    if (shape->size() > kMaxDims) return bad(tensor + "a shape of more than " + std::to_string(kMaxDims) + " dimensions");
    const std::string context = where + ": safetensors header: tensor '" + printable(name) + "'";
    // Every size is bounded before it is multiplied: a hostile shape's product would
    // overflow int64 ([4294967296, 4294967296, 4]), and so would end - begin of offsets
    // above INT64_MAX, which json's get<int64_t>() wraps negative.
    for (const unordered& d : *shape) {
      ZDP_ASSIGN_OR_RETURN(const int64_t dim,
                           json_checked::with_context(json_checked::integer(&d, "a dimension", 0, kMaxDataBytes), context));
      t.shape.push_back(dim);
    }
    ZDP_ASSIGN_OR_RETURN(t.begin, json_checked::with_context(
                                      json_checked::integer(&(*offsets)[0], "an offset", 0, kMaxDataBytes), context));
    ZDP_ASSIGN_OR_RETURN(t.end, json_checked::with_context(
                                    json_checked::integer(&(*offsets)[1], "an offset", 0, kMaxDataBytes), context));
    // The bytes its dtype and shape need, multiplied in order as the safetensors package
    // does (64-bit unsigned, the dimensions first, then the element size): a shape whose
    // running product overflows is refused even when a later 0 would make it empty
    // ([2^62, 2^62, 0]: Python's safe_open refuses it, "overflow computing buffer size").
    uint64_t elements = 1, product_bytes = 0;
    bool overflow = false;
    for (const int64_t dim : t.shape) {
      overflow = overflow || __builtin_mul_overflow(elements, static_cast<uint64_t>(dim), &elements);
    }
    overflow = overflow || __builtin_mul_overflow(elements, static_cast<uint64_t>(size), &product_bytes);
    overflow = overflow || product_bytes > static_cast<uint64_t>(kMaxDataBytes);
    const int64_t bytes = static_cast<int64_t>(product_bytes);
    if (overflow || t.end < t.begin || t.end - t.begin != bytes) {
      return bad(tensor + "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ") do not hold " +
                 t.dtype + " " + format_shape(t.shape));
    }
    h.tensors.push_back(std::move(t));
  }
  // Data order; an empty tensor before a tensor that starts where it is (then by name).
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  int64_t expect = 0;
  for (const TensorInfo& t : h.tensors) {
    if (t.begin != expect) {
      return bad("tensor '" + printable(t.name) + "' starts at byte " + std::to_string(t.begin) + " of the data, expected " +
                 std::to_string(expect) + " (tensors overlap or leave a hole)");
    }
    expect = t.end;
  }
  return h;
}

void detail::OwnedFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// ---- Reader ------------------------------------------------------------------------

StatusOr<Reader> Reader::open(const std::string& path) {
  // Refuses a FIFO, a device or a directory without blocking; any size (data is read by range).
  ZDP_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path, "safetensors file", std::numeric_limits<int64_t>::max()));
  const int fd = file.release();
  Reader r;
  r.fd_ = detail::OwnedFd(fd);
  r.path_ = path;
  ZDP_ASSIGN_OR_RETURN(const int64_t size, file_size(fd, path));
  unsigned char len[8];
  if (size < 8) {
    return Status(StatusCode::kIoError,
                  path + ": truncated: " + std::to_string(size) + " bytes, less than the 8-byte header length");
  }
  ZDP_RETURN_IF_ERROR(pread_all(fd, len, 8, 0, "read " + path));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  if (n > kMaxHeaderBytes) {
    return Status(StatusCode::kInvalidArgument, path + ": safetensors header length " + std::to_string(n) +
                                                    " is implausible (limit " + std::to_string(kMaxHeaderBytes) + ")");
  }
  if (static_cast<int64_t>(8 + n) > size) {
    return Status(StatusCode::kIoError, path + ": truncated: " + std::to_string(size) +
                                            " bytes, the header alone needs " + std::to_string(8 + n));
  }
  std::string text(n, '\0');
  ZDP_RETURN_IF_ERROR(pread_all(fd, text.data(), static_cast<int64_t>(n), 8, "read the header of " + path));
  ZDP_ASSIGN_OR_RETURN(r.header_, decode_header(text, path));
  r.data_start_ = static_cast<int64_t>(8 + n);
  r.index_.reserve(r.header_.tensors.size());
  for (size_t i = 0; i < r.header_.tensors.size(); ++i) r.index_.emplace(r.header_.tensors[i].name, static_cast<int>(i));
  if (size != r.file_bytes()) {
    return Status(StatusCode::kIoError, path + ": " + (size < r.file_bytes() ? "truncated" : "too long") + ": " +
                                            std::to_string(size) + " bytes, its header describes " +
                                            std::to_string(r.file_bytes()));
  }
  return r;
}

int Reader::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

Status Reader::read(int64_t offset, void* dst, int64_t bytes) const {
  if (offset < 0 || bytes < 0 || offset + bytes > header_.data_bytes()) {
    return Status(StatusCode::kInvalidArgument, path_ + ": read of data " + range_text(offset, bytes) +
                                                    " outside the data region of " +
                                                    std::to_string(header_.data_bytes()) + " bytes");
  }
  return pread_all(fd_.get(), dst, bytes, data_start_ + offset, "read " + path_ + " data " + range_text(offset, bytes));
}

StatusOr<std::string> Reader::read_header_bytes() const {
  std::string out(static_cast<size_t>(data_start_), '\0');
  ZDP_RETURN_IF_ERROR(pread_all(fd_.get(), out.data(), data_start_, 0, "read the header of " + path_));
  return out;
}

// ---- Writer ------------------------------------------------------------------------

Writer::Writer(int fd, std::string path, const std::string& head, const Header& header)
    : fd_(fd),
      path_(std::move(path)),
      data_start_(static_cast<int64_t>(head.size())),
      data_bytes_(header.data_bytes()) {}

StatusOr<Writer> Writer::create(const std::string& path, const Header& header) {
  // O_NOFOLLOW: a link planted at `path` must not make the write land elsewhere.
  ZDP_ASSIGN_OR_RETURN(const int fd, open_file(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, "writing"));
  const std::string head = encode_header(header);
  Writer w(fd, path, head, header);
  ZDP_RETURN_IF_ERROR(pwrite_all(fd, head.data(), w.data_start_, 0, "write the header of " + path));
  const int64_t total = w.data_start_ + w.data_bytes_;
  // Reserve the blocks now, so no rank's pwrite runs out of space half way; filesystems
  // without fallocate (EOPNOTSUPP, e.g. NFSv3, some network filesystems) get a sparse file.
  // Linux's fallocate(2), not posix_fallocate: where the filesystem refuses it, glibc's
  // posix_fallocate falls back to a byte into every 4 KiB block (25 million writes for a
  // 100 GB checkpoint), which it gave up on only because this descriptor cannot read
  // (EBADF from its pread): the sparse file came by that accident.
  if (w.data_bytes_ > 0) {
    const int err = ::fallocate(fd, 0, 0, static_cast<off_t>(total)) == 0 ? 0 : errno;
    if (err == ENOSPC) return io_error("preallocate " + std::to_string(total) + " bytes for " + path, err);
    if (err != 0 && ::ftruncate(fd, static_cast<off_t>(total)) != 0) {
      return io_error("extend " + path + " to " + std::to_string(total) + " bytes", errno);
    }
  }
  return w;
}

StatusOr<Writer> Writer::open_existing(const std::string& path, const Header& header) {
  ZDP_ASSIGN_OR_RETURN(const int fd, open_file(path, O_RDWR | O_NOFOLLOW, "writing"));
  const std::string head = encode_header(header);
  Writer w(fd, path, head, header);
  ZDP_ASSIGN_OR_RETURN(const int64_t size, file_size(fd, path));
  if (size != w.data_start_ + w.data_bytes_) {
    return Status(StatusCode::kIoError, path + ": " + std::to_string(size) + " bytes where the creator made " +
                                            std::to_string(w.data_start_ + w.data_bytes_) +
                                            " (another file of the same name?)");
  }
  std::string on_disk(head.size(), '\0');
  ZDP_RETURN_IF_ERROR(pread_all(fd, on_disk.data(), w.data_start_, 0, "read the header of " + path));
  if (on_disk != head) {
    return Status(StatusCode::kInvalidArgument,
                  path + ": its header differs from the one this rank computed (ranks disagree on the tensors)");
  }
  return w;
}

Status Writer::write(int64_t offset, const void* src, int64_t bytes) {
  if (fd_.get() < 0) return Status(StatusCode::kInvalidArgument, path_ + ": write after close()");
  if (offset < 0 || bytes < 0 || offset + bytes > data_bytes_) {
    return Status(StatusCode::kInvalidArgument, path_ + ": write of data " + range_text(offset, bytes) +
                                                    " outside the data region of " + std::to_string(data_bytes_) +
                                                    " bytes");
  }
  return pwrite_all(fd_.get(), src, bytes, data_start_ + offset,
                    "write " + path_ + " data " + range_text(offset, bytes));
}

Status Writer::sync() {
  if (fd_.get() < 0) return Status(StatusCode::kInvalidArgument, path_ + ": sync after close()");
  if (::fsync(fd_.get()) != 0) return io_error("fsync " + path_, errno);
  return Status::Ok();
}

Status Writer::close() {
  if (fd_.get() < 0) return Status::Ok();
  const int fd = fd_.release();
  if (::close(fd) != 0) return io_error("close " + path_, errno);
  return Status::Ok();
}

}  // namespace zdp::safetensors
