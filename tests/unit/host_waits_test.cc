// The per-thread host-wait counters (runtime/internal/host_waits.h) on the CPU device:
// every synchronize, event wait and synchronous copy counts, on the thread that made it;
// event waits inside a StreamOrderWait count apart (the CPU compute stream's waits).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/internal/host_waits.h"
#include "zdp/device.h"

namespace zdp {
namespace {

using namespace std::chrono_literals;

TEST(HostWaits, CpuDeviceCountsEachKindOnTheCallingThread) {
  auto device = create_cpu_device();
  auto stream = device->create_stream("s").value();
  auto event = device->create_event().value();
  const HostWaits before = host_waits();
  ASSERT_TRUE(stream->synchronize(10s).ok());
  ASSERT_TRUE(stream->record(*event).ok());
  ASSERT_TRUE(event->wait(10s).ok());
  int a = 1, b = 0;
  ASSERT_TRUE(device->memcpy(&b, &a, sizeof(a)).ok());
  {
    StreamOrderWait order;
    ASSERT_TRUE(event->wait(10s).ok());
  }
  EXPECT_TRUE(event->ready());  // a query is not a wait
  const HostWaits after = host_waits();
  EXPECT_EQ(after.synchronize - before.synchronize, 1);
  EXPECT_EQ(after.event_waits - before.event_waits, 1);
  EXPECT_EQ(after.copies - before.copies, 1);
  EXPECT_EQ(after.stream_order - before.stream_order, 1);
  EXPECT_EQ(after.blocking() - before.blocking(), 3);
  // Another thread's waits are its own.
  std::thread([&] { ASSERT_TRUE(stream->synchronize(10s).ok()); }).join();
  EXPECT_EQ(host_waits().synchronize, after.synchronize);
}

}  // namespace
}  // namespace zdp
