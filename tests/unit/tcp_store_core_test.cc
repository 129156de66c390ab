// The store server's logic without sockets (runtime/src/store/tcp_store_core.h), on a
// fake clock: what a connection may do before it presents the job secret (frame size,
// deadline, how many may wait), eviction, waits and their deadlines, byte-at-a-time
// framing, the constant-time comparison and the rate-limited refusal log.
#include "runtime/src/store/tcp_store_core.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zdp::tcp_store {
namespace {

using std::chrono::milliseconds;
using Clock = ServerCore::Clock;

const std::string kSecret = "0123456789abcdef0123456789abcdef";

std::string header(uint32_t n) {
  std::string h(4, '\0');
  for (int i = 0; i < 4; ++i) h[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return h;
}

std::string auth(const std::string& secret) {
  Request r;
  r.op = Op::kAuth;
  r.value = secret;
  return encode_request(r);
}

std::string request(Op op, const std::string& key, const std::string& value = "", int64_t number = 0) {
  Request r;
  r.op = op;
  r.key = key;
  r.value = value;
  r.number = number;
  if (op == Op::kWait || op == Op::kCheck) r.keys = {key};
  return encode_request(r);
}

Response decode(Op op, const std::string& frame) {
  Response response;
  EXPECT_GE(frame.size(), kFrameHeaderBytes);
  const Status s = decode_response(op, std::string_view(frame).substr(kFrameHeaderBytes), &response);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return response;
}

class CoreTest : public ::testing::Test {
 protected:
  explicit CoreTest(ServerLimits limits = small_limits()) : core_("store server :test", kSecret, limits) {}
  static ServerLimits small_limits() {
    ServerLimits l;
    l.max_message_bytes = 1 << 20;
    l.auth_timeout = milliseconds(500);
    l.max_unauthenticated = 3;
    l.max_connections = 8;
    l.frame_timeout = milliseconds(1000);
    return l;
  }
  // Opens an authenticated connection.
  void open_authenticated(ServerCore::Id id) {
    core_.open(id, "peer" + std::to_string(id), now_);
    core_.receive(id, auth(kSecret), now_);
    const auto actions = core_.take_actions();
    ASSERT_EQ(actions.size(), 1u);
    EXPECT_EQ(decode(Op::kAuth, actions[0].second.send).reply, Reply::kOk);
    EXPECT_FALSE(actions[0].second.close);
  }
  // The ids the core asked to close.
  std::vector<ServerCore::Id> closes(const std::vector<std::pair<ServerCore::Id, ConnAction>>& actions) {
    std::vector<ServerCore::Id> ids;
    for (const auto& [id, a] : actions) {
      if (a.close) ids.push_back(id);
    }
    return ids;
  }

  Clock::time_point now_ = Clock::time_point() + std::chrono::hours(1);
  ServerCore core_;
};

TEST(SameSecret, ComparesWholeStrings) {
  EXPECT_TRUE(same_secret("abc", "abc"));
  EXPECT_FALSE(same_secret("abd", "abc"));
  EXPECT_FALSE(same_secret("ab", "abc"));       // a prefix
  EXPECT_FALSE(same_secret("abcabc", "abc"));   // longer, repeating it
  EXPECT_FALSE(same_secret("", "abc"));
  EXPECT_FALSE(same_secret("abc", ""));
  EXPECT_TRUE(same_secret("", ""));
}

TEST_F(CoreTest, AHugeLengthBeforeTheSecretClosesAtOnce) {
  core_.open(2, "attacker", now_);
  core_.receive(2, header(64u << 20), now_);  // 4 bytes announcing 64 MiB
  EXPECT_EQ(closes(core_.take_actions()), std::vector<ServerCore::Id>{2});
  EXPECT_EQ(core_.connections(), 0u);
  EXPECT_EQ(core_.refusals().count("a frame too large before the job secret"), 1u);
  // The same length is fine once authenticated (under max_message_bytes it would be).
  open_authenticated(3);
  core_.receive(3, header(1000), now_);
  EXPECT_TRUE(core_.take_actions().empty());
  EXPECT_EQ(core_.connections(), 1u);
}

TEST_F(CoreTest, ARequestOtherThanAuthIsRefused) {
  core_.open(2, "p", now_);
  core_.receive(2, request(Op::kSet, "k", "v"), now_);
  EXPECT_EQ(closes(core_.take_actions()), std::vector<ServerCore::Id>{2});
  EXPECT_EQ(core_.refusals().count("a request before the job secret"), 1u);
}

TEST_F(CoreTest, AWrongSecretIsAnsweredThenClosed) {
  core_.open(2, "p", now_);
  core_.receive(2, auth(kSecret.substr(0, kSecret.size() - 1) + "0"), now_);
  const auto actions = core_.take_actions();
  ASSERT_EQ(actions.size(), 2u);
  const Response r = decode(Op::kAuth, actions[0].second.send);
  EXPECT_EQ(r.reply, Reply::kInvalidArgument);
  EXPECT_EQ(r.message, "wrong job secret");
  EXPECT_TRUE(actions[1].second.close);
  EXPECT_EQ(core_.unauthenticated(), 0u);
}

TEST_F(CoreTest, ASilentConnectionIsClosedAtTheAuthDeadline) {
  core_.open(2, "idle", now_);
  open_authenticated(3);
  EXPECT_EQ(core_.next_deadline(), now_ + milliseconds(500));
  core_.tick(now_ + milliseconds(499));
  EXPECT_TRUE(core_.take_actions().empty());
  core_.tick(now_ + milliseconds(500));
  EXPECT_EQ(closes(core_.take_actions()), std::vector<ServerCore::Id>{2});
  EXPECT_EQ(core_.refusals().count("no job secret within the deadline"), 1u);
  // The authenticated one has no deadline and stays.
  core_.tick(now_ + std::chrono::hours(5));
  EXPECT_TRUE(core_.take_actions().empty());
  EXPECT_EQ(core_.connections(), 1u);
}

TEST_F(CoreTest, OneConnectionTooManyWithoutTheSecretEvictsTheOldest) {
  open_authenticated(2);
  for (ServerCore::Id id = 10; id < 13; ++id) core_.open(id, "idle", now_);
  EXPECT_TRUE(core_.take_actions().empty());
  core_.open(13, "idle", now_);
  EXPECT_EQ(closes(core_.take_actions()), std::vector<ServerCore::Id>{10});
  EXPECT_EQ(core_.unauthenticated(), 3u);
  // The newest can still authenticate: a rank arriving during a flood gets in.
  core_.receive(13, auth(kSecret), now_);
  EXPECT_EQ(decode(Op::kAuth, core_.take_actions().at(0).second.send).reply, Reply::kOk);
  EXPECT_EQ(core_.unauthenticated(), 2u);
}

TEST_F(CoreTest, ConnectionsBeyondTheLimitAreRefused) {
  for (ServerCore::Id id = 2; id < 10; ++id) open_authenticated(id);
  core_.open(10, "late", now_);
  EXPECT_EQ(closes(core_.take_actions()), std::vector<ServerCore::Id>{10});
  EXPECT_EQ(core_.connections(), 8u);
}

TEST_F(CoreTest, AGetWaitsUntilAnotherConnectionSetsTheKey) {
  open_authenticated(2);
  open_authenticated(3);
  core_.receive(2, request(Op::kGet, "k", "", 10000), now_);
  EXPECT_TRUE(core_.take_actions().empty());
  EXPECT_FALSE(core_.reading(2));
  EXPECT_EQ(core_.next_deadline(), now_ + milliseconds(10000));
  core_.receive(3, request(Op::kSet, "k", "value"), now_);
  const auto actions = core_.take_actions();
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].first, 3u);  // the set's ack
  EXPECT_EQ(actions[1].first, 2u);
  EXPECT_EQ(decode(Op::kGet, actions[1].second.send).value, "value");
  EXPECT_TRUE(core_.reading(2));
}

