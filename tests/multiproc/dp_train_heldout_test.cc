// The held-out samples an evaluation reads are checked before the first step: a token
// outside model.vocab_size there failed the run only at its evaluation, by default after
// the last step and before the final checkpoint, so the whole run's training was lost
// (and a restart trained it again to fail the same way).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "testing/run_command.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

TEST(DpTrainHeldOut, AHeldOutTokenOutsideTheVocabularyIsRefusedBeforeTheFirstStep) {
  testing::TempDir dir;
  const std::string dp_data = std::string(ZDP_DP_DATA) + " synthetic --tokens 20000 ";
  ASSERT_EQ(testing::run_command(dp_data + "--out " + dir.file("train.bin") + " && " + dp_data + "--vocab 1000 --out " +
                                 dir.file("val.bin"))
                .exit_code,
            0);
  std::string train = "timeout 120 " + std::string(ZDP_DP_TRAIN) + " --config " + ZDP_SOURCE_DIR + "/configs/quickstart.toml";
  for (const std::string& s : {"data.path=" + dir.file("train.bin"), "data.val_path=" + dir.file("val.bin"),
                               std::string("train.steps=4"), std::string("optim.warmup_steps=0"),
                               "checkpoint.dir=" + dir.file("ckpt"), "launch.log_dir=" + dir.file("logs")}) {
    train += " --set '" + s + "'";
  }
  const testing::CommandRun r = testing::run_command(train);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the held-out samples: token file '" + dir.file("val.bin") + "'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("outside model.vocab_size (256)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 1/4"), std::string::npos) << "trained before the check\n" << r.output;
}

}  // namespace
}  // namespace zdp
