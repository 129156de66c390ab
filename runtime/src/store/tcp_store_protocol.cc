// TCP store frames: little-endian encoding, bounds-checked decoding, deadline-aware I/O.
#include "runtime/src/store/tcp_store_protocol.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace zdp::tcp_store {
namespace {

// Longer than this is "forever" (see deadline_after); keeps time arithmetic from overflowing.
constexpr std::chrono::hours kForever{24 * 365};

class Writer {
 public:
  Writer() { out_.resize(kFrameHeaderBytes); }  // length patched in by frame()
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void i64(int64_t v) {
    const uint64_t u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  // Callers keep sizes within u32 (check_request_limits, the server's message limit).
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  void strs(const std::vector<std::string>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (const std::string& s : v) str(s);
  }
  std::string frame() && {
    const uint32_t n = static_cast<uint32_t>(out_.size() - kFrameHeaderBytes);
    for (size_t i = 0; i < 4; ++i) out_[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return std::move(out_);
  }

 private:
  std::string out_;
};

// Reads fields front to back; the first failure is kept and every later read fails too,
// so a decoder can read all fields and check once.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  bool u8(uint8_t* v, const char* what) {
    if (!need(1, what)) return false;
    *v = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }
  bool u32(uint32_t* v, const char* what) {
    if (!need(4, what)) return false;
    uint32_t x = 0;
    for (int i = 0; i < 4; ++i) x |= static_cast<uint32_t>(static_cast<uint8_t>(in_[pos_ + i])) << (8 * i);
    pos_ += 4;
    *v = x;
    return true;
  }
  bool i64(int64_t* v, const char* what) {
    if (!need(8, what)) return false;
    uint64_t x = 0;
    for (int i = 0; i < 8; ++i) x |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + i])) << (8 * i);
    pos_ += 8;
    *v = static_cast<int64_t>(x);
    return true;
  }
  bool str(std::string* s, size_t max_bytes, const char* what) {
    uint32_t n = 0;
    if (!u32(&n, what)) return false;
    if (n > max_bytes) return fail(std::string(what) + " of " + std::to_string(n) + " bytes exceeds the limit of " +
                                   std::to_string(max_bytes));
    if (!need(n, what)) return false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool strs(std::vector<std::string>* v, size_t max_bytes_each, const char* what) {
    uint32_t n = 0;
    if (!u32(&n, what)) return false;
    if (n > kMaxKeysPerRequest) {
      return fail(std::to_string(n) + " " + what + " exceed the limit of " + std::to_string(kMaxKeysPerRequest));
    }
    // Each string needs at least its 4-byte length: a lying count cannot make us reserve much.
    v->clear();
    v->reserve(std::min<size_t>(n, (in_.size() - pos_) / 4));
    for (uint32_t i = 0; i < n; ++i) {
      v->emplace_back();
      if (!str(&v->back(), max_bytes_each, what)) return false;
    }
    return true;
  }
  bool fail(const std::string& why) {
    if (error_.empty()) error_ = why;
    return false;
  }
  // The verdict: every field read, nothing left over.
  Status finish(const std::string& what) {
    if (error_.empty() && pos_ != in_.size()) {
      error_ = std::to_string(in_.size() - pos_) + " bytes left over after the last field";
    }
    if (error_.empty()) return Status::Ok();
    return Status(StatusCode::kInvalidArgument, "malformed " + what + ": " + error_);
  }

 private:
  bool need(size_t n, const char* what) {
    if (!error_.empty()) return false;
    if (in_.size() - pos_ >= n) return true;
    return fail("cut short at byte " + std::to_string(pos_) + " while reading " + what + " (" + std::to_string(n) +
                " bytes needed, " + std::to_string(in_.size() - pos_) + " left)");
  }

  std::string_view in_;
  size_t pos_ = 0;
  std::string error_;
};

bool valid_op(uint8_t op) { return op >= static_cast<uint8_t>(Op::kSet) && op <= static_cast<uint8_t>(Op::kAuth); }

int poll_timeout_ms(Clock::time_point deadline) {
  if (deadline == kNoDeadline) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

// Waits until `fd` is ready for `events`. kTimeout at the deadline.
Status wait_ready(int fd, short events, Clock::time_point deadline, const char* what) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (n > 0) return Status::Ok();  // errors and hang-ups surface in the next send/recv
    if (n == 0) return Status(StatusCode::kTimeout, std::string("deadline passed while ") + what);
    if (errno != EINTR) return Status(StatusCode::kIoError, std::string("poll: ") + std::strerror(errno));
  }
}

