// The emulated NCCL itself (testing/simt/nccl_emulation.h), called as zdp's communicator
// calls NCCL: NCCL's argument checks, the nonblocking initialisation, a collective that
// finishes only when every rank has reached it (and, aborted, without them), the stream's
// later work waiting for it, a rank calling with another count, the reductions' rounding
// and grouped send/recv. The ranks are
// communicators of one thread: queued collectives only run when a stream is waited for.
#include "testing/simt/nccl_emulation.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "testing/simt/emulated_gpu_device.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

using std::chrono::milliseconds;

class NcclEmulation : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_folder_ = testing::emulated_nccl_directory();  // the binary's (nccl_emulated_comm_test.cc)
    testing::set_emulated_nccl_directory(folder_.path());
    device_ = testing::create_emulated_gpu_device(0);
  }
  void TearDown() override {
    for (ncclComm_t c : comms_) (void)ncclCommAbort(c);
    streams_.clear();
    testing::set_emulated_nccl_directory(previous_folder_);
  }

  // `world` communicators of one world, initialised nonblocking and then settled.
  std::vector<ncclComm_t> world(int n) {
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    std::vector<ncclComm_t> comms(static_cast<size_t>(n), nullptr);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(ncclCommInitRankConfig(&comms[static_cast<size_t>(r)], n, id, r, &config), ncclInProgress);
    }
    for (ncclComm_t c : comms) {
      ncclResult_t state = ncclInProgress;
      EXPECT_EQ(ncclCommGetAsyncError(c, &state), ncclSuccess);
      EXPECT_EQ(state, ncclSuccess);
      comms_.push_back(c);
    }
    return comms;
  }
  cudaStream_t stream() {
    streams_.push_back(device_->create_stream("s" + std::to_string(streams_.size())).value());
    return static_cast<cudaStream_t>(streams_.back()->native_handle());
  }
  Stream& zdp_stream(size_t i) { return *streams_.at(i); }
  void* device_floats(const std::vector<float>& values) {
    buffers_.push_back(device_->allocate(static_cast<int64_t>(values.size() * 4), MemCategory::kOther).value());
    std::memcpy(buffers_.back().data(), values.data(), values.size() * 4);
    return buffers_.back().data();
  }
  static std::vector<float> floats(const void* p, size_t n) {
    std::vector<float> v(n);
    std::memcpy(v.data(), p, n * 4);
    return v;
  }

  testing::TempDir folder_;
  std::string previous_folder_;
  std::unique_ptr<Device> device_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<ncclComm_t> comms_;
};

