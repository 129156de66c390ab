// The emulated GPU's streams (testing/simt/emulated_gpu_device.h): queued work runs only
// when something waits for it, in the order StreamOrder picks, so that a missing
// cross-stream wait changes a result here; the two mutations of the engine's Exec this was
// measured with are in README, "zdp's own kernels without a GPU".
#include "testing/simt/emulated_gpu_device.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>

namespace zdp::testing {
namespace {

using namespace std::chrono_literals;

// Two streams of one emulated device, and a device int both use; the order is restored.
struct TwoStreams : ::testing::Test {
  void SetUp() override {
    device = create_emulated_gpu_device();
    a = device->create_stream("a").value();
    b = device->create_stream("b").value();
    buffer = device->allocate(sizeof(int), MemCategory::kOther).value();
    ASSERT_TRUE(a->memset_async(value(), 0, sizeof(int)).ok());
    ASSERT_TRUE(a->synchronize(1s).ok());
  }
  void TearDown() override { set_stream_order(StreamOrder::kAlternate); }
  int* value() const { return buffer.as<int>(); }
  // Queues "read the int into `seen`" on `s`.
  void read_on(Stream& s, int* seen) {
    int* v = value();
    ASSERT_TRUE(s.enqueue_host("read", [v, seen] {
                   *seen = *v;
                   return Status::Ok();
                 }).ok());
  }

  std::unique_ptr<Device> device;
  std::unique_ptr<Stream> a, b;
  DeviceBuffer buffer;
};

TEST_F(TwoStreams, QueuedWorkRunsOnlyWhenWaitedFor) {
  ASSERT_TRUE(a->memset_async(value(), 1, sizeof(int)).ok());
  int now = -1;
  ASSERT_TRUE(device->memcpy(&now, value(), sizeof(int)).ok());  // waits for no stream
  EXPECT_EQ(now, 0);
  ASSERT_TRUE(a->synchronize(1s).ok());
  ASSERT_TRUE(device->memcpy(&now, value(), sizeof(int)).ok());
  EXPECT_EQ(now, 0x01010101);
}

TEST_F(TwoStreams, AReadWithoutAWaitSeesTheOldBytesAtTheLatestOrder) {
  set_stream_order(StreamOrder::kLatest);
  ASSERT_TRUE(a->memset_async(value(), 1, sizeof(int)).ok());
  int unordered = -1, ordered = -1;
  read_on(*b, &unordered);
  ASSERT_TRUE(b->synchronize(1s).ok());
  EXPECT_EQ(unordered, 0) << "b ran a's write although it never waited for it";
  auto written = device->create_event().value();
  ASSERT_TRUE(a->record(*written).ok());
  ASSERT_TRUE(b->wait(*written).ok());
  read_on(*b, &ordered);
  ASSERT_TRUE(b->synchronize(1s).ok());
  EXPECT_EQ(ordered, 0x01010101);
}

TEST_F(TwoStreams, AWriteWithoutAWaitOvertakesAQueuedReadAtTheOthersFirstOrder) {
  set_stream_order(StreamOrder::kOthersFirst);
  int seen = -1;
  read_on(*a, &seen);                                         // a must read the old value...
  ASSERT_TRUE(b->memset_async(value(), 1, sizeof(int)).ok());  // ...but b does not wait for it
  ASSERT_TRUE(a->synchronize(1s).ok());
  EXPECT_EQ(seen, 0x01010101) << "b's queued write did not run first";
}

TEST_F(TwoStreams, ACopyFromPageableMemoryIsStagedAtTheCall) {
  int host = 7;
  ASSERT_TRUE(a->memcpy_async(value(), &host, sizeof(int)).ok());
  host = 8;  // the caller may reuse its buffer at once
  ASSERT_TRUE(a->synchronize(1s).ok());
  int now = -1;
  ASSERT_TRUE(device->memcpy(&now, value(), sizeof(int)).ok());
  EXPECT_EQ(now, 7);
}

}  // namespace
}  // namespace zdp::testing
