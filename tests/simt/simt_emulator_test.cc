// The SIMT emulation itself (testing/simt/simt.h): that it runs CUDA's programming model
// faithfully enough to judge zdp's kernels (tests/CMakeLists.txt runs them under
// the GPU tests' assertions), and that it reports what it claims to catch: a missing
// barrier, a read of shared memory before any write, a barrier and a shuffle waiting for
// each other, a shuffle of an exited lane, a launch past the thread or dynamic shared
// memory limits. Compiled with simt.h
// force-included, so the kernels below are written as CUDA.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <thread>
#include <vector>

#include "core/internal/address_sanitizer.h"
#include "kernels/cuda/common.cuh"
#include "testing/simt/fiber_context.h"

namespace {

// The sum of `n` values by one block: a shared-memory tree with a barrier per level.
__global__ void tree_sum(const int* in, int n, int* out) {
  __shared__ int s[256];
  const int t = static_cast<int>(threadIdx.x);
  s[t] = t < n ? in[t] : 0;
  __syncthreads();
  for (int stride = static_cast<int>(blockDim.x) / 2; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) *out = s[0];
}

TEST(SimtEmulator, BlockReductionWithBarriersIsExactInEveryOrder) {
  std::vector<int> in(256);
  std::iota(in.begin(), in.end(), 1);
  for (const auto schedule : {zdp_emu::Schedule::kForward, zdp_emu::Schedule::kReverse}) {
    zdp_emu::set_schedule(schedule);
    int out = 0;
    zdp_emu::launch(1, 256, 0, nullptr, tree_sum, in.data(), 256, &out);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(out, 256 * 257 / 2);
  }
  zdp_emu::set_schedule(zdp_emu::Schedule::kAlternate);
}

// Each thread writes its slot, then reads its neighbour's, `step` away (+1: the thread
// after it, -1: the one before), with or without the barrier that orders the two.
__global__ void read_neighbour(int base, int step, bool with_barrier, int* out) {
  __shared__ int s[64];
  const int t = static_cast<int>(threadIdx.x);
  s[t] = base + t;
  if (with_barrier) __syncthreads();
  const int other = (t + step + 64) % 64;
  out[blockIdx.x * 64 + t] = s[other] == base + other ? 1 : 0;
}

// How many of `blocks` x 64 threads read their neighbour's value of this launch.
int neighbours_read(int blocks, int base, int step, bool with_barrier) {
  std::vector<int> out(static_cast<size_t>(blocks) * 64, -1);
  zdp_emu::launch(blocks, 64, 0, nullptr, read_neighbour, base, step, with_barrier, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  return std::accumulate(out.begin(), out.end(), 0);
}

TEST(SimtEmulator, AMissingBarrierShowsInTheOrderThatRunsTheReaderFirst) {
  // Forward order runs thread t before t + 1: a read of the next thread's slot sees the
  // last launch's value; reverse order, a read of the previous one's. The base changes
  // each launch, so a stale value is never this launch's.
  zdp_emu::set_schedule(zdp_emu::Schedule::kForward);
  EXPECT_EQ(neighbours_read(1, 1000, +1, false), 1) << "only thread 63, whose next is thread 0";
  EXPECT_EQ(neighbours_read(1, 2000, -1, false), 63);
  zdp_emu::set_schedule(zdp_emu::Schedule::kReverse);
  EXPECT_EQ(neighbours_read(1, 3000, +1, false), 63);
  EXPECT_EQ(neighbours_read(1, 4000, -1, false), 1);
  // The default alternates blocks, so one launch of two blocks catches either mistake.
  zdp_emu::set_schedule(zdp_emu::Schedule::kAlternate);
  EXPECT_LT(neighbours_read(2, 5000, +1, false), 128);
  EXPECT_LT(neighbours_read(2, 6000, -1, false), 128);
  for (const auto schedule : {zdp_emu::Schedule::kForward, zdp_emu::Schedule::kReverse, zdp_emu::Schedule::kAlternate}) {
    zdp_emu::set_schedule(schedule);
    EXPECT_EQ(neighbours_read(2, 7000, +1, true), 128);
    EXPECT_EQ(neighbours_read(2, 8000, -1, true), 128);
  }
}

__global__ void warp_sums(const float* in, float* out) {
  float v = in[threadIdx.x];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  out[threadIdx.x] = v;
}

TEST(SimtEmulator, WarpShufflesExchangeWithinEachWarp) {
  std::vector<float> in(64), out(64, -1);
  for (int i = 0; i < 64; ++i) in[i] = static_cast<float>(i < 32 ? 1 : i);
  zdp_emu::launch(1, 64, 0, nullptr, warp_sums, in.data(), out.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  const float second = static_cast<float>((32 + 63) * 32 / 2);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], i < 32 ? 32.0f : second) << i;
}

__global__ void shuffle_down_and_any(int* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, lane * 10, 3);
  out[64 + threadIdx.x] = __any_sync(0xffffffffu, threadIdx.x == 40);
}

