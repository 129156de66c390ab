// Every example config (configs/*.toml) states its memory per rank in its header comment,
// as "Memory per rank (dp-launch plan): model states X GiB, activations Y GiB, total Z GiB"
// (MiB or KiB for the small ones), and `dp-launch plan` of that very file must agree within 3%:
// the comments cannot drift from what the engine will allocate. (gpt2-350m-zero3.toml
// once claimed 0.71 GB of stage-3 model state where the plan said 2.07 GiB: its local
// gradient accumulation keeps a full fp32 buffer.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "testing/run_command.h"
#include "testing/temp_dir.h"
#include "zdp/config.h"

namespace zdp {
namespace {

namespace fs = std::filesystem;

constexpr double kTolerance = 0.03;  // the comments round to 2-3 digits

struct Stated {
  double states = 0, activations = 0, total = 0;  // bytes
};

double bytes_of(const std::string& number, const std::string& unit) {
  const double scale = unit == "GiB" ? 1024.0 * 1024.0 * 1024.0 : unit == "MiB" ? 1024.0 * 1024.0 : 1024.0;
  return std::stod(number) * scale;
}

// The header comment (the leading lines starting with '#') joined into one line.
std::string header_comment(const fs::path& config) {
  std::ifstream in(config);
  std::string joined;
  for (std::string line; std::getline(in, line) && !line.empty() && line[0] == '#';) joined += line.substr(1) + " ";
  return std::regex_replace(joined, std::regex(" +"), " ");
}

// The stage line of the configured world size and stage in `dp-launch plan`'s JSON lines.
nlohmann::json planned(const fs::path& config, const std::string& log_dir) {
  const testing::CommandRun r = testing::run_command(std::string(ZDP_DP_LAUNCH) + " plan " + config.string() +
                                                     " --set launch.log_dir=" + log_dir +
                                                     " --device-memory 80GiB --link 100,10 --flops 400000");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const Config c = load_config(config.string()).value();
  const int world = resolve_nproc_per_node(c.launch, 0) * c.launch.nnodes;
  std::ifstream in(fs::path(log_dir) / "plan.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["kind"] == "stage" && j["world_size"] == world && j["stage"] == c.zero.stage) return j;
  }
  ADD_FAILURE() << "no stage " << c.zero.stage << " line at world size " << world << " in plan.jsonl\n" << r.output;
  return {};
}

void expect_close(double stated, double plan, const std::string& what) {
  EXPECT_LE(std::fabs(stated - plan), kTolerance * plan)
      << what << ": the comment says " << stated / (1 << 20) << " MiB, dp-launch plan " << plan / (1 << 20) << " MiB";
}

TEST(ExampleConfigs, StatedMemoryIsWhatDpLaunchPlanSays) {
  const std::regex stated_re(
      R"(Memory per rank \(dp-launch plan\): model states ([0-9.]+) (GiB|MiB|KiB), activations ([0-9.]+) (GiB|MiB|KiB), total ([0-9.]+) (GiB|MiB|KiB))");
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(ZDP_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    const std::string comment = header_comment(entry.path());
    std::smatch m;
    ASSERT_TRUE(std::regex_search(comment, m, stated_re))
        << "the header comment states no \"Memory per rank (dp-launch plan): model states ..., activations ..., "
           "total ...\":\n"
        << comment;
    testing::TempDir tmp;
    const nlohmann::json plan = planned(entry.path(), tmp.path());
    if (plan.is_null()) continue;
    const nlohmann::json& b = plan["bytes"];
    double states = 0;
    for (const char* k : {"params", "grads", "reduce_copy", "accum", "master", "adam_m", "adam_v"}) {
      states += b[k].get<double>();
    }
    expect_close(bytes_of(m[1], m[2]), states, "model states");
    expect_close(bytes_of(m[3], m[4]), b["activations"].get<double>(), "activations");
    expect_close(bytes_of(m[5], m[6]), b["total"].get<double>(), "total");
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

}  // namespace
}  // namespace zdp
