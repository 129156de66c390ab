// The TCP store server's logic without sockets: connections as ids, bytes in, replies
// and hang-ups out, time passed in by the caller. tcp_store_server.cc moves bytes
// between this and the sockets with one event loop; tests and fuzzers drive it directly.
//
// What it defends against (a store that listens on every interface of a multi-node job
// is reachable by anyone on the network):
// - Until a connection has presented the job secret, its frames may be at most
//   kMaxAuthFrameBytes (an auth request), so a 4-byte header cannot make it allocate; and
//   a frame's bytes are stored as they arrive, never reserved from a declared length.
// - A connection has `auth_timeout` to present the secret; at most
//   `max_unauthenticated` connections may be unauthenticated at once (a new one evicts
//   the oldest, so idle connections cannot lock the ranks out; a client whose connection
//   was evicted connects again).
// - The secret is compared in constant time (its length included); refusals are counted
//   and logged through a RefusalLog (rate-limited).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/src/store/refusal_log.h"
#include "runtime/src/store/tcp_store_protocol.h"
#include "zdp/store.h"

namespace zdp::tcp_store {

// The largest frame before authentication: op, length and a secret of kMaxKeyBytes.
inline constexpr uint64_t kMaxAuthFrameBytes = 1 + 4 + kMaxKeyBytes;

struct ServerLimits {
  uint64_t max_message_bytes = 64ull << 20;          // a frame after authentication
  std::chrono::milliseconds auth_timeout{5000};      // from accept to the secret
  size_t max_unauthenticated = 64;                   // then the oldest is evicted
  size_t max_connections = 4096;                     // then new ones are refused
  std::chrono::milliseconds frame_timeout{30000};    // a frame's body after its header
  // Replies a connection may have queued and not yet sent before its next request waits
  // for them (a client that pipelines gets of a large value and reads nothing made the
  // server hold every reply: hundreds of MB).
  uint64_t max_unsent_reply_bytes = 4ull << 20;
};

// True when `presented` equals `expected`, in a time that depends only on
// expected.size() (not on where a guess first differs, nor on the guess's length).
bool same_secret(std::string_view presented, std::string_view expected);

// What the socket layer must do with one connection.
struct ConnAction {
  std::string send;    // bytes to send, after those of earlier actions
  bool close = false;  // then close it, once everything queued for it has been sent
};

class ServerCore {
 public:
  using Id = uint64_t;
  using Clock = std::chrono::steady_clock;

  // `name` starts every log line ("store server :29500"). Empty `secret`: no check.
  ServerCore(std::string name, std::string secret, ServerLimits limits);

  // A new connection from `peer` ("127.0.0.1:5555"). May evict the oldest
  // unauthenticated connection or refuse this one (both show in take_actions()).
  void open(Id id, std::string peer, Clock::time_point now);
  // Bytes received on `id` (ignored for unknown ids).
  void receive(Id id, std::string_view bytes, Clock::time_point now);
  // The socket layer closed `id` (peer hung up, socket error, or an action's close).
  void closed(Id id);
  // Acts on the deadlines that have passed: waits that time out, connections that did
  // not authenticate or finish a frame in time, the refusal summary.
  void tick(Clock::time_point now);
  // The earliest deadline tick() acts on; Clock::time_point::max() when none.
  Clock::time_point next_deadline() const;
  // The actions produced since the last call, in order (one id may appear several times).
  std::vector<std::pair<Id, ConnAction>> take_actions();
  // The socket layer sent `bytes` of `id`'s replies: once fewer than
  // max_unsent_reply_bytes are unsent, its held requests are handled.
  void sent(Id id, uint64_t bytes, Clock::time_point now);
  // False while `id` has a request in progress (a get or wait), or replies of
  // max_unsent_reply_bytes or more not yet sent: the socket layer stops reading it
  // (watching only for a hang-up) until the reply, or until sent().
  bool reading(Id id) const;

  size_t connections() const { return conns_.size(); }
  size_t unauthenticated() const { return unauthenticated_; }
  const RefusalLog& refusals() const { return refusals_; }

 private:
  struct Conn {
    std::string peer;
    bool authenticated = false;
    Clock::time_point opened;
    Clock::time_point frame_deadline = Clock::time_point::max();  // set while a frame is partial
    std::string in;  // received bytes not yet handled
    uint64_t unsent_reply_bytes = 0;  // replied and not yet reported sent by the socket layer
    // A get or wait that waits for keys.
    bool waiting = false;
    // Which wait this is: a wait answered while others are answered in one pass may run
    // the client's next, pipelined, request, which can start another wait on the same
    // connection; the pass must not answer that one (as woken or timed out) too.
    uint64_t wait_serial = 0;
    Op wait_op = Op::kWait;
    std::vector<std::string> wait_keys;
    Clock::time_point wait_deadline;
  };

  // Handles the complete frames in `c.in` until it waits, is held, closes or runs out of bytes.
  void process(Id id, Conn& c, Clock::time_point now);
  // Its unsent replies reached max_unsent_reply_bytes: no request is handled until sent().
  bool held(const Conn& c) const { return c.unsent_reply_bytes >= limits_.max_unsent_reply_bytes; }
  // False when the connection was closed.
  bool handle(Id id, Conn& c, const Request& request, Clock::time_point now);
  bool authenticate(Id id, Conn& c, const Request& request, Clock::time_point now);
  // Answers the waits whose keys are all present now.
  void wake_waiters(Clock::time_point now);
  void answer_wait(Id id, Conn& c, bool timed_out);
  void reply(Id id, Op op, const Response& response, bool then_close = false);
  // Refuses (counted, rate-limited log) and closes.
  void refuse(Id id, Conn& c, const std::string& reason, Clock::time_point now);
  // Closes for a protocol error of an authenticated client (logged in full: rare and
  // worth seeing).
  void drop(Id id, const std::string& why);
  void forget(Id id);

  const std::string name_;
  const std::string secret_;
  const ServerLimits limits_;
  InMemoryStore data_;  // one thread uses it; its methods never block with timeout 0
  std::map<Id, Conn> conns_;
  size_t unauthenticated_ = 0;
  std::vector<std::pair<Id, ConnAction>> actions_;
  RefusalLog refusals_;
};

}  // namespace zdp::tcp_store