TEST(SimtEmulator, ShuffleDownKeepsItsOwnValuePastTheWarpAndAnyIsPerWarp) {
  std::vector<int> out(128, -1);
  zdp_emu::launch(1, 64, 0, nullptr, shuffle_down_and_any, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    EXPECT_EQ(out[t], lane + 3 < 32 ? (lane + 3) * 10 : lane * 10) << t;
    EXPECT_EQ(out[64 + t], t >= 32 ? 1 : 0) << t;
  }
}

__global__ void shuffle_with_half_the_warp_gone(float* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 16);
}

__global__ void warp_waits_for_block(int* out) {
  if (threadIdx.x < 32) {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
  } else {
    __syncthreads();
    out[threadIdx.x] = 0;
  }
}

TEST(SimtEmulator, AShuffleOfAnExitedLaneOrADeadlockIsAFailedLaunch) {
  std::vector<float> f(32, 0);
  zdp_emu::launch(1, 32, 0, nullptr, shuffle_with_half_the_warp_gone, f.data());
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_NE(zdp_emu::last_launch_fault().find("has exited"), std::string::npos) << zdp_emu::last_launch_fault();
  // The launchers' check says that a fault may be an earlier kernel's (on a GPU it surfaces
  // at a later call), not "kernel launch failed" of whichever kernel checked next.
  zdp_emu::launch(1, 32, 0, nullptr, shuffle_with_half_the_warp_gone, f.data());
  const zdp::Status checked = zdp::kernels::cuda::check_launch("next_kernel_cuda");
  EXPECT_NE(checked.message().find("next_kernel_cuda: a kernel or copy on this device faulted"), std::string::npos)
      << checked.message();
  EXPECT_NE(checked.message().find("rerun with CUDA_LAUNCH_BLOCKING=1"), std::string::npos) << checked.message();

  // Warp 0 shuffles and exits; warp 1 waits at a barrier warp 0 never reaches, which
  // warp 0's exit completes (exited threads count as arrived, as on the GPU): no fault.
  std::vector<int> out(64, -1);
  zdp_emu::launch(1, 64, 0, nullptr, warp_waits_for_block, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << zdp_emu::last_launch_fault();
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 0);
}

__global__ void shuffle_then_barrier_mismatch(int* out) {
  // Lanes 0-15 wait at a shuffle that lanes 16-31 never reach, while those wait at a
  // barrier: a true deadlock.
  if (threadIdx.x < 16) {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
  } else {
    __syncthreads();
  }
}

TEST(SimtEmulator, ATrueDeadlockIsReportedNotHung) {
  std::vector<int> out(32, 0);
  zdp_emu::launch(1, 32, 0, nullptr, shuffle_then_barrier_mismatch, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_NE(zdp_emu::last_launch_fault().find("deadlock"), std::string::npos) << zdp_emu::last_launch_fault();
}

__global__ void write_dynamic(int n, int* out) {
  // What cu_to_cc.py makes of `extern __shared__ int dyn[];` in a .cu file.
  int* dyn = static_cast<int*>(zdp_emu::dynamic_shared());
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) dyn[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) *out = dyn[n - 1];
}

