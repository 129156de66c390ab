// The rule by which the NCCL communicator refuses a collective's buffer
// (runtime/src/comm/buffer_check.h), on every pointer kind the CUDA runtime reports; the
// GPU test (tests/gpu/nccl_comm_test.cc) checks that the communicator applies it.
#include <gtest/gtest.h>

#include <string>

#include "runtime/src/comm/buffer_check.h"

namespace zdp {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CollectiveBufferRule, DeviceMemoryOfTheCommunicatorsDeviceAndManagedMemoryPass) {
  int x = 0;
  EXPECT_EQ(refuse_collective_buffer(&x, PointerKind::kDevice, 3, 3, "send buffer"), "");
  EXPECT_EQ(refuse_collective_buffer(&x, PointerKind::kManaged, -1, 0, "send buffer"), "");
}

TEST(CollectiveBufferRule, HostMemoryIsRefusedWithTheReasonAndTheFix) {
  int stack_variable = 0;
  const std::string pageable =
      refuse_collective_buffer(&stack_variable, PointerKind::kUnregistered, -2, 0, "receive buffer");
  EXPECT_TRUE(has(pageable, "receive buffer 0x")) << pageable;
  EXPECT_TRUE(has(pageable, "pageable host memory")) << pageable;
  EXPECT_TRUE(has(pageable, "illegal address on the GPU")) << pageable;
  EXPECT_TRUE(has(pageable, "pass memory of cuda:0")) << pageable;
  const std::string pinned = refuse_collective_buffer(&stack_variable, PointerKind::kPinnedHost, 0, 1, "send buffer");
  EXPECT_TRUE(has(pinned, "send buffer")) << pinned;
  EXPECT_TRUE(has(pinned, "pinned host memory")) << pinned;
  EXPECT_TRUE(has(pinned, "cuda:1")) << pinned;
}

TEST(CollectiveBufferRule, AnotherDevicesMemoryAndUnknownPointersAreRefused) {
  int x = 0;
  const std::string other = refuse_collective_buffer(&x, PointerKind::kDevice, 1, 0, "send buffer");
  EXPECT_TRUE(has(other, "device memory of cuda:1, not of the communicator's cuda:0")) << other;
  const std::string unknown = refuse_collective_buffer(&x, PointerKind::kUnknown, -1, 0, "send buffer");
  EXPECT_TRUE(has(unknown, "not known to the CUDA runtime")) << unknown;
}

TEST(CollectiveBufferRule, EveryKindHasAName) {
  for (PointerKind k : {PointerKind::kUnregistered, PointerKind::kPinnedHost, PointerKind::kDevice,
                        PointerKind::kManaged, PointerKind::kUnknown}) {
    EXPECT_STRNE(to_string(k), "?");
  }
}

}  // namespace
}  // namespace zdp