TEST_F(CoreTest, AWaitTimesOutAtItsDeadlineNamingTheMissingKeys) {
  open_authenticated(2);
  Request r;
  r.op = Op::kWait;
  r.keys = {"a", "b"};
  r.number = 2000;
  core_.receive(2, encode_request(r), now_);
  core_.receive(2, request(Op::kSet, "a", "1"), now_);  // pipelined behind the wait: held
  core_.tick(now_ + milliseconds(1999));
  EXPECT_TRUE(core_.take_actions().empty());
  core_.tick(now_ + milliseconds(2000));
  const auto actions = core_.take_actions();
  ASSERT_EQ(actions.size(), 2u);  // the timeout, then the held set's ack
  const Response timeout = decode(Op::kWait, actions[0].second.send);
  EXPECT_EQ(timeout.reply, Reply::kTimeout);
  EXPECT_EQ(timeout.missing, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(decode(Op::kSet, actions[1].second.send).reply, Reply::kOk);
}

// A pass that answers several waits runs each answered connection's pipelined requests,
// which can start another wait on a connection later in the pass: that wait was answered
// at once, an empty value for a key never set, or a timeout long before its deadline.
TEST_F(CoreTest, AWaitStartedDuringAPassIsNotAnsweredByIt) {
  open_authenticated(2);
  open_authenticated(3);
  open_authenticated(4);
  core_.receive(2, request(Op::kGet, "k1", "", 3000) + request(Op::kSet, "kz", "z"), now_);
  core_.receive(3, request(Op::kGet, "k1", "", 3000) + request(Op::kGet, "never", "", 3000), now_);
  EXPECT_TRUE(core_.take_actions().empty());
  core_.receive(4, request(Op::kSet, "k1", "v"), now_);
  // 4's ack, 2's get, 2's set (whose wake answers 3's get): 3's pipelined get of a key
  // nobody set waits.
  auto actions = core_.take_actions();
  ASSERT_EQ(actions.size(), 4u);
  EXPECT_EQ(actions[0].first, 4u);
  EXPECT_EQ(actions[1].first, 2u);
  EXPECT_EQ(decode(Op::kGet, actions[1].second.send).value, "v");
  EXPECT_EQ(actions[2].first, 2u);
  EXPECT_EQ(decode(Op::kSet, actions[2].second.send).reply, Reply::kOk);
  EXPECT_EQ(actions[3].first, 3u);
  EXPECT_EQ(decode(Op::kGet, actions[3].second.send).value, "v");
  EXPECT_EQ(core_.next_deadline(), now_ + milliseconds(3000));
  core_.tick(now_ + milliseconds(3000));
  actions = core_.take_actions();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(decode(Op::kGet, actions[0].second.send).reply, Reply::kTimeout);
}

TEST_F(CoreTest, AWaitStartedDuringATimeoutPassKeepsItsOwnDeadline) {
  open_authenticated(2);
  open_authenticated(3);
  core_.receive(2, request(Op::kGet, "never1", "", 500) + request(Op::kSet, "kz", "z"), now_);
  core_.receive(3, request(Op::kGet, "kz", "", 500) + request(Op::kGet, "never2", "", 10000), now_);
  core_.tick(now_ + milliseconds(500));
  // 2's timeout, its set's ack, 3's get of kz (woken by that set); 3's next get waits 10 s.
  auto actions = core_.take_actions();
  ASSERT_EQ(actions.size(), 3u);
  EXPECT_EQ(decode(Op::kGet, actions[0].second.send).reply, Reply::kTimeout);
  EXPECT_EQ(actions[2].first, 3u);
  EXPECT_EQ(decode(Op::kGet, actions[2].second.send).value, "z");
  EXPECT_EQ(core_.next_deadline(), now_ + milliseconds(10500));
  core_.tick(now_ + milliseconds(10499));
  EXPECT_TRUE(core_.take_actions().empty());
}

TEST_F(CoreTest, FramesFedOneByteAtATimeAreServed) {
  core_.open(2, "p", now_);
  const std::string bytes = auth(kSecret) + request(Op::kAdd, "n", "", 5) + request(Op::kAdd, "n", "", 2);
  for (char b : bytes) core_.receive(2, std::string(1, b), now_);
  const auto actions = core_.take_actions();
  ASSERT_EQ(actions.size(), 3u);
  EXPECT_EQ(decode(Op::kAdd, actions[2].second.send).number, 7);
}

TEST_F(CoreTest, AFrameLeftUnfinishedIsDroppedAtTheFrameDeadline) {
  open_authenticated(2);
  core_.receive(2, header(100) + "abc", now_);
  EXPECT_EQ(core_.next_deadline(), now_ + milliseconds(1000));
  core_.tick(now_ + milliseconds(1000));
  EXPECT_EQ(closes(core_.take_actions()), std::vector<ServerCore::Id>{2});
}

// Replies not yet sent hold a connection's next requests once they reach
// max_unsent_reply_bytes (here the small limits' 1 MiB): the socket layer stops reading
// it, and what it reports sent releases them. A reset to 0 on every emptied buffer let
// each small reply's send release another large one.
TEST_F(CoreTest, RequestsWaitBehindUnsentRepliesUntilTheyAreSent) {
  ServerLimits limits = small_limits();
  limits.max_unsent_reply_bytes = 1 << 20;
  ServerCore core("store server :test", kSecret, limits);
  core.open(1, "peer", now_);
  core.receive(1, auth(kSecret) + request(Op::kSet, "big", std::string(600 << 10, 'v')), now_);
  ASSERT_EQ(core.take_actions().size(), 2u);  // auth and set, a few bytes each
  core.sent(1, 64, now_);
  core.receive(1, request(Op::kGet, "big") + request(Op::kGet, "big") + request(Op::kGet, "big"), now_);
  EXPECT_EQ(core.take_actions().size(), 2u) << "the second 600 KiB reply reaches the 1 MiB: the third waits";
  EXPECT_FALSE(core.reading(1));
  core.sent(1, 100 << 10, now_);  // still 1.1 MiB unsent
  EXPECT_TRUE(core.take_actions().empty());
  EXPECT_FALSE(core.reading(1));
  core.sent(1, 200 << 10, now_);  // 0.9 MiB: below the limit
  const auto third = core.take_actions();
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(decode(Op::kGet, third[0].second.send).value.size(), size_t{600} << 10);
  EXPECT_FALSE(core.reading(1)) << "1.5 MiB unsent again";
}

TEST(RefusalLog, AFloodLogsOneLineAndOneSummaryPerInterval) {
  RefusalLog log("store server :test", milliseconds(10000));
  const Clock::time_point t0 = Clock::time_point() + std::chrono::hours(1);
  for (int i = 0; i < 1000; ++i) log.refuse(i % 2 ? "wrong job secret" : "idle", "p", t0 + milliseconds(i));
  EXPECT_EQ(log.lines_logged(), 1u);
  EXPECT_EQ(log.next_flush(), t0 + milliseconds(10000));
  log.flush(t0 + milliseconds(9999));
  EXPECT_EQ(log.lines_logged(), 1u);
  log.flush(t0 + milliseconds(10000));
  EXPECT_EQ(log.lines_logged(), 2u);
  EXPECT_EQ(log.total(), 1000u);
  EXPECT_EQ(log.count("wrong job secret"), 500u);
  // A later refusal opens a new interval and is logged in full again.
  log.refuse("idle", "p", t0 + milliseconds(20000));
  EXPECT_EQ(log.lines_logged(), 3u);
  EXPECT_EQ(log.next_flush(), Clock::time_point::max());  // nothing left to sum up
}

}  // namespace
}  // namespace zdp::tcp_store
