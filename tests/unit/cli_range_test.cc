// The bounds of the commands' numeric flags (core/internal/cli_range.h): NaN, infinities
// and numbers a flag's unit would turn into infinity are refused with the flag and its
// range, where CLI::Range and CLI::PositiveNumber let them through; and the commands use
// them: dp-launch plan refuses --flops nan, --link nan,1 and --world 0 before planning
// anything (the old flags planned NaN step times, and said "0 not in range 0 to 1.8e308").
#include "core/internal/cli_range.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "testing/run_command.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

// The error CLI11 gives for `--x value` under `check`, or "ok".
template <typename T>
std::string parsed(const CLI::Validator& check, const std::string& value, T* out) {
  CLI::App app;
  app.add_option("--x", *out)->check(check);
  std::vector<std::string> args = {value, "--x"};  // CLI11 takes them in reverse
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "ok";
}

TEST(CliRange, FiniteRangeRefusesNanInfinitiesAndWhatIsOutside) {
  double v = 0;
  EXPECT_EQ(parsed(finite_range(0.0, 0.9), "0.5", &v), "ok");
  EXPECT_EQ(v, 0.5);
  EXPECT_EQ(parsed(finite_range(0.0, 0.9), "0", &v), "ok");
  EXPECT_EQ(parsed(finite_range(0.0, 0.9), "0.9", &v), "ok");
  for (const std::string bad : {"nan", "NaN", "-nan", "inf", "-inf", "1e400"}) {
    EXPECT_NE(parsed(finite_range(0.0, 0.9), bad, &v).find("is not a finite number in [0, 0.9]"), std::string::npos) << bad;
  }
  EXPECT_NE(parsed(finite_range(0.0, 0.9), "0.95", &v).find("0.95 is not a finite number in [0, 0.9]"), std::string::npos);
  EXPECT_NE(parsed(finite_range(1e-3, 1e9), "1e308", &v).find("[0.001, 1e+09]"), std::string::npos);
  EXPECT_NE(parsed(finite_range(0.0, 1.0), "half", &v).find("'half' is not a number"), std::string::npos);
  EXPECT_NE(parsed(finite_range(0.0, 1.0), "0.5x", &v).find("'0.5x' is not a number"), std::string::npos);
}

TEST(CliRange, IntegerRangeSaysItsBoundsAsIntegers) {
  int64_t v = 0;
  EXPECT_EQ(parsed(integer_range(1, 1 << 20), "8", &v), "ok");
  EXPECT_EQ(v, 8);
  EXPECT_NE(parsed(integer_range(1, 1 << 20), "0", &v).find("0 is not in [1, 1048576]"), std::string::npos);
  EXPECT_NE(parsed(integer_range(1, 1 << 20), "1048577", &v).find("is not in [1, 1048576]"), std::string::npos);
  EXPECT_NE(parsed(integer_range(1, 1 << 20), "99999999999999999999", &v).find("is not an integer"), std::string::npos);
  EXPECT_NE(parsed(integer_range(1, 1 << 20), "2.5", &v).find("'2.5' is not an integer"), std::string::npos);
  // CLI11 converts with strtoll's base 0: "0100" would have been 64, "0x10" 16.
  EXPECT_NE(parsed(integer_range(1, 1 << 20), "0100", &v).find("'0100' has a leading 0 (which some tools read as octal): "
                                                                "write 100"),
            std::string::npos)
      << parsed(integer_range(1, 1 << 20), "0100", &v);
  EXPECT_NE(parsed(integer_range(-5, 5), "-03", &v).find("has a leading 0"), std::string::npos);
  EXPECT_NE(parsed(integer_range(1, 1 << 20), "0x10", &v).find("'0x10' is not an integer"), std::string::npos);
  EXPECT_EQ(parsed(integer_range(0, 5), "0", &v), "ok");
  EXPECT_EQ(v, 0);
}

// dp-launch plan with a flag out of its range: a non-zero exit naming the flag, and no
// plan written into the log folder.
TEST(CliRange, DpLaunchPlanRefusesNonFiniteFlagsBeforePlanning) {
  testing::TempDir dir;
  const std::string plan = std::string(ZDP_DP_LAUNCH) + " plan " + ZDP_SOURCE_DIR "/configs/quickstart.toml" +
                           " --set launch.log_dir=" + dir.path() + "/logs";
  const struct {
    const char* flags;
    const char* says;
  } cases[] = {{"--flops nan", "--flops: nan is not a finite number in [0.001, 1e+09]"},
               {"--flops 1e308", "--flops: 1e308 is not a finite number"},
               {"--link nan,1", "--link 'nan,1' is not GB/s,alpha_us with GB/s in [0.001, 1e6]"},
               {"--link 100,inf", "--link '100,inf' is not GB/s,alpha_us"},
               {"--world 0", "--world: 0 is not in [1, 1048576]"}};
  for (const auto& c : cases) {
    const testing::CommandRun r = testing::run_command(plan + " " + c.flags);
    EXPECT_NE(r.exit_code, 0) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.flags << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/logs/plan.jsonl")) << c.flags;
  }
  const testing::CommandRun ok = testing::run_command(plan + " --flops 50 --link 10,5 --world 2,4");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/logs/plan.jsonl"));
}

}  // namespace
}  // namespace zdp
