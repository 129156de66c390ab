// The TCP store's wire codec (runtime/src/store/tcp_store_protocol.h) without sockets:
// requests and responses round-trip, every truncation and trailing byte is refused, and
// the size limits hold before anything is allocated.
#include "runtime/src/store/tcp_store_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zdp {
namespace {

using ::testing::HasSubstr;

std::vector<tcp_store::Request> sample_requests() {
  using tcp_store::Op;
  std::vector<tcp_store::Request> out(5);
  out[0].op = Op::kSet, out[0].key = "key", out[0].value = std::string("v\0al", 4);
  out[1].op = Op::kGet, out[1].key = "g", out[1].number = 1500;
  out[2].op = Op::kAdd, out[2].key = "n", out[2].number = -3;
  out[3].op = Op::kWait, out[3].keys = {"a", "", "ccc"}, out[3].number = 7;
  out[4].op = Op::kCheck, out[4].keys = {"x"};
  return out;
}

std::string_view payload_of(const std::string& frame) {
  return std::string_view(frame).substr(tcp_store::kFrameHeaderBytes);
}

TEST(TcpStoreProtocol, RequestsRoundTrip) {
  for (const tcp_store::Request& in : sample_requests()) {
    const std::string frame = tcp_store::encode_request(in);
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= static_cast<uint32_t>(static_cast<uint8_t>(frame[i])) << (8 * i);
    EXPECT_EQ(length, frame.size() - 4);
    tcp_store::Request out;
    ASSERT_TRUE(tcp_store::decode_request(payload_of(frame), &out).ok()) << tcp_store::op_name(in.op);
    EXPECT_EQ(out.op, in.op);
    EXPECT_EQ(out.key, in.key);
    EXPECT_EQ(out.value, in.value);
    EXPECT_EQ(out.keys, in.keys);
    EXPECT_EQ(out.number, in.number);
  }
}

// Every proper prefix of a valid payload is cut short somewhere; one extra byte is left over.
TEST(TcpStoreProtocol, EveryTruncationAndTrailingByteIsRejected) {
  for (const tcp_store::Request& in : sample_requests()) {
    const std::string payload(payload_of(tcp_store::encode_request(in)));
    tcp_store::Request out;
    for (size_t n = 0; n < payload.size(); ++n) {
      const Status s = tcp_store::decode_request(std::string_view(payload).substr(0, n), &out);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << tcp_store::op_name(in.op) << " cut at " << n;
    }
    const Status s = tcp_store::decode_request(payload + "!", &out);
    EXPECT_THAT(s.message(), HasSubstr("left over")) << tcp_store::op_name(in.op);
  }
}

TEST(TcpStoreProtocol, LimitsAreEnforced) {
  tcp_store::Request out;
  // Unknown op.
  EXPECT_THAT(tcp_store::decode_request(std::string("\xee", 1), &out).message(), HasSubstr("unknown op"));
  // A key over kMaxKeyBytes.
  tcp_store::Request big;
  big.op = tcp_store::Op::kGet;
  big.key.assign(tcp_store::kMaxKeyBytes + 1, 'k');
  EXPECT_EQ(tcp_store::check_request_limits(big).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(tcp_store::decode_request(payload_of(tcp_store::encode_request(big)), &out).message(),
              HasSubstr("exceeds the limit"));
  // A key count of 4 billion in a tiny payload: refused before anything is allocated.
  const std::string lying("\x05\xff\xff\xff\xff", 5);
  EXPECT_THAT(tcp_store::decode_request(lying, &out).message(), HasSubstr("exceed the limit"));
  // A string length pointing past the end.
  const std::string past_end("\x01\x10\x00\x00\x00" "abc", 8);
  EXPECT_THAT(tcp_store::decode_request(past_end, &out).message(), HasSubstr("cut short"));
}

TEST(TcpStoreProtocol, ResponsesRoundTrip) {
  using tcp_store::Op;
  using tcp_store::Reply;
  tcp_store::Response in, out;
  in.value = "val";
  ASSERT_TRUE(tcp_store::decode_response(Op::kGet, payload_of(tcp_store::encode_response(Op::kGet, in)), &out).ok());
  EXPECT_EQ(out.value, "val");
  in = {};
  in.reply = Reply::kTimeout;
  in.missing = {"b", "c"};
  ASSERT_TRUE(tcp_store::decode_response(Op::kWait, payload_of(tcp_store::encode_response(Op::kWait, in)), &out).ok());
  EXPECT_EQ(out.reply, Reply::kTimeout);
  EXPECT_EQ(out.missing, in.missing);
  in = {};
  in.number = -42;
  ASSERT_TRUE(tcp_store::decode_response(Op::kAdd, payload_of(tcp_store::encode_response(Op::kAdd, in)), &out).ok());
  EXPECT_EQ(out.number, -42);
  in = {};
  in.present = true;
  ASSERT_TRUE(
      tcp_store::decode_response(Op::kCheck, payload_of(tcp_store::encode_response(Op::kCheck, in)), &out).ok());
  EXPECT_TRUE(out.present);
  EXPECT_FALSE(tcp_store::decode_response(Op::kCheck, std::string("\x07", 1), &out).ok());  // unknown reply code
}

// A peer that claims a 1 GiB reply and sends nothing more costs the reader what arrived,
// not the claim: the buffer grows with the bytes (it was resized to the claim first).
TEST(TcpStoreProtocol, AClaimedLengthIsNotAllocatedBeforeItsBytesArrive) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  const uint32_t claimed = (1u << 30) - 1;
  char header[tcp_store::kFrameHeaderBytes];
  for (size_t i = 0; i < sizeof(header); ++i) header[i] = static_cast<char>((claimed >> (8 * i)) & 0xff);
  ASSERT_EQ(::write(fds[1], header, sizeof(header)), static_cast<ssize_t>(sizeof(header)));
  ASSERT_EQ(::write(fds[1], "abc", 3), 3);
  ::close(fds[1]);
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  std::string payload;
  const Status s = tcp_store::read_frame(fds[0], tcp_store::kMaxResponseBytes, tcp_store::deadline_after(std::chrono::seconds(5)),
                                         std::chrono::seconds(5), &payload);
  ::close(fds[0]);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("connection closed mid-frame (3 of 1073741823 payload bytes)"));
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "KiB of peak memory grew";  // the claim would be 1 GiB
}

}  // namespace
}  // namespace zdp
