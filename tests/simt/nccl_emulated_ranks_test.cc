// The engine on 2 forked ranks, each on an emulated GPU, with zdp's NCCL communicator over
// the emulated NCCL (testing/simt/nccl_emulation.h): the engine's multi-GPU path, its
// streams and events around NCCL's collectives, and the communicator's watchdog, which no
// lent machine has run (one GPU each; NCCL refuses two ranks on one GPU). Compared bit for
// bit with the same job on 2 CPU ranks (Gloo), as tests/gpu/gloo_gpu_ranks_test.cc compares
// Gloo over GPU buffers: with two ranks every sum has one order, and the engine's kernels
// give the CPU's bits.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>

#include "testing/engine_comparisons.h"
#include "testing/engine_runs.h"
#include "testing/fork_ranks.h"
#include "testing/simt/emulated_nccl_communicator.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

using testing::EngineRun;
using testing::EngineRunResult;

class NcclEmulatedRanks : public ::testing::Test {
 protected:
  void SetUp() override { testing::set_emulated_nccl_directory(folder_.path()); }
  void TearDown() override { testing::set_emulated_nccl_directory(""); }

  static EngineRun nccl_run(int stage) {
    EngineRun r;
    r.options = testing::comparison_options(stage);
    r.comm_factory = create_nccl_communicator_emu;
    return r;
  }

  testing::TempDir folder_;
};

TEST_F(NcclEmulatedRanks, TwoRanksMatchTwoCpuRanksAtEveryStage) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      EngineRun r = nccl_run(stage);
      r.options.compute_dtype = dt;
      r.steps = 6;
      testing::expect_gpu_ranks_match_cpu_ranks(r, "NCCL, stage " + std::to_string(stage) + ", " + to_string(dt));
    }
  }
}

// Sharded accumulation, gathers overlapped with the next forward, statistics read every
// third step (the host runs ahead), an fp16 overflow on one rank (the flag all-reduced on
// the device), and compression across "nodes", whose all-to-all is NCCL's grouped send and
// receive.
TEST_F(NcclEmulatedRanks, AccumulationOverlapOverflowAndAllToAllMatchTwoCpuRanks) {
  EngineRun sharded = nccl_run(3);
  sharded.options.accum_steps = 2;
  sharded.options.zero.accumulate = GradAccumulation::kSharded;
  sharded.steps = 6;
  testing::expect_gpu_ranks_match_cpu_ranks(sharded, "NCCL, stage 3, sharded accumulation");
  EngineRun overlap = nccl_run(2);
  overlap.options.overlap_param_gather = true;
  overlap.stats_every = 3;
  overlap.steps = 6;
  testing::expect_gpu_ranks_match_cpu_ranks(overlap, "NCCL, stage 2, overlap_param_gather, statistics every 3rd step");
  EngineRun overflow = nccl_run(3);
  overflow.options.compute_dtype = DType::kF16;
  overflow.steps = 6;
  overflow.poison_rank = 1;
  overflow.poison_step = 3;
  EngineRunResult gpu;
  testing::expect_gpu_ranks_match_cpu_ranks(overflow, "NCCL, stage 3, fp16, infinity on rank 1 at step 3", &gpu);
  if (HasFatalFailure()) return;
  for (size_t rank = 0; rank < gpu.stats_by_rank.size(); ++rank) {
    EXPECT_TRUE(gpu.stats_by_rank[rank].at(3).skipped) << "rank " << rank << " did not skip the overflowed step";
  }
  EngineRun inter = nccl_run(2);
  inter.options.zero.reduce_quant = WireQuant::kInt8;
  inter.options.zero.compress = CompressScope::kInterNode;
  inter.steps = 4;
  testing::expect_gpu_ranks_match_cpu_ranks(inter, "NCCL, stage 2, int8 across 2 nodes of 1 rank");
}

// Checkpoints through NCCL: the engine's agreements between ranks (that every rank wrote
// its files, the hashes) go through device buffers, since NCCL refuses host memory
// (engine/src/host_collective.h), a path Gloo never takes. Saved at step 3 by two NCCL
// ranks at stage 3, resumed by two NCCL ranks at stage 1, the job ends with the masters of
// the uninterrupted run on NCCL ranks and on CPU ranks, bit for bit (K = 2 both times).
TEST_F(NcclEmulatedRanks, ACheckpointSavedAndResumedOnNcclRanksContinuesBitForBit) {
  testing::TempDir dir;
  EngineRun first = nccl_run(3);
  first.world = 2;
  first.cuda = true;
  first.steps = 6;
  first.save_root = dir.path();
  first.save_steps = {3};
  const EngineRunResult full = testing::run_engine(first);
  ASSERT_EQ(full.failures, "");
  EngineRun on_cpu = first;
  on_cpu.cuda = false;
  on_cpu.comm_factory = nullptr;
  on_cpu.save_steps.clear();
  const EngineRunResult cpu = testing::run_engine(on_cpu);
  ASSERT_EQ(cpu.failures, "");
  EngineRun resume = nccl_run(1);
  resume.world = 2;
  resume.cuda = true;
  resume.steps = 6;
  resume.load_from = dir.path();
  const EngineRunResult resumed = testing::run_engine(resume);
  ASSERT_EQ(resumed.failures, "");
  ASSERT_EQ(resumed.stats.size(), 3u);
  EXPECT_EQ(testing::max_difference(resumed, full).value, 0.0) << testing::max_difference(resumed, full).where;
  EXPECT_EQ(testing::max_difference(full, cpu).value, 0.0) << testing::max_difference(full, cpu).where;
}