// Reads exactly `n` bytes; *got says how many arrived before an error or the end of stream.
Status recv_exact(int fd, char* buf, size_t n, Clock::time_point deadline, size_t* got, bool* closed) {
  *got = 0;
  *closed = false;
  while (*got < n) {
    const ssize_t r = ::recv(fd, buf + *got, n - *got, 0);
    if (r > 0) {
      *got += static_cast<size_t>(r);
    } else if (r == 0) {
      *closed = true;
      return Status(StatusCode::kIoError, "connection closed by peer");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      ZDP_RETURN_IF_ERROR(wait_ready(fd, POLLIN, deadline, "waiting for data"));
    } else if (errno != EINTR) {
      return Status(StatusCode::kIoError, std::string("recv: ") + std::strerror(errno));
    }
  }
  return Status::Ok();
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::kSet: return "set";
    case Op::kGet: return "get";
    case Op::kAdd: return "add";
    case Op::kWait: return "wait";
    case Op::kCheck: return "check";
    case Op::kAuth: return "auth";
  }
  return "unknown op";
}

Status check_request_limits(const Request& request) {
  auto check_key = [](const std::string& key) {
    if (key.size() <= kMaxKeyBytes) return Status::Ok();
    return Status(StatusCode::kInvalidArgument, "store key of " + std::to_string(key.size()) +
                                                    " bytes exceeds the limit of " + std::to_string(kMaxKeyBytes) +
                                                    " (\"" + key.substr(0, 64) + "...\")");
  };
  switch (request.op) {
    case Op::kSet:
      if (request.value.size() > UINT32_MAX - kMaxKeyBytes - 16) {
        return Status(StatusCode::kInvalidArgument,
                      "store value of " + std::to_string(request.value.size()) + " bytes does not fit in one frame");
      }
      return check_key(request.key);
    case Op::kGet:
    case Op::kAdd:
      return check_key(request.key);
    case Op::kWait:
    case Op::kCheck:
      if (request.keys.size() > kMaxKeysPerRequest) {
        return Status(StatusCode::kInvalidArgument, std::to_string(request.keys.size()) +
                                                        " store keys in one request exceed the limit of " +
                                                        std::to_string(kMaxKeysPerRequest));
      }
      for (const std::string& key : request.keys) ZDP_RETURN_IF_ERROR(check_key(key));
      return Status::Ok();
    case Op::kAuth:
      if (request.value.size() > kMaxKeyBytes) {
        return Status(StatusCode::kInvalidArgument, "job secret longer than " + std::to_string(kMaxKeyBytes) + " bytes");
      }
      return Status::Ok();
  }
  return Status(StatusCode::kInternal, "check_request_limits: unknown op");
}

std::string encode_request(const Request& request) {
  Writer w;
  w.u8(static_cast<uint8_t>(request.op));
  switch (request.op) {
    case Op::kSet: w.str(request.key); w.str(request.value); break;
    case Op::kGet: w.str(request.key); w.i64(request.number); break;
    case Op::kAdd: w.str(request.key); w.i64(request.number); break;
    case Op::kWait: w.strs(request.keys); w.i64(request.number); break;
    case Op::kCheck: w.strs(request.keys); break;
    case Op::kAuth: w.str(request.value); break;
  }
  return std::move(w).frame();
}

Status decode_request(std::string_view payload, Request* request) {
  Reader r(payload);
  uint8_t op = 0;
  if (r.u8(&op, "op") && !valid_op(op)) r.fail("unknown op " + std::to_string(op));
  *request = Request();
  request->op = static_cast<Op>(op);
  switch (request->op) {
    case Op::kSet:
      r.str(&request->key, kMaxKeyBytes, "key");
      r.str(&request->value, payload.size(), "value");
      break;
    case Op::kGet:
    case Op::kAdd:
      r.str(&request->key, kMaxKeyBytes, "key");
      r.i64(&request->number, request->op == Op::kGet ? "timeout" : "delta");
      break;
    case Op::kWait:
      r.strs(&request->keys, kMaxKeyBytes, "keys");
      r.i64(&request->number, "timeout");
      break;
    case Op::kCheck:
      r.strs(&request->keys, kMaxKeyBytes, "keys");
      break;
    case Op::kAuth:
      r.str(&request->value, kMaxKeyBytes, "secret");
      break;
  }
  return r.finish("store request");
}