TEST_F(NcclEmulation, ArgumentsAreCheckedAsNcclDoes) {
  ncclComm_t c = world(1)[0];
  cudaStream_t s = stream();
  void* buf = device_floats({1, 2, 3, 4});
  std::vector<float> host(4);
  auto refused = [](ncclResult_t r, const char* text) {
    EXPECT_EQ(r, ncclInvalidArgument) << text;
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find(text), std::string::npos) << ncclGetLastError(nullptr);
  };
  refused(ncclAllReduce(host.data(), buf, 4, ncclFloat32, ncclSum, c, s), "sendbuff is not 16 bytes of device memory");
  refused(ncclAllReduce(buf, buf, 5, ncclFloat32, ncclSum, c, s), "sendbuff is not 20 bytes");  // past its end
  refused(ncclAllReduce(buf, buf, 4, ncclUint8, ncclSum, c, s), "data type");
  refused(ncclAllReduce(buf, buf, 2, ncclInt64, ncclAvg, c, s), "ncclAvg on an integer type");
  refused(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclProd, c, s), "reduction op");
  refused(ncclBroadcast(buf, buf, 4, ncclFloat32, 1, c, s), "root 1 is not a rank");
  refused(ncclSend(buf, 4, ncclFloat32, 1, c, s), "peer 1 is not a rank");
  refused(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, nullptr, s), "comm is NULL");
  // Nothing was queued by the refusals: a valid call still runs alone.
  ASSERT_EQ(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, c, s), ncclInProgress);
  ASSERT_TRUE(zdp_stream(0).synchronize(milliseconds(5000)).ok());
  EXPECT_EQ(floats(buf, 4), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(NcclEmulation, InitialisationIsInProgressUntilEveryRankOfTheSameWorldHasCome) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t first = nullptr, second = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&first, 2, id, 0, &config), ncclInProgress);
  comms_.push_back(first);
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(first, &state), ncclSuccess);
  EXPECT_EQ(state, ncclInProgress);
  void* buf = device_floats({1});
  EXPECT_EQ(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, first, stream()), ncclInvalidUsage)
      << "a collective before the communicator is ready";
  ASSERT_EQ(ncclCommInitRankConfig(&second, 2, id, 1, &config), ncclInProgress);
  comms_.push_back(second);
  ASSERT_EQ(ncclCommGetAsyncError(first, &state), ncclSuccess);
  EXPECT_EQ(state, ncclSuccess);

  // A rank that joins with another world size fails the others' initialisation.
  ncclUniqueId other;
  ASSERT_EQ(ncclGetUniqueId(&other), ncclSuccess);
  ncclComm_t a = nullptr, b = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&a, 2, other, 0, &config), ncclInProgress);
  ASSERT_EQ(ncclCommInitRankConfig(&b, 3, other, 1, &config), ncclInProgress);
  comms_.push_back(a);
  comms_.push_back(b);
  ASSERT_EQ(ncclCommGetAsyncError(a, &state), ncclSuccess);
  EXPECT_EQ(state, ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(a)).find("rank 1 initialised a world of 3"), std::string::npos)
      << ncclGetLastError(a);
}

// Rank 0's all-reduce waits for rank 1's, and so does the work queued after it on its
// stream; a stream's wait times out rather than hang; once rank 1 has come, both finish.
TEST_F(NcclEmulation, ACollectiveFinishesOnlyWhenEveryRankHasReachedIt) {
  std::vector<ncclComm_t> c = world(2);
  cudaStream_t s0 = stream(), s1 = stream();
  void* x0 = device_floats({1, 2, 3});
  void* x1 = device_floats({10, 20, 30});
  void* later = device_floats({7});
  ASSERT_EQ(ncclAllReduce(x0, x0, 3, ncclFloat32, ncclSum, c[0], s0), ncclInProgress);
  ASSERT_TRUE(zdp_stream(0).memset_async(later, 0, 4).ok());
  cudaEvent_t done = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done, s0), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  const Status waited = zdp_stream(0).synchronize(milliseconds(50));
  EXPECT_EQ(waited.code(), StatusCode::kTimeout) << waited.to_string();
  EXPECT_EQ(floats(later, 1)[0], 7.0f) << "the stream's later work ran before the collective finished";
  ASSERT_EQ(ncclAllReduce(x1, x1, 3, ncclFloat32, ncclSum, c[1], s1), ncclInProgress);
  ASSERT_TRUE(zdp_stream(1).synchronize(milliseconds(5000)).ok());
  ASSERT_TRUE(zdp_stream(0).synchronize(milliseconds(5000)).ok());
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(done), cudaSuccess);
  EXPECT_EQ(floats(x0, 3), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(floats(x1, 3), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(floats(later, 1)[0], 0.0f);
}

TEST_F(NcclEmulation, ARankCallingWithAnotherCountFailsTheStreamNamingIt) {
  std::vector<ncclComm_t> c = world(2);
  cudaStream_t s0 = stream(), s1 = stream();
  void* x0 = device_floats({1, 2, 3, 4});
  void* x1 = device_floats({1, 2, 3, 4, 5});
  ASSERT_EQ(ncclAllReduce(x0, x0, 4, ncclFloat32, ncclSum, c[0], s0), ncclInProgress);
  ASSERT_EQ(ncclAllReduce(x1, x1, 5, ncclFloat32, ncclSum, c[1], s1), ncclInProgress);
  const Status s = zdp_stream(0).synchronize(milliseconds(5000));
  EXPECT_EQ(s.code(), StatusCode::kCudaError) << s.to_string();
  EXPECT_NE(s.message().find("ncclAllReduce (collective #0 of rank 0): rank 1 gave 20 bytes, this rank expects 16"),
            std::string::npos)
      << s.to_string();
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(c[0], &state), ncclSuccess);
  EXPECT_NE(state, ncclSuccess) << "the failure is also the communicator's asynchronous error";
}

