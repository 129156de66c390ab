// Engine::step() on the GPU against the CPU engine, on the same model (TinyMlp, computed
// on the host from the views) and data: one rank, NCCL on CUDA device 0 vs Gloo on the
// CPU, at every stage, fp32, bf16 and fp16 compute, with local and sharded accumulation. Every
// kernel of the step (fold, cast, gradient check, the step decision, AdamW) gives the
// same bits on both devices and a world of 1 reduces by copying, so the fp32 masters
// after 12 steps and every step's statistics must be equal bit for bit. Also: no host
// wait inside step_async() on the GPU, and a host that runs ahead (statistics read every
// 4th step only) through a skipped step (a NaN written into a gradient) ends in the same
// bits as the CPU, which learns every outcome at once; and fp16's dynamic loss scale through
// an overflow (the step skipped, the scale halved, the next micro-batches scaled by the new
// value); SGD, stochastic rounding and a cosine schedule. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "testing/device_arrays.h"
#include "testing/engine_comparisons.h"
#include "testing/engine_runs.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

using namespace std::chrono_literals;
using testing::EngineRun;
using testing::EngineRunResult;

// One rank in this process: CUDA device 0 with NCCL, or the CPU with Gloo. Under the SIMT
// emulation the emulated GPU with Gloo (no NCCL there; a world of 1 reduces by copying
// either way), so that the step's kernels are the emulated ones of kernels/cuda/.
StatusOr<Context> one_rank_context(bool cuda, Store& store) {
  if (!cuda) return testing::make_test_context(0, 1, store);
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, testing::test_cuda_device());
  CommOptions options;
  options.timeout = 60s;
#if defined(ZDP_SIMT_EMULATION)
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, create_gloo_communicator(store, 0, 1, *device, options));
#else
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, create_nccl_communicator(store, 0, 1, *device, options));
#endif
  LaunchEnv env;
  env.origin = "engine_gpu_test";
  return Context::assemble(env, {}, std::make_unique<PrefixStore>("test", store), std::move(device), std::move(comm),
                           options.timeout);
}

class EngineGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ZDP_SKIP_WITHOUT_GPU();
    StatusOr<Context> gpu = one_rank_context(true, gpu_store_);
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    gpu_ = std::make_unique<Context>(std::move(*gpu));
    StatusOr<Context> cpu = one_rank_context(false, cpu_store_);
    ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
    cpu_ = std::make_unique<Context>(std::move(*cpu));
  }

  // The job on both devices; fails the test naming `what` unless equal bit for bit. The
  // GPU's results in `gpu_result` where given.
  void expect_same_bits(const EngineRun& run, const std::string& what, EngineRunResult* gpu_result = nullptr) {
    EngineRunResult on_gpu, on_cpu;
    const Status g = testing::train_on(*gpu_, run, on_gpu);
    ASSERT_TRUE(g.ok()) << what << " on the GPU: " << g.to_string();
    const Status c = testing::train_on(*cpu_, run, on_cpu);
    ASSERT_TRUE(c.ok()) << what << " on the CPU: " << c.to_string();
    ASSERT_EQ(on_gpu.masters.size(), on_cpu.masters.size()) << what;
    for (size_t p = 0; p < on_cpu.masters.size(); ++p) {
      const std::vector<float>& a = on_gpu.masters[p];
      const std::vector<float>& b = on_cpu.masters[p];
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
            << what << ": parameter #" << p << " element " << i << ": GPU " << a[i] << ", CPU " << b[i];
      }
    }
    ASSERT_EQ(on_gpu.stats.size(), on_cpu.stats.size());
    for (size_t s = 0; s < on_cpu.stats.size(); ++s) {
      const StepStats& a = on_gpu.stats[s];
      const StepStats& b = on_cpu.stats[s];
      EXPECT_EQ(a.step, b.step) << what << ", step " << s;
      EXPECT_EQ(a.skipped, b.skipped) << what << ", step " << s;
      EXPECT_EQ(std::memcmp(&a.grad_norm, &b.grad_norm, sizeof(double)), 0)
          << what << ", step " << s << ": grad norm GPU " << a.grad_norm << ", CPU " << b.grad_norm;
      EXPECT_EQ(a.lr, b.lr) << what << ", step " << s;
      EXPECT_EQ(a.loss_scale, b.loss_scale) << what << ", step " << s;
    }
    for (size_t s = 0; s < on_gpu.step_host_waits.size(); ++s) {
      EXPECT_EQ(on_gpu.step_host_waits[s], 0) << what << ": step_async() of step " << s << " waited on the host";
    }
    if (gpu_result != nullptr) *gpu_result = std::move(on_gpu);
  }

  InMemoryStore gpu_store_, cpu_store_;
  std::unique_ptr<Context> gpu_, cpu_;
};

