// Several ranks on one GPU: NCCL refuses two ranks on one device, so 2 forked ranks both
// on CUDA device 0 run the engine with the Gloo communicator over CUDA buffers (staged
// through pinned memory). The only way one GPU exercises sharding with K = 2 (slices,
// staging slots, stage-3 gathers), the communication stream and its events between ranks.
// Compared with the same job on 2 CPU ranks: Gloo reduces on the host in both, and every
// engine kernel gives the CPU's bits, so the masters must be equal bit for bit.
//
// This binary holds only forking tests: the parent must never initialise CUDA (its
// children could not use it), so the GPU is probed in a child (testing/test_cuda_device.h,
// testing/gpu_probe.h).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "testing/engine_comparisons.h"
#include "testing/engine_runs.h"
#include "testing/fork_ranks.h"
#include "testing/test_cuda_device.h"
#include "zdp/comm.h"
#include "zdp/device.h"

namespace zdp {
namespace {

using testing::EngineRun;
using testing::EngineRunResult;

class GlooGpuRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::test_cuda_device_without_init()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(GlooGpuRanks, TwoRanksOnGpu0MatchTwoCpuRanksAtEveryStage) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      EngineRun r;
      r.options = testing::comparison_options(stage);
      r.options.compute_dtype = dt;
      r.steps = 10;
      testing::expect_gpu_ranks_match_cpu_ranks(r, "stage " + std::to_string(stage) + ", " + to_string(dt));
    }
  }
}

TEST_F(GlooGpuRanks, ShardedAccumulationAndOverlappedGathers) {
  EngineRun sharded;
  sharded.options = testing::comparison_options(3);
  sharded.options.accum_steps = 2;
  sharded.options.zero.accumulate = GradAccumulation::kSharded;
  sharded.steps = 8;
  testing::expect_gpu_ranks_match_cpu_ranks(sharded, "stage 3, sharded accumulation");
  EngineRun overlap;
  overlap.options = testing::comparison_options(2);
  overlap.options.overlap_param_gather = true;
  overlap.stats_every = 3;  // the host runs ahead of the GPU between reads
  overlap.steps = 8;
  testing::expect_gpu_ranks_match_cpu_ranks(overlap, "stage 2, overlap_param_gather, statistics every 3rd step");
}

// fp16 on two GPU ranks: an infinite gradient on rank 1 alone skips the step on both (the
// overflow flag is all-reduced on the device) and halves both ranks' loss scale, as on
// two CPU ranks, bit for bit; at a stage that shards the optimizer and one that shards
// the parameters too.
TEST_F(GlooGpuRanks, AnFp16OverflowOnOneRankSkipsTheStepOnBoth) {
  for (int stage : {1, 3}) {
    EngineRun r;
    r.options = testing::comparison_options(stage);
    r.options.compute_dtype = DType::kF16;
    r.steps = 8;
    r.poison_rank = 1;
    r.poison_step = 4;
    r.poison = INFINITY;
    const std::string what = "stage " + std::to_string(stage) + ", fp16, infinity on rank 1 at step 4";
    EngineRunResult gpu;
    testing::expect_gpu_ranks_match_cpu_ranks(r, what, &gpu);
    if (HasFatalFailure()) return;
    for (size_t rank = 0; rank < gpu.stats_by_rank.size(); ++rank) {
      const std::vector<StepStats>& st = gpu.stats_by_rank[rank];
      ASSERT_EQ(st.size(), 8u) << what;
      EXPECT_TRUE(st[4].skipped) << what << ": rank " << rank << " did not skip";
      EXPECT_FALSE(st[3].skipped) << what << ": rank " << rank;
      EXPECT_EQ(st[4].loss_scale, st[3].loss_scale / 2) << what << ": rank " << rank << "'s scale did not halve";
    }
  }
}

