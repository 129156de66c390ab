// A token file changed in place while dp-train reads it (TokenFile::check_unchanged): the
// run stops before its next save, naming the file; the mapping is MAP_PRIVATE, so without
// the check a rewrite that keeps the length trained on the new contents silently.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "testing/run_command.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

// dp-train alone on the quickstart model over `data` for 4 steps, a checkpoint every 2;
// rank 0 pauses `pause_ms` after step 1. In the background, its output in dir/out.txt;
// once step 1 is logged, `change` runs, then the script waits for dp-train and prints
// "exit N" and its output.
std::string run_script(const testing::TempDir& dir, const std::string& data, int pause_ms, const std::string& change) {
  std::string train = "ZDP_TRAIN_FAULT=rank=0,step=1,action=slow,ms=" + std::to_string(pause_ms) + " timeout 120 " +
                      std::string(ZDP_DP_TRAIN) + " --config " + ZDP_SOURCE_DIR + "/configs/quickstart.toml";
  for (const std::string& s : {"data.path=" + data, std::string("data.val_path=\"\""), std::string("train.steps=4"),
                               std::string("optim.warmup_steps=0"), std::string("train.log_every=1"),
                               "checkpoint.dir=" + dir.file("ckpt"), std::string("checkpoint.every_steps=2"),
                               "launch.log_dir=" + dir.file("logs")}) {
    train += " --set '" + s + "'";
  }
  const std::string out = dir.file("out.txt");
  return "(" + train + " > " + out + " 2>&1 & p=$!; " + "for i in $(seq 1200); do grep -q '^step 1/4' " + out +
         " && break; sleep 0.05; done; " + change + "; wait $p; echo \"exit $?\"; cat " + out + ")";
}

TEST(DpTrainDataChange, ATokenFileRewrittenInPlaceStopsTheRunBeforeItsNextSave) {
  testing::TempDir dir;
  const std::string data = dir.file("train.bin");
  ASSERT_EQ(testing::run_command(std::string(ZDP_DP_DATA) + " synthetic --out " + data + " --tokens 100000").exit_code, 0);
  // Once step 1 is logged (rank 0 then pauses 4 s), 8 KiB of tokens become zeros, in place
  // (the same length); step 2 saves a checkpoint.
  const std::string script =
      run_script(dir, data, 4000, "dd if=/dev/zero of=" + data + " bs=1024 seek=1 count=8 conv=notrunc status=none");
  const testing::CommandRun r = testing::run_command(script);
  EXPECT_NE(r.output.find("exit 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("token file '" + data + "' was changed in place"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 3/4"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("ckpt/step-2"))) << "no checkpoint of steps trained on changed data";
}

// Replacing the file by a rename (dp-data's way) leaves the run's mapping intact: no error.
TEST(DpTrainDataChange, ATokenFileReplacedByARenameIsNoError) {
  testing::TempDir dir;
  const std::string data = dir.file("train.bin");
  const std::string dp_data = std::string(ZDP_DP_DATA) + " synthetic --tokens 100000 --out ";
  ASSERT_EQ(testing::run_command(dp_data + data + " && " + dp_data + dir.file("next.bin")).exit_code, 0);
  const std::string script = run_script(dir, data, 3000, "mv " + dir.file("next.bin") + " " + data);
  const testing::CommandRun r = testing::run_command(script);
  EXPECT_NE(r.output.find("exit 0"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("ckpt/step-4"))) << r.output;
}

}  // namespace
}  // namespace zdp