// An aborted communicator's queued collective ends without its peer and moves nothing, as
// NCCL's kernels exit on an abort; its stream's later work then runs.
TEST_F(NcclEmulation, AbortLetsAnUnfinishedCollectiveEnd) {
  std::vector<ncclComm_t> c = world(2);
  cudaStream_t s0 = stream();
  void* x0 = device_floats({1, 2});
  ASSERT_EQ(ncclAllReduce(x0, x0, 2, ncclFloat32, ncclSum, c[0], s0), ncclInProgress);
  EXPECT_EQ(zdp_stream(0).synchronize(milliseconds(50)).code(), StatusCode::kTimeout);
  ASSERT_EQ(ncclCommAbort(c[0]), ncclSuccess);
  comms_.erase(comms_.begin());
  EXPECT_TRUE(zdp_stream(0).synchronize(milliseconds(5000)).ok());
  EXPECT_EQ(floats(x0, 2), (std::vector<float>{1, 2}));
}

// Reductions in rank order, each partial result rounded to the type (NCCL's ring stores
// every hop's sum): in bf16, 1 + 2^-8 + 2^-8 is 1 (each 1 + 2^-8 ties to the even 1), where
// one rounding of the fp32 sum would give 1 + 2^-7. Grouped send/recv moves each chunk.
TEST_F(NcclEmulation, ReductionsRoundEachPartialResultAndGroupsMoveEachChunk) {
  std::vector<ncclComm_t> c = world(3);
  std::vector<cudaStream_t> s = {stream(), stream(), stream()};
  const float in[3] = {1.0f, 1.0f / 256, 1.0f / 256};
  std::vector<void*> x;
  for (int r = 0; r < 3; ++r) {
    buffers_.push_back(device_->allocate(2, MemCategory::kOther).value());
    const uint16_t h = kernels::f32_to_bf16(in[r]);
    std::memcpy(buffers_.back().data(), &h, 2);
    x.push_back(buffers_.back().data());
    ASSERT_EQ(ncclAllReduce(x[r], x[r], 1, ncclBfloat16, ncclSum, c[r], s[r]), ncclInProgress);
  }
  // Then each rank sends its rank number to the next and receives from the previous.
  std::vector<void*> send, recv;
  for (int r = 0; r < 3; ++r) {
    send.push_back(device_floats({static_cast<float>(r)}));
    recv.push_back(device_floats({-1}));
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(send[r], 1, ncclFloat32, (r + 1) % 3, c[r], s[r]), ncclSuccess);
    ASSERT_EQ(ncclRecv(recv[r], 1, ncclFloat32, (r + 2) % 3, c[r], s[r]), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclInProgress);
  }
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(zdp_stream(i).synchronize(milliseconds(5000)).ok());
  for (int r = 0; r < 3; ++r) {
    uint16_t h = 0;
    std::memcpy(&h, x[r], 2);
    EXPECT_EQ(kernels::bf16_to_f32(h), 1.0f) << "rank " << r;
    EXPECT_EQ(floats(recv[r], 1)[0], static_cast<float>((r + 2) % 3)) << "rank " << r;
  }
}

}  // namespace
}  // namespace zdp
