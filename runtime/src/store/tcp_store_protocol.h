// Wire format of the TCP rendezvous store, its bounds-checked codec, and the
// deadline-aware socket I/O that the server and the client share.
//
// Frame:     u32 payload length | payload            (all integers little-endian)
// Request:   u8 op | fields          Response: u8 reply | fields (which depend on the op)
//   kSet     key, value                kOk
//   kGet     key, i64 timeout_ms       kOk value          | kTimeout keys (missing)
//   kAdd     key, i64 delta            kOk i64 new value  | kInvalidArgument message
//   kWait    keys, i64 timeout_ms      kOk                | kTimeout keys (missing)
//   kCheck   keys                      kOk u8 (1 = all present)
// string = u32 length | bytes;  keys = u32 count | string * count.
//
// Limits: a key is at most kMaxKeyBytes, a request names at most kMaxKeysPerRequest keys,
// a request payload is at most TcpStoreServerOptions::max_message_bytes and a response
// payload at most kMaxResponseBytes. A request that breaks a limit, is cut short or has
// bytes left over is malformed: the server closes that one connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zdp/status.h"

namespace zdp::tcp_store {

inline constexpr size_t kFrameHeaderBytes = 4;
inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr uint32_t kMaxKeysPerRequest = 1u << 16;
// The client's sanity bound on a reply (it does not know the server's max_message_bytes):
// a garbage length from a non-zdp peer must not make it allocate gigabytes.
inline constexpr uint64_t kMaxResponseBytes = 1ull << 30;

// kAuth carries the job secret in `value`; a server with a secret serves nothing else
// on a connection until it has been presented.
enum class Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4, kCheck = 5, kAuth = 6 };
enum class Reply : uint8_t { kOk = 0, kTimeout = 1, kInvalidArgument = 2 };

// "set", "get", ...: for messages.
const char* op_name(Op op);

struct Request {
  Op op = Op::kSet;
  std::string key;                // set, get, add
  std::string value;              // set; auth: the job secret
  std::vector<std::string> keys;  // wait, check
  int64_t number = 0;             // get, wait: timeout in ms; add: delta
};

struct Response {
  Reply reply = Reply::kOk;
  std::string value;                 // get
  std::vector<std::string> missing;  // get, wait on kTimeout
  int64_t number = 0;                // add
  bool present = false;              // check
  std::string message;               // kInvalidArgument
};

// kInvalidArgument when `request` breaks a key limit; lets the client refuse a request the
// server would drop, without losing its connection.
Status check_request_limits(const Request& request);

// Whole frames (header included), ready to send.
std::string encode_request(const Request& request);
std::string encode_response(Op op, const Response& response);

// Decode one payload (header excluded). kInvalidArgument says what is wrong and where.
Status decode_request(std::string_view payload, Request* request);
Status decode_response(Op op, std::string_view payload, Response* response);

// ---- socket I/O on non-blocking fds --------------------------------------------------

using Clock = std::chrono::steady_clock;
inline constexpr Clock::time_point kNoDeadline = Clock::time_point::max();

// now + timeout, saturating (negative counts as 0, a year or more as kNoDeadline).
Clock::time_point deadline_after(std::chrono::milliseconds timeout);

// Sends every byte (MSG_NOSIGNAL: a closed peer is an error, never SIGPIPE).
// kTimeout at the deadline, kIoError on a socket error.
Status send_all(int fd, std::string_view bytes, Clock::time_point deadline);

// Reads one frame into `payload`. The header must arrive by `header_deadline`, the rest
// within `body_timeout` after it (and by the header deadline). Errors:
//   kPeerFailure      the peer closed the connection cleanly between frames
//   kInvalidArgument  the length exceeds `max_payload_bytes` (nothing more is read)
//   kIoError          cut short (closed mid-frame) or a socket error
//   kTimeout          a deadline passed
Status read_frame(int fd, uint64_t max_payload_bytes, Clock::time_point header_deadline,
                  std::chrono::milliseconds body_timeout, std::string* payload);

}  // namespace zdp::tcp_store
