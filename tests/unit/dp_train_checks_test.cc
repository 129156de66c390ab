// What dp-launch says about dp-train's ranks before any starts (launcher/dp_train_checks.h):
// the mlp in 16-bit is refused (it failed at its first forward in every rank), a dry run
// without GPUs of a 16-bit gpt whose backend is "auto" plans for the GPU node (a note, not
// a refusal), and a sharded accumulation that the world size leaves nothing to accumulate
// is said. Another program is none of this's business.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "launcher/dp_train_checks.h"
#include "testing/fake_env.h"
#include "testing/temp_dir.h"
#include "tests/unit/launch_plan_inputs.h"

namespace zdp {
namespace {

using launch_plan_testing::inputs;
using launch_plan_testing::parsed;

class DpTrainChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    program_ = dir_.path() + "/dp-train";  // a stand-in: only its name and mode matter here
    { std::ofstream(program_) << "#!/bin/sh\n"; }
    ASSERT_EQ(::chmod(program_.c_str(), 0755), 0);
  }
  std::string config(const std::string& rest) const { return "[launch]\nprogram = \"" + program_ + "\"\n" + rest; }

  testing::TempDir dir_;
  std::string program_;
};

TEST_F(DpTrainChecks, TheMlpIn16BitIsRefusedBeforeTheLaunch) {
  launcher::PlanInputs gpu = inputs();
  gpu.cuda_devices = 1;
  for (const char* dtype : {"bf16", "fp16"}) {
    auto plan = launcher::make_plan(parsed(config("[model]\ndtype = \"" + std::string(dtype) + "\"\n")), gpu,
                                    testing::fake_env({}));
    ASSERT_FALSE(plan.ok()) << dtype;
    EXPECT_NE(plan.status().message().find("test.toml:4:9: model.dtype = \"" + std::string(dtype) +
                                           "\": dp-train's mlp (model.kind = \"mlp\", the default) computes in fp32 "
                                           "only"),
              std::string::npos)
        << plan.status().message();
  }
  // The gpt computes in 16 bits on GPUs; another program reads model.dtype as it likes.
  EXPECT_TRUE(launcher::make_plan(parsed(config("[model]\nkind = \"gpt\"\ndtype = \"bf16\"\n")), gpu,
                                  testing::fake_env({}))
                  .ok());
  Config own = parsed("[launch]\nprogram = \"/bin/true\"\n[model]\ndtype = \"bf16\"\n");
  EXPECT_TRUE(launcher::make_plan(own, gpu, testing::fake_env({})).ok());
  EXPECT_TRUE(check_model_support(parsed("[model]\ndtype = \"fp32\"\n")).ok());
  EXPECT_EQ(check_model_support(parsed("[model]\ndtype = \"bf16\"\n")).code(), StatusCode::kInvalidArgument);
}

// README: --dry-run of a GPU config works on a machine without GPUs. With launch.backend
// "auto", the 16-bit gpt resolves to gloo only here: a note; the launch itself refuses.
TEST_F(DpTrainChecks, ADryRunWithoutGpusOfAnAutoBackendSixteenBitGptIsANote) {
  const Config c = parsed(config("[model]\nkind = \"gpt\"\ndtype = \"bf16\"\n"), {"train.global_batch=2"});
  launcher::PlanInputs dry = inputs();
  dry.dry_run = true;
  auto planned = launcher::make_plan(c, dry, testing::fake_env({}));
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  ASSERT_EQ(planned->notes.size(), 1u);
  EXPECT_NE(planned->notes[0].find("needs GPU ranks (backend nccl), but this job's ranks use the CPU (backend gloo, as "
                                   "launch.backend = \"auto\" resolves here)"),
            std::string::npos)
      << planned->notes[0];
  EXPECT_NE(planned->notes[0].find(": the launch itself would stop here"), std::string::npos) << planned->notes[0];
  auto launched = launcher::make_plan(c, inputs(), testing::fake_env({}));
  ASSERT_FALSE(launched.ok());
  EXPECT_NE(launched.status().message().find("needs GPU ranks"), std::string::npos) << launched.status().message();
  // launch.backend = "gloo" chosen on purpose is the config's mistake, dry run or not.
  auto gloo = launcher::make_plan(parsed(config("backend = \"gloo\"\n[model]\nkind = \"gpt\"\ndtype = \"bf16\"\n")),
                                  dry, testing::fake_env({}));
  EXPECT_FALSE(gloo.ok());
}

// zero.accumulate = "sharded" with train.accum_steps derived as 1 at the world size this
// launch resolved (8 / (4 x 2)): nothing accumulates, and the note says so (it said so only
// for a literal train.accum_steps = 1).
TEST_F(DpTrainChecks, ShardedAccumulationWithADerivedAccumStepOfOneIsInert) {
  const std::string rest = "nproc_per_node = 2\n[train]\nglobal_batch = 8\nmicro_batch = 4\n[zero]\nstage = 2\n"
                           "accumulate = \"sharded\"\n";
  auto plan = launcher::make_plan(parsed(config(rest)), inputs(), testing::fake_env({}));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  std::string inert;
  for (const std::string& n : plan->inert) inert += n + "\n";
  EXPECT_NE(inert.find("test.toml:9:14: zero.accumulate has no effect: train.accum_steps resolves to 1 at world size "
                       "2 (train.global_batch 8 / (train.micro_batch 4 x 2)): nothing accumulates"),
            std::string::npos)
      << inert;
  auto accumulating = launcher::make_plan(parsed(config(rest), {"train.global_batch=16"}), inputs(), testing::fake_env({}));
  ASSERT_TRUE(accumulating.ok()) << accumulating.status().message();
  for (const std::string& n : accumulating->inert) EXPECT_EQ(n.find("zero.accumulate"), std::string::npos) << n;
}

}  // namespace
}  // namespace zdp
