// optim.rounding = "stochastic" from a config to the parameters (CPU, Gloo, real rank
// processes): the engine built by EngineOptions::from, as dp-train builds it, writes bf16
// and fp16 parameters that are the fp32 masters rounded by f32_to_{bf16,f16}_stochastic
// with the Philox bits of (train.seed, optimizer step, the element's index among all
// parameter elements), for K = 1, 2, 4 and every stage, though the buckets, their padding
// and so every flat offset differ between those runs. (dp-train itself computes in fp32 on
// the CPU, where the config refuses stochastic rounding: dp_train_test checks that.)
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/philox.h"
#include "testing/engine_comparisons.h"
#include "testing/engine_runs.h"

namespace zdp {
namespace {

using testing::fork_ranks;

constexpr int kSteps = 3;
constexpr int64_t kSeed = 4242;

// The [model], [optim], [train] and [zero] sections as a user writes them.
StatusOr<Config> rounding_config(const std::string& dtype, const std::string& rounding, int stage, int world) {
  return parse_config("[model]\ndtype = \"" + dtype + "\"\n[optim]\nrounding = \"" + rounding +
                          "\"\nlr = 0.05\nweight_decay = 0.1\n[train]\nseed = " + std::to_string(kSeed) +
                          "\nsteps = " + std::to_string(kSteps) + "\nglobal_batch = 24\nmicro_batch = " +
                          std::to_string(24 / world) + "\n[zero]\nstage = " + std::to_string(stage) +
                          // about 100 elements per bucket: several buckets, padded differently at each K
                          "\nbucket_mb = 0.0002\n",
                      "rounding.toml");
}

template <typename T>
uint16_t stochastic(float master, uint64_t element) {
  const uint32_t bits = kernels::random16(static_cast<uint64_t>(kSeed), kSteps, element);
  if constexpr (std::is_same_v<T, kernels::Bf16>) return kernels::f32_to_bf16_stochastic(master, bits);
  return kernels::f32_to_f16_stochastic(master, bits);
}
template <typename T>
uint16_t nearest(float master) {
  return kernels::from_f32<T>(master).bits;
}

// On rank 0 after the run: every parameter element against its master rounded as the
// config says. "" when all match; counts how many differ from round-to-nearest.
template <typename T>
Status check_rank0(Engine& engine, testing::TinyMlp& model, bool stochastic_rounding, int64_t* differ_from_nearest) {
  uint64_t element = 0;
  for (int l = 0; l < testing::TinyMlp::kLayers; ++l) {
    ZDP_ASSIGN_OR_RETURN(Engine::LayerScope scope, engine.layer(l, Engine::Pass::kForward));
    for (Param p : {model.weight(l), model.bias(l)}) {
      ZDP_ASSIGN_OR_RETURN(const std::vector<float> master, engine.gather_master(p));
      const T* view = engine.param_as<T>(p);
      if (view == nullptr) return engine.error();
      for (size_t i = 0; i < master.size(); ++i, ++element) {
        const uint16_t want = stochastic_rounding ? stochastic<T>(master[i], element) : nearest<T>(master[i]);
        if (view[i].bits != want) {
          return Status(StatusCode::kInternal, "layer " + std::to_string(l) + " element " + std::to_string(i) +
                                                   " (index " + std::to_string(element) + "): parameter bits " +
                                                   std::to_string(view[i].bits) + ", expected " +
                                                   std::to_string(want) + " from master " +
                                                   std::to_string(master[i]));
        }
        *differ_from_nearest += view[i].bits != nearest<T>(master[i]);
      }
    }
  }
  return Status::Ok();
}

// On rank `rank` of `k`: the config's engine with TinyMlp, trained kSteps steps (with
// `train`) or not, then `then(engine, model)`.
template <typename T>
Status with_engine(const std::string& dtype, const std::string& rounding, int stage, int rank, int k, Store& store,
                   bool train, const std::function<Status(Engine&, testing::TinyMlp&)>& then) {
  ZDP_ASSIGN_OR_RETURN(const Config config, rounding_config(dtype, rounding, stage, k));
  ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, k, store, 1, config));
  ZDP_ASSIGN_OR_RETURN(EngineOptions options, EngineOptions::from(config, k));
  // fp16: this model's scaled gradients overflow at the default scale 2^16; a skipped
  // step would not count, and the check keys the bits by kSteps.
  options.loss_scale.initial = 1024;
  Engine engine(ctx, options);
  ZDP_ASSIGN_OR_RETURN(testing::TinyMlp model, testing::TinyMlp::create(engine));
  ZDP_RETURN_IF_ERROR(engine.finalize());
  const int64_t per_rank = config.train.micro_batch;
  for (int step = 0; train && step < kSteps; ++step) {
    ZDP_RETURN_IF_ERROR(model.train_micro<T>(engine, step, rank * per_rank, per_rank).status());
    ZDP_RETURN_IF_ERROR(engine.step().status());
  }
  return then(engine, model);
}