// Two NCCL ranks of which rank 1 exits at the start of step 2: rank 0's error (its
// Status's to_string()), and how long the job took, in `seconds`.
std::string status_after_peer_dies(const std::string& folder, std::chrono::seconds timeout, double* seconds) {
  EngineRun r;
  r.options = testing::comparison_options(2);
  r.comm_factory = create_nccl_communicator_emu;
  r.steps = 6;
  r.exit_rank = 1;
  r.exit_step = 2;
  const std::string report = folder + "/rank0-status";
  const auto start = std::chrono::steady_clock::now();
  const auto results = testing::fork_ranks(2, [&](int rank, int world, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, world, store, 1, {}, /*cuda=*/true,
                                                                 r.comm_factory, timeout));
    EngineRunResult result;
    const Status s = testing::train_on(ctx, r, result);
    if (rank == 0) {
      std::FILE* f = std::fopen(report.c_str(), "w");
      if (f != nullptr) {
        std::fputs(s.to_string().c_str(), f);
        std::fclose(f);
      }
    }
    return s;
  });
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(results.size(), 2u);
  if (!results.empty()) EXPECT_FALSE(results[0].ok()) << "rank 0 finished a job its peer died in";
  std::ifstream in(report);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A rank that dies mid-run, where NCCL never notices (NVLink, shared memory: it spins):
// the other's collective is failed by the communicator's watchdog after its timeout,
// naming the collective, and the rank returns that error instead of hanging.
TEST_F(NcclEmulatedRanks, APeerThatDiesFailsTheOtherRankWithinTheTimeout) {
  double seconds = 0;
  const std::string status = status_after_peer_dies(folder_.path(), std::chrono::seconds(3), &seconds);
  EXPECT_LT(seconds, 60.0);
  for (const char* part : {"Timeout", "rank 0: nccl", "timed out after 3 s", "a peer may have died"}) {
    EXPECT_NE(status.find(part), std::string::npos) << "rank 0's error lacks '" << part << "': " << status;
  }
}

// Where NCCL notices the dead peer (its network transports see the connection close):
// ncclRemoteError, from ncclCommGetAsyncError in the watchdog or from the call being
// enqueued, fails the rank at once as the peer's failure, naming it, long before the 60 s
// timeout. The collective the error names is the one rank 0 waits in (the emulated NCCL's
// error says which), not an earlier one whose completion the watchdog had yet to see.
TEST_F(NcclEmulatedRanks, APeerThatDiesIsThePeersFailureWhereNcclNoticesIt) {
  testing::set_emulated_nccl_peer_death(testing::EmulatedPeerDeath::kRemoteError);
  double seconds = 0;
  const std::string status = status_after_peer_dies(folder_.path(), std::chrono::seconds(60), &seconds);
  testing::set_emulated_nccl_peer_death(testing::EmulatedPeerDeath::kSpin);
  EXPECT_LT(seconds, 30.0) << status;
  // The engine issues ahead of its waits, so rank 0 may meet a later collective, refused
  // by the failed communicator, before it waits for the one that failed: its error then
  // wraps the first failure, which must be the peer's, whole (1 run in 10 under TSan).
  const std::string earlier = "failed earlier: ";
  const size_t wrapped = status.rfind(earlier);
  const std::string first = wrapped == std::string::npos ? status : status.substr(wrapped + earlier.size());
  EXPECT_EQ(first.rfind("PeerFailure: ", 0), 0u) << "rank 0's first failure is not the peer's: " << status;
  for (const char* part : {"remote process exited", "rank 1 (process"}) {
    EXPECT_NE(first.find(part), std::string::npos) << "rank 0's first failure lacks '" << part << "': " << status;
  }
  const std::string named = "rank 0: nccl ";
  const size_t at = first.find(named);
  ASSERT_NE(at, std::string::npos) << status;
  const std::string op = first.substr(at + named.size(), first.find(' ', at + named.size()) - at - named.size());
  const std::map<std::string, std::string> nccl_call = {{"all_reduce", "ncclAllReduce"},
                                                        {"barrier", "ncclAllReduce"},
                                                        {"reduce_scatter", "ncclReduceScatter"},
                                                        {"all_gather", "ncclAllGather"},
                                                        {"broadcast", "ncclBroadcast"}};
  ASSERT_EQ(nccl_call.count(op), 1u) << "no collective named: " << status;
  EXPECT_NE(first.find("exited before " + nccl_call.at(op)), std::string::npos)
      << "the error names " << op << ", rank 0 waits in another collective: " << status;
}

}  // namespace
}  // namespace zdp