// Compressed communication on GPU ranks: the gradient exchanged block-quantized (int8 with
// error feedback, int4 without) and the parameters gathered in int8, the quantize and
// dequantize kernels on the communication stream between Gloo's staging copies; also only
// across "nodes" (zero.compress = "inter-node": 2 ranks as 2 nodes of 1, and as 1 node of
// 2, where nothing is quantized). The kernels give the CPU's bits (quantize_gpu_test), so
// every run must equal the same job on 2 CPU ranks bit for bit.
TEST_F(GlooGpuRanks, QuantizedExchangesMatchTwoCpuRanks) {
  for (int stage = 1; stage <= 3; ++stage) {
    EngineRun r;
    r.options = testing::comparison_options(stage);
    r.options.zero.reduce_quant = WireQuant::kInt8;
    r.options.zero.gather_quant = WireQuant::kInt8;
    r.steps = 6;
    testing::expect_gpu_ranks_match_cpu_ranks(r, "stage " + std::to_string(stage) + ", int8 gradients and gathers");
  }
  EngineRun int4;
  int4.options = testing::comparison_options(2);
  int4.options.zero.reduce_quant = WireQuant::kInt4;
  int4.options.zero.error_feedback = false;
  int4.options.accum_steps = 2;
  int4.options.zero.accumulate = GradAccumulation::kSharded;
  int4.steps = 6;
  testing::expect_gpu_ranks_match_cpu_ranks(int4, "stage 2, int4 gradients without error feedback, sharded accumulation");
  for (int local_world : {1, 2}) {
    EngineRun inter;
    inter.options = testing::comparison_options(2);
    inter.options.zero.reduce_quant = WireQuant::kInt8;
    inter.options.zero.compress = CompressScope::kInterNode;
    inter.local_world = local_world;
    inter.steps = 6;
    testing::expect_gpu_ranks_match_cpu_ranks(inter, "stage 2, int8 across nodes, " + std::to_string(local_world) + " rank(s) a node");
  }
}

// Collectives issued on two streams run in issue order on every rank, whichever stream
// reaches its collective first. Each rank holds up a different stream with a host task,
// so rank 0's second collective is ready first and rank 1's first one is. Run where each
// stream's host tasks can start them (CUDA may run all streams' callbacks on one thread),
// each rank would block in a collective its peer has not started: a timeout, as the
// engine's stage-3 gathers and evaluation's gather on the trainer's stream once did.
TEST_F(GlooGpuRanks, CollectivesOnTwoStreamsRunInIssueOrder) {
  auto results = testing::fork_ranks(2, [](int rank, int k, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, testing::test_cuda_device());
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> first, device->create_stream("first"));
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> second, device->create_stream("second"));
    CommOptions options;
    options.timeout = std::chrono::seconds(20);
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, create_gloo_communicator(store, rank, k, *device, options));
    constexpr int64_t kCount = 1000;
    const size_t bytes = kCount * sizeof(float);
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer a, device->allocate(static_cast<int64_t>(bytes), MemCategory::kOther));
    ZDP_ASSIGN_OR_RETURN(DeviceBuffer b, device->allocate(static_cast<int64_t>(bytes), MemCategory::kOther));
    const std::vector<float> mine_a(kCount, static_cast<float>(rank + 1)), mine_b(kCount, 10.0f * (rank + 1));
    ZDP_RETURN_IF_ERROR(device->memcpy(a.data(), mine_a.data(), bytes));
    ZDP_RETURN_IF_ERROR(device->memcpy(b.data(), mine_b.data(), bytes));
    Stream& held = rank == 0 ? *first : *second;
    ZDP_RETURN_IF_ERROR(held.enqueue_host("hold", [] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return Status::Ok();
    }));
    ZDP_RETURN_IF_ERROR(comm->all_reduce(a.data(), a.data(), kCount, DType::kF32, ReduceOp::kSum, *first));
    ZDP_RETURN_IF_ERROR(comm->all_reduce(b.data(), b.data(), kCount, DType::kF32, ReduceOp::kSum, *second));
    ZDP_RETURN_IF_ERROR(first->synchronize(std::chrono::seconds(60)));
    ZDP_RETURN_IF_ERROR(second->synchronize(std::chrono::seconds(60)));
    std::vector<float> got_a(kCount), got_b(kCount);
    ZDP_RETURN_IF_ERROR(device->memcpy(got_a.data(), a.data(), bytes));
    ZDP_RETURN_IF_ERROR(device->memcpy(got_b.data(), b.data(), bytes));
    for (int64_t i = 0; i < kCount; ++i) {
      if (got_a[i] != 3.0f || got_b[i] != 30.0f) {
        return Status(StatusCode::kInternal, "rank " + std::to_string(rank) + ": element " + std::to_string(i) +
                                                 ": sums " + std::to_string(got_a[i]) + " and " +
                                                 std::to_string(got_b[i]) + ", expected 3 and 30");
      }
    }
    comm.reset();  // before the streams and the device it uses
    return Status::Ok();
  });
  EXPECT_EQ(testing::describe_failures(results), "");
}

}  // namespace
}  // namespace zdp
