// zdp's commands answer a usage error with exit 2, as dp-launch and most Unix tools do
// (CLI11_PARSE's 105-109 meant nothing to a caller's script), --help with 0, and refuse an
// empty output path up front (dp-data synthetic --out "" failed at its rename to '').
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/run_command.h"
#include "testing/temp_dir.h"

namespace {

using zdp::testing::run_command;

TEST(ToolUsage, AUsageErrorExitsTwoAndHelpZero) {
  zdp::testing::TempDir dir;
  const std::string in = "cd '" + dir.path() + "' && ";
  const std::vector<std::string> tools = {ZDP_DP_TRAIN, ZDP_DP_DATA, ZDP_DP_CKPT, ZDP_DP_CHECK};
  for (const std::string& tool : tools) {
    const auto bogus = run_command(in + tool + " --bogus");
    EXPECT_EQ(bogus.exit_code, 2) << tool << ": " << bogus.output;
    EXPECT_NE(bogus.output.find("Run with --help"), std::string::npos) << tool << ": " << bogus.output;
    EXPECT_EQ(run_command(in + tool + " --help").exit_code, 0) << tool;
  }
  const auto zero = run_command(in + ZDP_DP_DATA + " synthetic --tokens 0 --out t.bin");
  EXPECT_EQ(zero.exit_code, 2) << zero.output;
  EXPECT_NE(zero.output.find("--tokens: 0 is not in [1, 2147483647]"), std::string::npos) << zero.output;
  for (const std::string& command : {std::string(ZDP_DP_DATA) + " synthetic --tokens 5 --out ''",
                                     std::string(ZDP_DP_DATA) + " text --out '' " + ZDP_DP_DATA,
                                     std::string(ZDP_DP_CKPT) + " export . --out ''"}) {
    const auto empty = run_command(in + command);
    EXPECT_EQ(empty.exit_code, 2) << command << ": " << empty.output;
    EXPECT_NE(empty.output.find("--out: an empty value"), std::string::npos) << command << ": " << empty.output;
  }
}

}  // namespace
