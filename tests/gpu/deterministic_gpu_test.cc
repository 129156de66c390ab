// Deterministic mode on a GPU (train.deterministic): dp-train's loop (train()) on a
// 2-block gpt, every rank on CUDA device 0 (Gloo over CUDA buffers: NCCL refuses two
// ranks on one GPU), in fp32, bf16 and fp16 (its loss scale in the optimizer state). K = 1
// at stage 0 and K = 2 at stages 1-3 (sharded accumulation at stage 3) must leave the same
// bytes of model.safetensors and optimizer.safetensors, the same parameter SHA-256 and
// the same per-step losses: the micro-batches' gradients come from pinned cuBLASLt
// algorithms and the engine's ordered reduction, whatever K and the stage. (The CPU: dp_train_deterministic_test.)
//
// This binary holds only forking tests: the parent must never initialise CUDA (its
// children could not use it), so the GPU is probed in a child (testing/test_cuda_device.h,
// testing/gpu_probe.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "testing/engine_runs.h"
#include "testing/fork_ranks.h"
#include "testing/temp_dir.h"
#include "testing/test_cuda_device.h"
#include "trainer/loop/train_loop.h"
#if defined(ZDP_SIMT_NCCL)
#include "testing/simt/emulated_nccl_communicator.h"
#endif

namespace zdp::trainer {
namespace {

struct Outcome {
  std::string model, optimizer;  // the bytes of the last checkpoint's files
  std::string printed;           // rank 0's parameter hash, then every loss as %a (exact)
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// On a GPU, 6 steps of 8 micro-batches; on the SIMT emulation (each thread a fiber: these
// runs were a quarter of CI's test time), 6 steps of 4, which still accumulate at K = 1
// and 2. Not fewer steps: until about the fifth, the rounding differences of an unordered
// reduction vanish below the parameters' last bit, and the control below (without the
// mode, K = 1 and 2 differ) failed at 4 steps.
#if defined(ZDP_SIMT_EMULATION)
constexpr int64_t kSteps = 6, kGlobalBatch = 8;
#else
constexpr int64_t kSteps = 6, kGlobalBatch = 16;
#endif

Config gpt(DType dtype, int stage) {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = 2;
  c.model.d_model = 64;
  c.model.n_heads = 4;
  c.model.vocab_size = 64;
  c.model.seq_len = 32;
  c.model.dtype = dtype;
  c.data.kind = DataKind::kSynthetic;
  c.train.global_batch = kGlobalBatch;
  c.train.micro_batch = 2;  // 8 (4) micro-batches: accum_steps 8 (4) at K = 1, 4 (2) at K = 2
  c.train.steps = kSteps;
  c.train.log_every = 1000;
  c.train.eval_samples = 8;
  c.train.deterministic = true;
  c.optim.grad_clip = 0.5;  // the norm's bits reach the parameters
  c.zero.stage = stage;
  c.zero.bucket_mb = 0.02;  // several buckets, cut differently at K = 1 and 2
  return c;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The job on `world` ranks, its checkpoints under `dir`/ckpt (saved after the last step);
// their communicator `comm_factory`'s (null: Gloo over the GPU's buffers).
Outcome run_in(const Config& base, int world, const std::string& dir, const testing::CommFactory& comm_factory = nullptr) {
  Config config = base;
  config.checkpoint.dir = dir + "/ckpt";
  const std::string printed = dir + "/printed";
  auto results = testing::fork_ranks(world, [&](int rank, int k, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, k, store, 1, config, /*cuda=*/true, comm_factory));
    std::FILE* quiet = std::fopen("/dev/null", "w");
    StatusOr<TrainSummary> s = train(ctx, config, {quiet});
    std::fclose(quiet);
    if (!s.ok()) return s.status();
    if (rank == 0) {
      std::FILE* f = std::fopen(printed.c_str(), "w");
      if (f == nullptr) return Status(StatusCode::kIoError, "cannot write " + printed);
      std::fprintf(f, "%s\n", s->param_sha256.c_str());
      for (double l : s->losses) std::fprintf(f, "%a\n", l);
      std::fclose(f);
    }
    return Status::Ok();
  });
  EXPECT_EQ(testing::describe_failures(results), "");
  const std::string step = config.checkpoint.dir + "/step-" + std::to_string(config.train.steps);
  Outcome o{read_bytes(step + "/model.safetensors"), read_bytes(step + "/optimizer.safetensors"), read_bytes(printed)};
  EXPECT_FALSE(o.model.empty()) << "no checkpoint at " << step;
  EXPECT_GT(o.printed.size(), 65u) << "no parameter hash or losses";
  return o;
}

Outcome run(const Config& base, int world) {
  testing::TempDir dir;
  return run_in(base, world, dir.path());
}

class DeterministicGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::test_cuda_device_without_init()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(DeterministicGpu, GptIsBitIdenticalAtOneAndTwoRanksAndEveryStage) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const Outcome ref = run(gpt(dtype, 0), 1);
    for (int stage = 1; stage <= 3; ++stage) {
      Config c = gpt(dtype, stage);
      if (stage == 3) c.zero.accumulate = GradAccumulation::kSharded;
      const Outcome two = run(c, 2);
      const std::string what = std::string(to_string(dtype)) + ", 2 ranks, stage " + std::to_string(stage);
      EXPECT_TRUE(two.model == ref.model) << what << ": model.safetensors differs";
      EXPECT_TRUE(two.optimizer == ref.optimizer) << what << ": optimizer.safetensors differs";
      EXPECT_EQ(two.printed, ref.printed) << what << ": the parameter hash or the losses differ";
    }
  }
}