TEST(SimtEmulator, LaunchLimitsAreCudas) {
  int out = 0;
  zdp_emu::launch(1, 1025, 0, nullptr, write_dynamic, 1, &out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "read once, then cleared";
  zdp_emu::launch(0, 32, 0, nullptr, write_dynamic, 1, &out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  // Per dimension (only the thread count and empty grids were checked): grid.y and .z at
  // most 65535, block.z at most 64.
  zdp_emu::launch(dim3(1, 65536), 32, 0, nullptr, write_dynamic, 1, &out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  zdp_emu::launch(dim3(1, 1, 65536), 32, 0, nullptr, write_dynamic, 1, &out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  zdp_emu::launch(1, dim3(1, 1, 65), 0, nullptr, write_dynamic, 1, &out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  zdp_emu::launch(dim3(2, 3), dim3(2, 2, 2), sizeof(int), nullptr, write_dynamic, 1, &out);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  // 64 KiB of dynamic shared memory: refused until the kernel is allowed that much.
  const int n = 16384;
  const size_t bytes = n * sizeof(int);
  zdp_emu::launch(1, 256, bytes, nullptr, write_dynamic, n, &out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFuncSetAttribute(write_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
            cudaSuccess);
  zdp_emu::launch(1, 256, bytes, nullptr, write_dynamic, n, &out);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out, n - 1);
  EXPECT_NE(cudaFuncSetAttribute(write_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 zdp_emu::shared_memory_optin() + 1),
            cudaSuccess)
      << "past the device's opt-in maximum";
}

// Reads its slot before writing it: each block but the first must see the poison, not
// the value the block before it left (the first runs on zeroed memory: registration
// happens on first use). What cu_to_cc.py makes of `__shared__ int s[32];`:
__global__ void read_before_write(int* out) {
  static int s[32];
  static const bool registered = zdp_emu::register_shared(&s, sizeof(s));
  (void)registered;
  const int t = static_cast<int>(threadIdx.x);
  out[blockIdx.x * 32 + t] = s[t];
  s[t] = 1000 + static_cast<int>(blockIdx.x);
}

TEST(SimtEmulator, SharedMemoryIsPoisonedBeforeEveryBlock) {
  zdp_emu::set_schedule(zdp_emu::Schedule::kForward);  // block 0 first, whatever ran before
  std::vector<int> out(3 * 32, 7);
  zdp_emu::launch(3, 32, 0, nullptr, read_before_write, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  for (int t = 32; t < 96; ++t) EXPECT_EQ(out[t], -1) << t;  // 0xffffffff, not 1000 + the block before
  zdp_emu::launch(1, 32, 0, nullptr, read_before_write, out.data());
  for (int t = 0; t < 32; ++t) EXPECT_EQ(out[t], -1) << "a launch's first block is poisoned too, once registered";
  zdp_emu::set_schedule(zdp_emu::Schedule::kAlternate);
}

__global__ void record_block_order(int* order, int* next) {
  if (threadIdx.x == 0) order[(*next)++] = static_cast<int>(blockIdx.x);
}

TEST(SimtEmulator, AlternateLaunchesRunTheirBlocksInOppositeOrders) {
  std::vector<int> first(4, -1), second(4, -1);
  int n = 0;
  zdp_emu::launch(4, 32, 0, nullptr, record_block_order, first.data(), &n);
  n = 0;
  zdp_emu::launch(4, 32, 0, nullptr, record_block_order, second.data(), &n);
  std::vector<int> reversed(second.rbegin(), second.rend());
  EXPECT_EQ(first, reversed);
  EXPECT_TRUE(first == (std::vector<int>{0, 1, 2, 3}) || first == (std::vector<int>{3, 2, 1, 0}));
}

struct Counter {
  int value;
};

__global__ void bump_by_value(Counter c, int* out) {
  c.value += static_cast<int>(threadIdx.x);  // each thread's own copy of its parameters
  out[threadIdx.x] = c.value;
}

__global__ void indices(int* out) {
  const int t = static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  const int b = static_cast<int>(blockIdx.x + gridDim.x * blockIdx.y);
  out[b * 64 + t] = b * 1000 + t;
}

TEST(SimtEmulator, ParametersAreCopiedPerThreadAndIndicesCoverTheGrid) {
  std::vector<int> out(32, 0);
  zdp_emu::launch(1, 32, 0, nullptr, bump_by_value, Counter{100}, out.data());
  for (int t = 0; t < 32; ++t) EXPECT_EQ(out[t], 100 + t);

  std::vector<int> grid(6 * 64, -1);
  zdp_emu::launch(dim3(3, 2), dim3(4, 4, 4), 0, nullptr, indices, grid.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  for (int b = 0; b < 6; ++b) {
    for (int t = 0; t < 64; ++t) EXPECT_EQ(grid[b * 64 + t], b * 1000 + t);
  }
}

// A frame a little larger than a fiber's 128 KiB stack, in thread 0 only: without the
// guard page it would reach just into the stack mapped below (another fiber's) and go on.
__attribute__((noinline)) int deep_frame() {
  volatile char big[(128 + 8) << 10];
  big[0] = 1;
  big[sizeof(big) - 1] = 2;
  return big[0] + big[sizeof(big) - 1];
}

__global__ void outgrow_the_stack(int* out) { out[threadIdx.x] = threadIdx.x == 0 ? deep_frame() : 0; }

TEST(SimtEmulatorDeathTest, AKernelThatOutgrowsItsStackCrashesAtOnce) {
  // Not a quiet write into the next fiber's stack: the guard page below each stack, and
  // the target's -fstack-clash-protection (a probe every page of a large frame), make it
  // a crash.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<int> out(32, 0);
  EXPECT_DEATH(zdp_emu::launch(1, 32, 0, nullptr, outgrow_the_stack, out.data()), "");
}

__global__ void read_past_dynamic_shared(int floats, float* out) {
  const float* dynamic = static_cast<const float*>(zdp_emu::dynamic_shared());
  out[threadIdx.x] = threadIdx.x == 0 ? dynamic[floats] : 0.0f;  // one float past the launch's
}

TEST(SimtEmulatorDeathTest, UnderAsanAReadPastTheLaunchsDynamicSharedMemoryIsReported) {
#if !defined(ZDP_ADDRESS_SANITIZER)
  GTEST_SKIP() << "needs AddressSanitizer (scripts/sanitize.sh asan): the slack past a launch's dynamic shared "
                  "memory is poisoned only there";
#else
  // The emulation keeps 16 bytes of slack past the dynamic shared memory (so that such a
  // read is not a crash without ASan); ASan must still see the read.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> out(32, 0.0f);
  zdp_emu::launch(1, 32, 64 * sizeof(float), nullptr, read_past_dynamic_shared, 63, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "within the launch's 64 floats";
  EXPECT_DEATH(zdp_emu::launch(1, 32, 64 * sizeof(float), nullptr, read_past_dynamic_shared, 64, out.data()),
               "AddressSanitizer: use-after-poison");
#endif
}

__global__ void write_ones(float* out) { out[threadIdx.x] = 1.0f; }

TEST(SimtEmulatorDeathTest, UnderTsanAKernelRacingAnotherOsThreadIsReported) {
#if !defined(ZDP_SIMT_THREAD_SANITIZER)
  GTEST_SKIP() << "needs ThreadSanitizer (scripts/sanitize.sh tsan): the emulation's fibers are announced to it "
                  "only there";
#else
  // The fibers' switches synchronise the fibers of one OS thread with each other, never
  // with another OS thread: a kernel's write and another thread's unordered read of the
  // same buffer must still be a report (halt_on_error or not, TSan's exit code is 66).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::vector<float> out(32, 0.0f);
        std::thread reader([&out] {
          float sum = 0.0f;
          for (const float v : out) sum += v;
          std::printf("%g\n", static_cast<double>(sum));
        });
        zdp_emu::launch(1, 32, 0, nullptr, write_ones, out.data());
        reader.join();
        std::exit(0);
      },
      ::testing::ExitedWithCode(66), "ThreadSanitizer: data race");
#endif
}

}  // namespace