// Trains kSteps steps of TinyMlp on `world` ranks with the config's engine and checks the
// parameters on rank 0; returns how many elements differ from round-to-nearest (-1: failed).
template <typename T>
int64_t run_and_check(const std::string& dtype, const std::string& rounding, int stage, int world) {
  const std::string path = ::testing::TempDir() + "zdp_rounding_" + std::to_string(::getpid());
  const std::string failures = testing::describe_failures(fork_ranks(world, [&](int rank, int k, Store& store) -> Status {
    return with_engine<T>(dtype, rounding, stage, rank, k, store, true, [&](Engine& engine, testing::TinyMlp& model) {
      int64_t differ = 0;
      ZDP_RETURN_IF_ERROR(check_rank0<T>(engine, model, rounding == "stochastic", &differ));
      if (rank == 0) {
        std::FILE* f = std::fopen(path.c_str(), "w");
        if (f == nullptr) return Status(StatusCode::kIoError, "cannot write " + path);
        std::fprintf(f, "%lld\n", static_cast<long long>(differ));
        std::fclose(f);
      }
      return Status::Ok();
    });
  }));
  EXPECT_EQ(failures, "") << dtype << " " << rounding << ", stage " << stage << ", K = " << world;
  long long differ = -1;
  if (std::FILE* f = std::fopen(path.c_str(), "r")) {
    if (std::fscanf(f, "%lld", &differ) != 1) differ = -1;
    std::fclose(f);
  }
  std::remove(path.c_str());
  return failures.empty() ? differ : -1;
}

// A resume rounds the checkpoint's masters into the parameters as the run's last step
// did (the same Philox key), so the resumed run computes with the uninterrupted one's
// bits: a load rounded them to nearest, and a deterministic run diverged after a resume.
// Saved by K = 2 at stage 1, loaded by K = 1 at stage 3 and by K = 4 at stage 0.
template <typename T>
std::string resume_and_check(const std::string& dtype, int load_stage, int load_world) {
  const std::string dir = ::testing::TempDir() + "zdp_rounding_ckpt_" + std::to_string(::getpid());
  std::string failures = testing::describe_failures(fork_ranks(2, [&](int rank, int k, Store& store) -> Status {
    return with_engine<T>(dtype, "stochastic", 1, rank, k, store, true, [&](Engine& engine, testing::TinyMlp&) {
      CheckpointState state;
      state.step = kSteps;
      return engine.save_checkpoint(dir, state).status();
    });
  }));
  failures += testing::describe_failures(fork_ranks(load_world, [&](int rank, int k, Store& store) -> Status {
    return with_engine<T>(dtype, "stochastic", load_stage, rank, k, store, false,
                          [&](Engine& engine, testing::TinyMlp& model) {
                            ZDP_RETURN_IF_ERROR(engine.load_checkpoint(dir).status());
                            int64_t differ = 0;
                            ZDP_RETURN_IF_ERROR(check_rank0<T>(engine, model, /*stochastic_rounding=*/true, &differ));
                            return differ > 916 / 10 ? Status::Ok()
                                                     : Status(StatusCode::kInternal,
                                                              "too few elements rounded away from nearest");
                          });
  }));
  std::filesystem::remove_all(dir);
  return failures;
}

TEST(EngineRounding, AResumeRoundsTheMastersAsTheRunsLastStepDid) {
  EXPECT_EQ(resume_and_check<kernels::Bf16>("bf16", 3, 1), "");
  EXPECT_EQ(resume_and_check<kernels::Bf16>("bf16", 0, 4), "");
  EXPECT_EQ(resume_and_check<kernels::Half>("fp16", 2, 2), "");
}

// The whole run, as users see it: with bf16 parameters rounded stochastically, a run saved
// at step 4 and resumed ends where the uninterrupted run ends, bit for bit (the GPU check
// runs the same job on a GPU: EngineGpu.AResumeWithStochasticRounding...).
TEST(EngineRounding, AStochasticRunResumedEndsWhereTheUninterruptedOneEnds) {
  const std::string dir = ::testing::TempDir() + "zdp_rounding_resume_" + std::to_string(::getpid());
  testing::EngineRun whole;
  whole.world = 2;
  whole.options = testing::comparison_options(1);
  whole.options.compute_dtype = DType::kBF16;
  whole.options.optim.rounding = ParamRounding::kStochastic;
  whole.steps = 8;
  const testing::EngineRunResult uninterrupted = testing::run_engine(whole);
  ASSERT_EQ(uninterrupted.failures, "");
  testing::EngineRun saving = whole;
  saving.steps = 4;
  saving.save_steps = {4};
  saving.save_root = dir;
  ASSERT_EQ(testing::run_engine(saving).failures, "");
  testing::EngineRun resuming = whole;
  resuming.load_from = dir;
  const testing::EngineRunResult resumed = testing::run_engine(resuming);
  ASSERT_EQ(resumed.failures, "");
  EXPECT_EQ(testing::max_difference(resumed, uninterrupted).value, 0.0);
  std::filesystem::remove_all(dir);
}

// Every K and stage rounds each element by the same key: the check holds in all of them.
TEST(EngineRounding, StochasticBf16ParametersAreTheMastersRoundedByElementAtEveryKAndStage) {
  for (int world : {1, 2, 4}) {
    for (int stage : {0, 1, 2, 3}) {
      const int64_t differ = run_and_check<kernels::Bf16>("bf16", "stochastic", stage, world);
      // Stochastic rounding goes the other way from nearest for a sizeable share of the
      // 916 elements (dropped fractions are spread evenly: about a quarter).
      EXPECT_GT(differ, 916 / 10) << "stage " << stage << ", K = " << world;
    }
  }
}

TEST(EngineRounding, StochasticFp16ParametersToo) {
  for (int stage : {0, 3}) EXPECT_GT(run_and_check<kernels::Half>("fp16", "stochastic", stage, 2), 916 / 10);
}

// The default rounds to nearest, and nothing else changes the parameters.
TEST(EngineRounding, NearestIsTheDefault) {
  EXPECT_EQ(run_and_check<kernels::Bf16>("bf16", "nearest", 2, 2), 0);
}

}  // namespace
}  // namespace zdp