std::string encode_response(Op op, const Response& response) {
  Writer w;
  w.u8(static_cast<uint8_t>(response.reply));
  switch (response.reply) {
    case Reply::kTimeout: w.strs(response.missing); break;
    case Reply::kInvalidArgument: w.str(response.message); break;
    case Reply::kOk:
      if (op == Op::kGet) w.str(response.value);
      if (op == Op::kAdd) w.i64(response.number);
      if (op == Op::kCheck) w.u8(response.present ? 1 : 0);
      break;
  }
  return std::move(w).frame();
}

Status decode_response(Op op, std::string_view payload, Response* response) {
  Reader r(payload);
  *response = Response();
  uint8_t reply = 0;
  if (r.u8(&reply, "reply code")) response->reply = static_cast<Reply>(reply);
  switch (reply) {
    case static_cast<uint8_t>(Reply::kOk):
      if (op == Op::kGet) r.str(&response->value, payload.size(), "value");
      if (op == Op::kAdd) r.i64(&response->number, "counter");
      if (op == Op::kCheck) {
        uint8_t present = 0;
        if (r.u8(&present, "check result")) response->present = present != 0;
      }
      break;
    case static_cast<uint8_t>(Reply::kTimeout):
      if (op != Op::kGet && op != Op::kWait) r.fail("timeout reply to " + std::string(op_name(op)));
      r.strs(&response->missing, kMaxKeyBytes, "missing keys");
      break;
    case static_cast<uint8_t>(Reply::kInvalidArgument):
      r.str(&response->message, payload.size(), "error message");
      break;
    default:
      r.fail("unknown reply code " + std::to_string(reply));
  }
  return r.finish(std::string("reply to ") + op_name(op));
}

Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) timeout = std::chrono::milliseconds(0);
  if (timeout >= kForever) return kNoDeadline;
  return Clock::now() + timeout;
}

Status send_all(int fd, std::string_view bytes, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      ZDP_RETURN_IF_ERROR(wait_ready(fd, POLLOUT, deadline, "sending"));
    } else if (errno != EINTR) {
      return Status(StatusCode::kIoError, "send failed after " + std::to_string(sent) + " of " +
                                              std::to_string(bytes.size()) + " bytes: " + std::strerror(errno));
    }
  }
  return Status::Ok();
}

Status read_frame(int fd, uint64_t max_payload_bytes, Clock::time_point header_deadline,
                  std::chrono::milliseconds body_timeout, std::string* payload) {
  char header[kFrameHeaderBytes];
  size_t got = 0;
  bool closed = false;
  Status s = recv_exact(fd, header, kFrameHeaderBytes, header_deadline, &got, &closed);
  if (!s.ok()) {
    if (closed && got == 0) return Status(StatusCode::kPeerFailure, "connection closed by peer");
    if (closed) {
      return Status(StatusCode::kIoError, "connection closed mid-frame (" + std::to_string(got) + " of " +
                                              std::to_string(kFrameHeaderBytes) + " header bytes)");
    }
    return s;
  }
  uint64_t length = 0;
  for (size_t i = 0; i < kFrameHeaderBytes; ++i) {
    length |= static_cast<uint64_t>(static_cast<uint8_t>(header[i])) << (8 * i);
  }
  if (length > max_payload_bytes) {
    return Status(StatusCode::kInvalidArgument, "frame of " + std::to_string(length) +
                                                    " bytes exceeds the limit of " + std::to_string(max_payload_bytes));
  }
  // The buffer grows with the bytes that arrive (doubling from 64 KiB), never to the
  // declared length at once: a peer that sends a 4-byte header claiming 1 GiB and nothing
  // more (anything listening on the store's port: the client does not authenticate the
  // server) would otherwise have every rank allocate and zero 1 GiB.
  const Clock::time_point body_deadline = std::min(header_deadline, deadline_after(body_timeout));
  constexpr uint64_t kFirstChunk = uint64_t{64} << 10;
  payload->clear();
  uint64_t received = 0;
  while (received < length) {
    const uint64_t next = std::min(length, std::max(kFirstChunk, 2 * received));
    payload->resize(next);
    got = 0;
    s = recv_exact(fd, payload->data() + received, next - received, body_deadline, &got, &closed);
    received += got;
    if (!s.ok()) break;
  }
  if (!s.ok() && closed) {
    return Status(StatusCode::kIoError, "connection closed mid-frame (" + std::to_string(received) + " of " +
                                            std::to_string(length) + " payload bytes)");
  }
  return s;
}

}  // namespace zdp::tcp_store
