// The CUDA device: accounting, copies in every direction, stream order, event timeouts
// and sticky stream failures. Skips without a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "zdp/device.h"

namespace zdp {
namespace {

using std::chrono::milliseconds;

#define SKIP_WITHOUT_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

std::unique_ptr<Device> make_device() {
  StatusOr<std::unique_ptr<Device>> device = create_cuda_device(0);
  EXPECT_TRUE(device.ok()) << device.status().to_string();
  return device.ok() ? std::move(device).value() : nullptr;
}

// A host task that blocks its stream until released (or 20 s pass, so that a failing
// test cannot hang the suite).
struct Gate {
  std::atomic<bool> open{false};
  HostTask task() {
    return [this] {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!open.load() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(milliseconds(1));
      }
      return Status::Ok();
    };
  }
};

TEST(CudaDevice, NameAndKind) {
  SKIP_WITHOUT_GPU();
  auto device = make_device();
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->kind(), DeviceKind::kCuda);
  EXPECT_EQ(device->index(), 0);
  EXPECT_EQ(device->name().rfind("cuda:0 (", 0), 0u) << device->name();
}

TEST(CudaDevice, OutOfRangeIndexIsNotFound) {
  SKIP_WITHOUT_GPU();
  StatusOr<std::unique_ptr<Device>> device = create_cuda_device(cuda_device_count());
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), StatusCode::kNotFound) << device.status().to_string();
}

TEST(CudaDevice, AllocateAndFreeAreAccounted) {
  SKIP_WITHOUT_GPU();
  auto device = make_device();
  ASSERT_NE(device, nullptr);
  const int64_t mib = 1 << 20;
  {
    StatusOr<DeviceBuffer> params = device->allocate(3 * mib, MemCategory::kParams);
    ASSERT_TRUE(params.ok()) << params.status().to_string();
    StatusOr<DeviceBuffer> staging = device->allocate(mib, MemCategory::kBuckets, MemSpace::kPinnedHost);
    ASSERT_TRUE(staging.ok()) << staging.status().to_string();
    EXPECT_NE(params->data(), nullptr);
    EXPECT_NE(staging->data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(params->data()) % 64, 0u);
    EXPECT_EQ(device->memory().category(MemCategory::kParams).current_bytes, 3 * mib);
    EXPECT_EQ(device->memory().total().current_bytes, 3 * mib);
    EXPECT_EQ(device->memory(MemSpace::kPinnedHost).category(MemCategory::kBuckets).current_bytes, mib);
    params->reset();
    EXPECT_EQ(device->memory().category(MemCategory::kParams).current_bytes, 0);
    EXPECT_EQ(device->memory().category(MemCategory::kParams).peak_bytes, 3 * mib);
  }
  EXPECT_EQ(device->memory(MemSpace::kPinnedHost).total().current_bytes, 0);
  StatusOr<DeviceBuffer> empty = device->allocate(0, MemCategory::kOther);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data(), nullptr);
}

TEST(CudaDevice, OutOfMemoryIsReportedNotThrown) {
  SKIP_WITHOUT_GPU();
  auto device = make_device();
  ASSERT_NE(device, nullptr);
  StatusOr<DeviceBuffer> huge = device->allocate(int64_t{1} << 50, MemCategory::kOptimizer);  // 1 PiB
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfMemory) << huge.status().to_string();
  EXPECT_NE(huge.status().message().find("cuda:0"), std::string::npos) << huge.status().to_string();
  EXPECT_EQ(device->memory().total().current_bytes, 0);
  // The failure is not sticky: the device still works.
  StatusOr<DeviceBuffer> small = device->allocate(4096, MemCategory::kOther);
  EXPECT_TRUE(small.ok()) << small.status().to_string();
}

