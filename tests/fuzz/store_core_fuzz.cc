// Fuzz target: the TCP store server's core (runtime/src/store/tcp_store_core.h): frame
// parsing, authentication, requests, waits and deadlines, without sockets. The input is a
// script of events: open a connection, deliver raw bytes or a valid auth frame to one,
// close one, or let time pass. Properties: no crash or sanitizer report; the bounds on
// connections and unauthenticated connections hold after every event; every payload the
// request decoder accepts re-encodes to a frame that decodes to the same request.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/src/store/tcp_store_core.h"
#include "runtime/src/store/tcp_store_protocol.h"
#include "zdp/log.h"

namespace {

using zdp::tcp_store::ServerCore;

constexpr const char* kSecret = "fuzz-secret-0123456789";

class Script {
 public:
  Script(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::string_view bytes(size_t n) {
    n = std::min(n, size_ - at_);
    std::string_view out(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

void check_round_trip(std::string_view payload) {
  zdp::tcp_store::Request request;
  if (!zdp::tcp_store::decode_request(payload, &request).ok()) return;
  const std::string frame = zdp::tcp_store::encode_request(request);
  zdp::tcp_store::Request again;
  if (frame.size() < zdp::tcp_store::kFrameHeaderBytes ||
      !zdp::tcp_store::decode_request(std::string_view(frame).substr(zdp::tcp_store::kFrameHeaderBytes), &again).ok()) {
    std::abort();
  }
  if (again.op != request.op || again.key != request.key || again.value != request.value ||
      again.keys != request.keys || again.number != request.number) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    zdp::set_log_threshold(zdp::LogLevel::kError);  // refusals are logged: keep the fuzzer's output readable
    return true;
  }();
  (void)quiet;
  zdp::tcp_store::ServerLimits limits;
  limits.max_message_bytes = 1 << 16;
  limits.max_unauthenticated = 4;
  limits.max_connections = 16;
  ServerCore core("fuzz store", kSecret, limits);
  auto now = ServerCore::Clock::time_point{} + std::chrono::hours(1);
  std::vector<ServerCore::Id> open;
  ServerCore::Id next_id = 1;
  Script script(data, size);
  zdp::tcp_store::Request auth;
  auth.op = zdp::tcp_store::Op::kAuth;
  auth.value = kSecret;
  const std::string auth_frame = zdp::tcp_store::encode_request(auth);
  for (int events = 0; !script.done() && events < 256; ++events) {
    const uint8_t op = script.byte();
    const size_t pick = open.empty() ? 0 : script.byte() % open.size();
    switch (op % 5) {
      case 0:
        core.open(next_id, "peer", now);
        open.push_back(next_id++);
        break;
      case 1:
        if (!open.empty()) {
          const std::string_view bytes = script.bytes(script.byte());
          check_round_trip(bytes.size() > 4 ? bytes.substr(4) : bytes);
          core.receive(open[pick], bytes, now);
        }
        break;
      case 2:
        if (!open.empty()) core.receive(open[pick], auth_frame, now);
        break;
      case 3:
        if (!open.empty()) {
          core.closed(open[pick]);
          open.erase(open.begin() + static_cast<std::ptrdiff_t>(pick));
        }
        break;
      case 4:
        now += std::chrono::milliseconds(50 * script.byte());
        core.tick(now);
        break;
    }
    for (auto& [id, action] : core.take_actions()) {
      if (!action.close) continue;
      core.closed(id);
      for (size_t i = 0; i < open.size(); ++i) {
        if (open[i] == id) open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    if (core.unauthenticated() > limits.max_unauthenticated || core.connections() > limits.max_connections) {
      std::abort();
    }
  }
  return 0;
}