EngineRun job(int stage, DType compute, int64_t accum, GradAccumulation how) {
  EngineRun r;
  r.options = testing::comparison_options(stage);
  r.options.compute_dtype = compute;
  r.options.accum_steps = accum;
  r.options.zero.accumulate = how;
  r.options.optim.grad_clip = 1.0;  // the clip factor travels through device memory too
  r.steps = 12;
  return r;
}

TEST_F(EngineGpu, EveryStageAndDtypeMatchesTheCpuBitForBit) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
      const std::string what = "stage " + std::to_string(stage) + ", " + to_string(dt);
      expect_same_bits(job(stage, dt, 1, GradAccumulation::kLocal), what);
    }
  }
}

TEST_F(EngineGpu, LocalAndShardedAccumulationMatchTheCpuBitForBit) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const std::string what = "stage " + std::to_string(stage) + ", " + to_string(dt);
      expect_same_bits(job(stage, dt, 2, GradAccumulation::kLocal), what + ", local accumulation");
      if (stage >= 2) expect_same_bits(job(stage, dt, 2, GradAccumulation::kSharded), what + ", sharded accumulation");
    }
  }
  EngineRun bf16_reduce = job(2, DType::kBF16, 2, GradAccumulation::kLocal);
  bf16_reduce.options.zero.reduce_dtype = DType::kBF16;
  expect_same_bits(bf16_reduce, "stage 2, bf16 compute and reduction");
}

TEST_F(EngineGpu, AHostRunningAheadThroughASkippedStepMatchesTheCpu) {
  for (int stage : {0, 1, 3}) {
    EngineRun r = job(stage, DType::kF32, 1, GradAccumulation::kLocal);
    r.stats_every = 4;
    r.poison_rank = 0;
    r.poison_step = 5;  // skipped; steps 6 and 7 are issued before the host learns it
    r.poison = NAN;
    expect_same_bits(r, "stage " + std::to_string(stage) + ", statistics every 4th step, NaN at step 5");
  }
}

// The optimizer's other paths on the GPU: SGD with momentum, bf16 parameters rounded
// stochastically (the random bits keyed by seed, step and element, so both devices round
// alike), and a warm-up then cosine schedule (the learning rate reaches the device each
// step), at a stage that shards the optimizer and one that does not, bit for bit.
TEST_F(EngineGpu, SgdStochasticRoundingAndScheduleMatchTheCpuBitForBit) {
  for (int stage : {0, 3}) {
    const std::string at = "stage " + std::to_string(stage);
    for (DType dt : {DType::kF32, DType::kBF16}) {
      EngineRun sgd = job(stage, dt, 2, GradAccumulation::kLocal);
      sgd.options.optim.name = OptimizerKind::kSgd;
      sgd.options.optim.beta1 = 0.9;
      sgd.options.optim.lr = 0.05;
      expect_same_bits(sgd, at + ", " + to_string(dt) + ", SGD with momentum");
    }
    EngineRun stochastic = job(stage, DType::kBF16, 1, GradAccumulation::kLocal);
    stochastic.options.optim.rounding = ParamRounding::kStochastic;
    EngineRunResult rounded_stochastically, rounded_to_nearest;
    expect_same_bits(stochastic, at + ", bf16 parameters rounded stochastically", &rounded_stochastically);
    expect_same_bits(job(stage, DType::kBF16, 1, GradAccumulation::kLocal), at + ", bf16", &rounded_to_nearest);
    EXPECT_NE(rounded_stochastically.masters, rounded_to_nearest.masters) << at << ": the stochastic rounding changed nothing";
    EngineRun cosine = job(stage, DType::kF32, 1, GradAccumulation::kLocal);
    cosine.options.optim.schedule = LrSchedule::kCosine;
    cosine.options.optim.warmup_steps = 3;
    cosine.options.optim.min_lr = 1e-3;
    cosine.options.total_steps = cosine.steps;
    expect_same_bits(cosine, at + ", warm-up then cosine");
  }
}

