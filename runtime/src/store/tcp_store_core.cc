// ServerCore: frames in, replies out; authentication, limits and waits (tcp_store_core.h).
#include "runtime/src/store/tcp_store_core.h"

#include <algorithm>

#include "zdp/log.h"

namespace zdp::tcp_store {
namespace {

// Refusal reasons: the RefusalLog sums them up by these names.
constexpr const char* kWrongSecret = "wrong job secret";
constexpr const char* kNoSecret = "a request before the job secret";
constexpr const char* kAuthTimeout = "no job secret within the deadline";
constexpr const char* kBigFrame = "a frame too large before the job secret";
constexpr const char* kMalformed = "a malformed frame before the job secret";
constexpr const char* kEvicted = "evicted: too many connections without the job secret";
constexpr const char* kTooMany = "too many connections";

uint32_t frame_length(std::string_view header) {
  uint32_t n = 0;
  for (size_t i = 0; i < kFrameHeaderBytes; ++i) n |= static_cast<uint32_t>(static_cast<uint8_t>(header[i])) << (8 * i);
  return n;
}

// now + `ms`, saturating: negative counts as 0, a year or more as never.
ServerCore::Clock::time_point time_after(ServerCore::Clock::time_point now, int64_t ms) {
  if (ms >= int64_t{365} * 24 * 3600 * 1000) return ServerCore::Clock::time_point::max();
  return now + std::chrono::milliseconds(std::max<int64_t>(ms, 0));
}

bool all_present(InMemoryStore& data, const std::vector<std::string>& keys) {
  StatusOr<bool> present = data.check(keys);
  return present.ok() && *present;
}

}  // namespace

bool same_secret(std::string_view presented, std::string_view expected) {
  // Every byte of `expected` is compared against something, so the time depends on its
  // length only; a length mismatch is folded into the same accumulator.
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char p = presented.empty() ? 0 : static_cast<unsigned char>(presented[i % presented.size()]);
    diff |= static_cast<unsigned char>(p ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

ServerCore::ServerCore(std::string name, std::string secret, ServerLimits limits)
    : name_(std::move(name)), secret_(std::move(secret)), limits_(limits), refusals_(name_) {}

void ServerCore::open(Id id, std::string peer, Clock::time_point now) {
  if (conns_.size() >= limits_.max_connections) {
    refusals_.refuse(kTooMany, peer, now);
    actions_.push_back({id, ConnAction{"", true}});
    return;
  }
  const bool needs_secret = !secret_.empty();
  if (needs_secret && unauthenticated_ >= limits_.max_unauthenticated) {
    // Ids grow with time: the first unauthenticated one in the map is the oldest.
    for (auto& [old_id, old] : conns_) {
      if (!old.authenticated) {
        refuse(old_id, old, kEvicted, now);
        break;
      }
    }
  }
  Conn c;
  c.peer = std::move(peer);
  c.authenticated = !needs_secret;
  c.opened = now;
  if (needs_secret) ++unauthenticated_;
  conns_.emplace(id, std::move(c));
}

void ServerCore::receive(Id id, std::string_view bytes, Clock::time_point now) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  it->second.in.append(bytes.data(), bytes.size());
  process(id, it->second, now);
}

void ServerCore::process(Id id, Conn& c, Clock::time_point now) {
  while (!c.waiting && !held(c) && c.in.size() >= kFrameHeaderBytes) {
    const uint64_t length = frame_length(c.in);
    const uint64_t limit = c.authenticated ? limits_.max_message_bytes : kMaxAuthFrameBytes;
    if (length > limit) {
      if (!c.authenticated) return refuse(id, c, kBigFrame, now);
      return drop(id, "frame of " + std::to_string(length) + " bytes exceeds the limit of " + std::to_string(limit));
    }
    if (c.in.size() < kFrameHeaderBytes + length) {
      if (c.frame_deadline == Clock::time_point::max()) c.frame_deadline = now + limits_.frame_timeout;
      return;
    }
    c.frame_deadline = Clock::time_point::max();
    Request request;
    const Status s = decode_request(std::string_view(c.in).substr(kFrameHeaderBytes, length), &request);
    c.in.erase(0, kFrameHeaderBytes + length);
    if (c.in.empty() && c.in.capacity() > (1u << 20)) std::string().swap(c.in);  // after a big frame
    if (!s.ok()) {
      if (!c.authenticated) return refuse(id, c, kMalformed, now);
      return drop(id, s.message());
    }
    if (!handle(id, c, request, now)) return;
  }
  // A partial header also starts the frame's clock (a held one's bytes wait for sent()).
  if (!c.waiting && !held(c) && !c.in.empty() && c.frame_deadline == Clock::time_point::max()) {
    c.frame_deadline = now + limits_.frame_timeout;
  }
}

bool ServerCore::authenticate(Id id, Conn& c, const Request& request, Clock::time_point now) {
  if (request.op != Op::kAuth) {
    refuse(id, c, kNoSecret, now);
    return false;
  }
  if (!same_secret(request.value, secret_)) {
    Response response;
    response.reply = Reply::kInvalidArgument;
    response.message = kWrongSecret;
    reply(id, request.op, response);
    refuse(id, c, kWrongSecret, now);
    return false;
  }
  c.authenticated = true;
  --unauthenticated_;
  reply(id, request.op, Response{});
  return true;
}

bool ServerCore::handle(Id id, Conn& c, const Request& request, Clock::time_point now) {
  if (!c.authenticated) return authenticate(id, c, request, now);
  Response response;
  switch (request.op) {
    case Op::kAuth:
      break;  // no secret required, or presented again: nothing to check
    case Op::kSet:
      (void)data_.set(request.key, request.value);  // in memory: cannot fail
      reply(id, request.op, response);
      wake_waiters(now);
      return true;
    case Op::kAdd: {
      StatusOr<int64_t> value = data_.add(request.key, request.number);
      if (value.ok()) {
        response.number = *value;
      } else {
        response.reply = Reply::kInvalidArgument;
        response.message = value.status().message();
      }
      reply(id, request.op, response);
      if (value.ok()) wake_waiters(now);
      return true;
    }
    case Op::kCheck: {
      StatusOr<bool> present = data_.check(request.keys);
      response.present = present.ok() && *present;
      break;
    }
    case Op::kGet:
    case Op::kWait:
      c.waiting = true;
      ++c.wait_serial;
      c.wait_op = request.op;
      c.wait_keys = request.op == Op::kGet ? std::vector<std::string>{request.key} : request.keys;
      c.wait_deadline = time_after(now, request.number);
      if (all_present(data_, c.wait_keys)) answer_wait(id, c, false);
      return true;
  }
  reply(id, request.op, response);
  return true;
}

void ServerCore::wake_waiters(Clock::time_point now) {
  // Ids first: answering may process more requests, which may close connections.
  std::vector<std::pair<Id, uint64_t>> ready;
  for (const auto& [id, c] : conns_) {
    if (c.waiting && all_present(data_, c.wait_keys)) ready.emplace_back(id, c.wait_serial);
  }
  for (const auto& [id, serial] : ready) {
    const auto it = conns_.find(id);
    if (it == conns_.end() || !it->second.waiting || it->second.wait_serial != serial) continue;
    answer_wait(id, it->second, false);
    process(id, it->second, now);  // bytes that came behind the request (a pipelining client)
  }
}

void ServerCore::answer_wait(Id id, Conn& c, bool timed_out) {
  Response response;
  if (timed_out) {
    for (const std::string& key : c.wait_keys) {
      if (!all_present(data_, {key})) response.missing.push_back(key);
    }
  }
  if (!response.missing.empty()) {
    response.reply = Reply::kTimeout;
  } else if (c.wait_op == Op::kGet) {
    StatusOr<std::string> value = data_.get(c.wait_keys.front(), std::chrono::milliseconds(0));
    if (value.ok()) response.value = std::move(*value);  // keys are never erased: always there
  }
  c.waiting = false;
  c.wait_keys.clear();
  reply(id, c.wait_op, response);
}

void ServerCore::tick(Clock::time_point now) {
  // Ids first: acting on one may close others (see wake_waiters).
  std::vector<std::pair<Id, uint64_t>> timed_out;
  std::vector<Id> expired;
  for (const auto& [id, c] : conns_) {
    if (c.waiting && now >= c.wait_deadline) timed_out.emplace_back(id, c.wait_serial);
    if ((!c.authenticated && now >= c.opened + limits_.auth_timeout) ||
        (c.frame_deadline != Clock::time_point::max() && now >= c.frame_deadline)) {
      expired.push_back(id);
    }
  }
  for (const auto& [id, serial] : timed_out) {
    const auto it = conns_.find(id);
    if (it == conns_.end() || !it->second.waiting || it->second.wait_serial != serial) continue;
    answer_wait(id, it->second, true);
    process(id, it->second, now);
  }
  for (const Id id : expired) {
    const auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    if (!it->second.authenticated) {
      refuse(id, it->second, kAuthTimeout, now);
    } else {
      drop(id, "a frame was not completed within " + std::to_string(limits_.frame_timeout.count()) + " ms");
    }
  }
  refusals_.flush(now);
}

ServerCore::Clock::time_point ServerCore::next_deadline() const {
  Clock::time_point next = refusals_.next_flush();
  for (const auto& [id, c] : conns_) {
    if (c.waiting) next = std::min(next, c.wait_deadline);
    if (!c.authenticated) next = std::min(next, c.opened + limits_.auth_timeout);
    next = std::min(next, c.frame_deadline);
  }
  return next;
}

std::vector<std::pair<ServerCore::Id, ConnAction>> ServerCore::take_actions() {
  std::vector<std::pair<Id, ConnAction>> out;
  out.swap(actions_);
  return out;
}

bool ServerCore::reading(Id id) const {
  const auto it = conns_.find(id);
  return it != conns_.end() && !it->second.waiting && !held(it->second);
}

void ServerCore::sent(Id id, uint64_t bytes, Clock::time_point now) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  const bool was_held = held(c);
  c.unsent_reply_bytes -= std::min(bytes, c.unsent_reply_bytes);
  if (was_held && !held(c)) process(id, c, now);
}

void ServerCore::closed(Id id) { forget(id); }

void ServerCore::reply(Id id, Op op, const Response& response, bool then_close) {
  std::string bytes = encode_response(op, response);
  if (const auto it = conns_.find(id); it != conns_.end()) it->second.unsent_reply_bytes += bytes.size();
  actions_.push_back({id, ConnAction{std::move(bytes), then_close}});
}

void ServerCore::refuse(Id id, Conn& c, const std::string& reason, Clock::time_point now) {
  refusals_.refuse(reason, c.peer, now);
  actions_.push_back({id, ConnAction{"", true}});
  forget(id);
}

void ServerCore::drop(Id id, const std::string& why) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  ZDP_LOG(kWarn) << name_ << ": closing the connection from " << it->second.peer << ": " << why;
  actions_.push_back({id, ConnAction{"", true}});
  forget(id);
}

void ServerCore::forget(Id id) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  if (!it->second.authenticated) --unauthenticated_;
  conns_.erase(it);
}

}  // namespace zdp::tcp_store