TEST(CudaDevice, MemcpyRoundTripHostDevicePinned) {
  SKIP_WITHOUT_GPU();
  auto device = make_device();
  ASSERT_NE(device, nullptr);
  const size_t n = 1000003;  // odd: no size is a multiple of anything
  std::vector<int32_t> src(n), back(n, -1);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<int32_t>(i * 2654435761u);
  const size_t bytes = n * sizeof(int32_t);
  StatusOr<DeviceBuffer> dev = device->allocate(static_cast<int64_t>(bytes), MemCategory::kOther);
  StatusOr<DeviceBuffer> pinned = device->allocate(static_cast<int64_t>(bytes), MemCategory::kOther, MemSpace::kPinnedHost);
  ASSERT_TRUE(dev.ok() && pinned.ok());
  ASSERT_TRUE(device->memcpy(dev->data(), src.data(), bytes).ok());        // host -> device
  ASSERT_TRUE(device->memcpy(pinned->data(), dev->data(), bytes).ok());    // device -> pinned
  ASSERT_TRUE(device->memcpy(back.data(), pinned->data(), bytes).ok());    // pinned -> host
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], src[i]) << "Mismatch at index " << i;
}

TEST(CudaStream, CopiesAndHostTasksRunInStreamOrder) {
  SKIP_WITHOUT_GPU();
  auto device = make_device();
  ASSERT_NE(device, nullptr);
  auto stream = device->create_stream("copy");
  auto done = device->create_event();
  ASSERT_TRUE(stream.ok() && done.ok());
  const size_t n = 1 << 20;
  const size_t bytes = n * sizeof(float);
  StatusOr<DeviceBuffer> in = device->allocate(static_cast<int64_t>(bytes), MemCategory::kOther, MemSpace::kPinnedHost);
  StatusOr<DeviceBuffer> out = device->allocate(static_cast<int64_t>(bytes), MemCategory::kOther, MemSpace::kPinnedHost);
  StatusOr<DeviceBuffer> dev = device->allocate(static_cast<int64_t>(bytes), MemCategory::kOther);
  ASSERT_TRUE(in.ok() && out.ok() && dev.ok());
  for (size_t i = 0; i < n; ++i) in->as<float>()[i] = static_cast<float>(i);
  std::memset(out->data(), 0, bytes);

  std::vector<int> order;  // written only by host tasks, which run one at a time in order
  Stream& s = **stream;
  ASSERT_TRUE(s.memcpy_async(dev->data(), in->data(), bytes).ok());
  ASSERT_TRUE(s.memcpy_async(out->data(), dev->data(), bytes).ok());
  const float* result = out->as<float>();
  ASSERT_TRUE(s.enqueue_host("check copy", [&order, result, n] {
                 for (size_t i = 0; i < n; ++i) {
                   if (result[i] != static_cast<float>(i)) {
                     return Status(StatusCode::kInternal, "copy not finished before the host task: index " +
                                                              std::to_string(i));
                   }
                 }
                 order.push_back(0);
                 return Status::Ok();
               })
                  .ok());
  ASSERT_TRUE(s.memset_async(dev->data(), 0, bytes).ok());
  ASSERT_TRUE(s.memcpy_async(out->data(), dev->data(), bytes).ok());
  for (int i = 1; i <= 50; ++i) {
    ASSERT_TRUE(s.enqueue_host("order " + std::to_string(i), [&order, i] {
                   order.push_back(i);
                   return Status::Ok();
                 })
                    .ok());
  }
  ASSERT_TRUE(s.record(**done).ok());
  ASSERT_TRUE((*done)->wait(milliseconds(30000)).ok());
  EXPECT_TRUE((*done)->ready());
  ASSERT_EQ(order.size(), 51u);
  for (int i = 0; i <= 50; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(result[i], 0.0f) << "Mismatch at index " << i;
  EXPECT_TRUE(s.synchronize(milliseconds(30000)).ok());
  EXPECT_TRUE(s.error().ok());
  EXPECT_NE(s.native_handle(), nullptr);
}

TEST(CudaStream, EventWaitTimesOutWhileAHostTaskBlocksTheStream) {
  SKIP_WITHOUT_GPU();
  auto device = make_device();
  ASSERT_NE(device, nullptr);
  auto stream = device->create_stream("blocked");
  auto event = device->create_event();
  ASSERT_TRUE(stream.ok() && event.ok());
  EXPECT_TRUE((*event)->ready()) << "an event never recorded is ready";
  EXPECT_TRUE((*event)->wait(milliseconds(10)).ok());

  Gate gate;
  ASSERT_TRUE((*stream)->enqueue_host("gate", gate.task()).ok());
  ASSERT_TRUE((*stream)->record(**event).ok());
  const auto start = std::chrono::steady_clock::now();
  const Status timed_out = (*event)->wait(milliseconds(100));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(timed_out.code(), StatusCode::kTimeout) << timed_out.to_string();
  EXPECT_GE(waited, milliseconds(100));
  EXPECT_LT(waited, milliseconds(5000));
  EXPECT_FALSE((*event)->ready());
  EXPECT_EQ((*stream)->synchronize(milliseconds(50)).code(), StatusCode::kTimeout);

  gate.open = true;
  EXPECT_TRUE((*event)->wait(milliseconds(30000)).ok());
  EXPECT_TRUE((*event)->ready());
  EXPECT_TRUE((*stream)->synchronize(milliseconds(30000)).ok());
}

TEST(CudaStream, FailingHostTaskMakesTheStreamStickyFailed) {
  SKIP_WITHOUT_GPU();
  auto device = make_device();
  ASSERT_NE(device, nullptr);
  auto stream = device->create_stream("failing");
  auto other = device->create_stream("follower");
  auto before = device->create_event();
  auto after = device->create_event();
  auto later = device->create_event();
  ASSERT_TRUE(stream.ok() && other.ok() && before.ok() && after.ok() && later.ok());
  Stream& s = **stream;

  Gate gate;  // holds the stream until everything is enqueued: the order is then certain
  ASSERT_TRUE(s.enqueue_host("gate", gate.task()).ok());
  ASSERT_TRUE(s.record(**before).ok());
  ASSERT_TRUE(s.enqueue_host("boom", [] { return Status(StatusCode::kInternal, "boom"); }).ok());
  std::atomic<bool> ran_after{false};
  ASSERT_TRUE(s.enqueue_host("after", [&ran_after] {
                 ran_after = true;
                 return Status::Ok();
               })
                  .ok());
  ASSERT_TRUE(s.record(**after).ok());
  // A stream that waits on the failed work fails too, and skips its own later tasks.
  std::atomic<bool> follower_ran{false};
  ASSERT_TRUE((*other)->wait(**after).ok());
  ASSERT_TRUE((*other)->enqueue_host("follower task", [&follower_ran] {
                 follower_ran = true;
                 return Status::Ok();
               })
                  .ok());
  gate.open = true;

  EXPECT_TRUE((*before)->wait(milliseconds(30000)).ok()) << "work before the failure succeeded";
  const Status failed = (*after)->wait(milliseconds(30000));
  EXPECT_EQ(failed.code(), StatusCode::kInternal) << failed.to_string();
  EXPECT_NE(failed.message().find("boom"), std::string::npos) << failed.to_string();
  EXPECT_FALSE(ran_after.load()) << "a task after the failure must be skipped";
  EXPECT_EQ(s.error().code(), StatusCode::kInternal);
  EXPECT_EQ(s.synchronize(milliseconds(30000)).code(), StatusCode::kInternal);

  // Sticky: later work is skipped and later events report the first failure.
  std::atomic<bool> ran_later{false};
  const Status enqueue = s.enqueue_host("later", [&ran_later] {
    ran_later = true;
    return Status::Ok();
  });
  EXPECT_TRUE(enqueue.ok() || enqueue.code() == StatusCode::kAborted) << enqueue.to_string();
  ASSERT_TRUE(s.record(**later).ok());
  EXPECT_EQ((*later)->wait(milliseconds(30000)).code(), StatusCode::kInternal);
  EXPECT_FALSE(ran_later.load());

  const Status follower = (*other)->synchronize(milliseconds(30000));
  EXPECT_EQ(follower.code(), StatusCode::kInternal) << follower.to_string();
  EXPECT_NE(follower.message().find("boom"), std::string::npos) << follower.to_string();
  EXPECT_FALSE(follower_ran.load());
}

TEST(CudaStream, ThrowingHostTaskFailsTheStreamWithItsName) {
  SKIP_WITHOUT_GPU();
  auto device = make_device();
  ASSERT_NE(device, nullptr);
  auto stream = device->create_stream("throwing");
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*stream)->enqueue_host("thrower", []() -> Status { throw std::runtime_error("kaput"); }).ok());
  const Status s = (*stream)->synchronize(milliseconds(30000));
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.to_string();
  EXPECT_NE(s.message().find("thrower"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("kaput"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace zdp