// A resume with bf16 parameters rounded stochastically: the load rounds the masters on the
// host with the key of the step that wrote them (copied out of and back to the device),
// so the run that saved at step 4 and resumed ends where the uninterrupted run ends, bit
// for bit, on the GPU as on the CPU.
TEST_F(EngineGpu, AResumeWithStochasticRoundingEndsWhereTheUninterruptedRunEnds) {
  testing::TempDir dir;
  for (Context* ctx : {gpu_.get(), cpu_.get()}) {
    const std::string at = ctx == gpu_.get() ? "GPU" : "CPU";
    EngineRun whole = job(1, DType::kBF16, 1, GradAccumulation::kLocal);
    whole.options.optim.rounding = ParamRounding::kStochastic;
    whole.steps = 8;
    EngineRunResult uninterrupted, first, resumed;
    ASSERT_TRUE(testing::train_on(*ctx, whole, uninterrupted).ok()) << at;
    EngineRun saving = whole;
    saving.steps = 4;
    saving.save_steps = {4};
    saving.save_root = dir.path() + "/" + at;
    ASSERT_TRUE(testing::train_on(*ctx, saving, first).ok()) << at;
    EngineRun resuming = whole;
    resuming.load_from = saving.save_root;
    const Status r = testing::train_on(*ctx, resuming, resumed);
    ASSERT_TRUE(r.ok()) << at << ": " << r.to_string();
    EXPECT_EQ(resumed.masters, uninterrupted.masters) << at << ": the resumed run's masters differ";
  }
}

// fp16's dynamic loss scale on the GPU: an infinite gradient skips the step and halves the
// scale on the device; the next micro-batches' gradients are scaled by the halved value
// (Engine::loss_scale() waits for the device's decision), as on the CPU, bit for bit.
TEST_F(EngineGpu, Fp16OverflowSkipsTheStepAndHalvesTheLossScaleAsOnTheCpu) {
  for (int stage : {0, 2, 3}) {
    for (int stats_every : {1, 4}) {
      EngineRun r = job(stage, DType::kF16, 2, GradAccumulation::kLocal);
      r.stats_every = stats_every;
      r.poison_rank = 0;
      r.poison_step = 5;
      r.poison = INFINITY;
      const std::string what =
          "stage " + std::to_string(stage) + ", fp16, infinity at step 5, statistics every " + std::to_string(stats_every);
      EngineRunResult gpu;
      expect_same_bits(r, what, &gpu);
      if (stats_every != 1 || HasFatalFailure()) continue;
      ASSERT_EQ(gpu.stats.size(), 12u) << what;
      EXPECT_FALSE(gpu.stats[4].skipped) << what;
      EXPECT_TRUE(gpu.stats[5].skipped) << what << ": the infinite gradient did not skip the step";
      EXPECT_EQ(gpu.stats[5].loss_scale, gpu.stats[4].loss_scale / 2) << what << ": the scale did not halve";
      EXPECT_EQ(gpu.stats[5].step, gpu.stats[4].step) << what << ": a skipped step counted";
    }
  }
}

}  // namespace
}  // namespace zdp