#if defined(ZDP_SIMT_NCCL)
// dp-train's loop on two ranks with zdp's NCCL communicator, which no lent machine could run
// (one GPU each), here on the SIMT emulation's NCCL (testing/simt/nccl_emulation.h): the
// GPT in bf16 at stage 3 with sharded accumulation leaves one rank's bytes, as over Gloo.
TEST_F(DeterministicGpu, TheGptOnTwoNcclRanksLeavesTheBytesOfOneRank) {
  const Outcome ref = run(gpt(DType::kBF16, 0), 1);
  testing::TempDir dir, exchanges;
  testing::set_emulated_nccl_directory(exchanges.path());
  Config c = gpt(DType::kBF16, 3);
  c.zero.accumulate = GradAccumulation::kSharded;
  const Outcome nccl = run_in(c, 2, dir.path(), create_nccl_communicator_emu);
  testing::set_emulated_nccl_directory("");
  EXPECT_TRUE(nccl.model == ref.model) << "bf16, 2 NCCL ranks, stage 3: model.safetensors differs";
  EXPECT_TRUE(nccl.optimizer == ref.optimizer) << "bf16, 2 NCCL ranks, stage 3: optimizer.safetensors differs";
  EXPECT_EQ(nccl.printed, ref.printed) << "bf16, 2 NCCL ranks, stage 3: the parameter hash or the losses differ";
}
#endif

// A bf16 reduce dtype with sharded accumulation: the step's ordered sum is rounded into
// bf16 before it is widened into the fp32 shard (on the comm stream, through the gather
// buffer), as one rank's run rounds it; it was left in fp32 and the bytes differed.
TEST_F(DeterministicGpu, Bf16ReductionWithShardedAccumulationLeavesOneRanksBytes) {
  Config one = gpt(DType::kBF16, 0);
  one.zero.reduce_dtype = DType::kBF16;
  const Outcome ref = run(one, 1);
  Config c = gpt(DType::kBF16, 2);
  c.zero.reduce_dtype = DType::kBF16;
  c.zero.accumulate = GradAccumulation::kSharded;
  const Outcome two = run(c, 2);
  EXPECT_TRUE(two.model == ref.model) << "bf16 reduce, sharded, 2 ranks: model.safetensors differs";
  EXPECT_TRUE(two.optimizer == ref.optimizer) << "bf16 reduce, sharded, 2 ranks: optimizer.safetensors differs";
  EXPECT_EQ(two.printed, ref.printed) << "bf16 reduce, sharded, 2 ranks: the parameter hash or the losses differ";
}

// Checkpoints on GPU ranks: saved from the device mid-run by one rank at stage 0, loaded
// by two at stage 3 (sharded accumulation), the resumed run ends with the bytes of the
// uninterrupted one (deterministic mode: the same bits at any K and stage).
TEST_F(DeterministicGpu, AResumedRunOnOtherRanksAndStageEndsWithTheUninterruptedBytes) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    testing::TempDir full_dir;
    Config full = gpt(dtype, 0);
    full.checkpoint.every_steps = kSteps / 2;
    const Outcome ref = run_in(full, 1, full_dir.path());
    Config resumed = gpt(dtype, 3);
    resumed.zero.accumulate = GradAccumulation::kSharded;
    resumed.checkpoint.resume = ResumeMode::kPath;
    resumed.checkpoint.resume_path = full_dir.path() + "/ckpt/step-" + std::to_string(kSteps / 2);
    const Outcome two = run(resumed, 2);
    const std::string what =
        std::string(to_string(dtype)) + ", resumed at step " + std::to_string(kSteps / 2) + " on 2 ranks, stage 3";
    EXPECT_TRUE(two.model == ref.model) << what << ": model.safetensors differs";
    EXPECT_TRUE(two.optimizer == ref.optimizer) << what << ": optimizer.safetensors differs";
    // The parameter hash, then the losses: the resumed run trained the second half only (a
    // run that ignored the checkpoint would train every step and end with the same bytes too).
    const std::vector<std::string> want = lines(ref.printed), got = lines(two.printed);
    ASSERT_EQ(want.size(), static_cast<size_t>(kSteps + 1)) << "the hash and a loss per step";
    std::vector<std::string> second_half = {want[0]};
    second_half.insert(second_half.end(), want.begin() + kSteps / 2 + 1, want.end());
    EXPECT_EQ(got, second_half) << what;
  }
}

// The control: without the mode K = 1 and K = 2 differ, so the comparison above can fail.
TEST_F(DeterministicGpu, WithoutTheModeOneAndTwoRanksDiffer) {
  Config c = gpt(DType::kF32, 2);
  c.train.deterministic = false;
  const Outcome one = run(c, 1), two = run(c, 2);
  EXPECT_FALSE(one.model == two.model);
}

}  // namespace
}  // namespace zdp::trainer
