// Host vectors <-> device buffers for kernel tests, through zdp's Device API (so tests need
// no CUDA header): upload, run on a stream, synchronize, download and compare.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <memory>
#include <vector>

#include "kernels/common.h"
#include "testing/test_cuda_device.h"
#include "zdp/device.h"

namespace zdp::testing {

// The test's CUDA device and one stream; skip the test when there is no GPU.
struct GpuFixture {
  std::unique_ptr<Device> device;
  std::unique_ptr<Stream> stream;

  // Returns false (after recording a failure) when the device cannot be set up.
  bool init() {
#if defined(ZDP_SIMT_EMULATION)
    // tests/simt/: the kernels run on the host (testing/simt/simt.h), so "device" memory
    // is the CPU device's.
    device = create_cpu_device();
#else
    auto d = create_cuda_device(0);
    if (!d.ok()) {
      ADD_FAILURE() << d.status().to_string();
      return false;
    }
    device = std::move(d).value();
#endif
    auto s = device->create_stream("kernel test");
    if (!s.ok()) {
      ADD_FAILURE() << s.status().to_string();
      return false;
    }
    stream = std::move(s).value();
    return true;
  }
#if defined(ZDP_SIMT_EMULATION)
  cudaStream_t cuda_stream() const { return nullptr; }  // emulated launches run at once
#else
  cudaStream_t cuda_stream() const { return static_cast<cudaStream_t>(stream->native_handle()); }
#endif
  void sync() const {
    const Status st = stream->synchronize(std::chrono::seconds(60));
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
};

// A device copy of a host vector, `pad` elements past the start of its allocation (pad 1
// makes every pointer misaligned for 16-byte loads, exercising the scalar paths).
template <typename T>
class DeviceArray {
 public:
  DeviceArray(Device& device, const std::vector<T>& host, int64_t pad = 0) : device_(&device), size_(host.size()) {
    // Exactly the elements (one byte for none: a real, non-null pointer), so that under the
    // SIMT emulation built with ASan a kernel's read past the end is reported.
    const auto bytes = static_cast<int64_t>((host.size() + pad) * sizeof(T));
    auto b = device.allocate(bytes > 0 ? bytes : 1, MemCategory::kOther);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    if (!b.ok()) return;
    buffer_ = std::move(b).value();
    data_ = buffer_.as<T>() + pad;
    if (!host.empty()) {
      EXPECT_TRUE(device.memcpy(data_, host.data(), host.size() * sizeof(T)).ok());
    }
  }
  T* data() const { return data_; }
  // REQUIRES: the stream that wrote it has been synchronized.
  std::vector<T> download() const {
    std::vector<T> out(size_);
    if (size_ > 0) {
      EXPECT_TRUE(device_->memcpy(out.data(), data_, size_ * sizeof(T)).ok());
    }
    return out;
  }

 private:
  Device* device_;
  size_t size_;
  DeviceBuffer buffer_;
  T* data_ = nullptr;
};

// What a GPU output starts as in kernel tests: a value no kernel under test computes
// (kUnwritten), so an element the kernel never writes fails the comparison; never the
// CPU's answer, which would pass.
inline constexpr float kUnwritten = -1234.5f;
template <typename T>
std::vector<T> unwritten(size_t n) {
  return std::vector<T>(n, kernels::from_f32<T>(kUnwritten));
}
template <typename T>
std::vector<T> unwritten_like(const std::vector<T>& v) {
  return unwritten<T>(v.size());
}

// 16-bit storage types as their raw bits, for bit-for-bit comparisons.
template <typename T>
std::vector<uint16_t> raw_bits(const std::vector<T>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) std::memcpy(&bits[i], &v[i], sizeof(uint16_t));
  return bits;
}

}  // namespace zdp::testing

// A feature the GPU check must see run (cuDNN's fused attention): skipped where this
// machine lacks it, but failed under tests/gpu/check.sh (ZDP_GPU_CHECK set), whose rows
// counted a binary of skipped tests as a pass. Put it in braces: it is an if-else.
#define ZDP_SKIP_UNLESS_GPU_CHECK(why)                                                  \
  if (const std::string zdp_why_ = (why); std::getenv("ZDP_GPU_CHECK") != nullptr) {    \
    FAIL() << zdp_why_ << " (ZDP_GPU_CHECK is set: the GPU check needs this to run)";   \
  } else                                                                                \
    GTEST_SKIP() << zdp_why_

#if defined(ZDP_SIMT_EMULATION)
#define ZDP_SKIP_WITHOUT_GPU() (void)0  // the emulation needs none
#else
#define ZDP_SKIP_WITHOUT_GPU() \
  if (::zdp::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"
#endif
