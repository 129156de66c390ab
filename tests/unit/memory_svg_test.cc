// The memory chart (profile/src/memory_svg.h): one group per ZeRO stage, a bar per rank
// or plan, the measured bar outlined, and the title escaped; a valid SVG that renders.
#include "profile/src/memory_svg.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "testing/svg_check.h"
#include "testing/temp_dir.h"

namespace zdp::profile {
namespace {

TEST(ProfileSvg, OneGroupPerStageAndABarPerRank) {
  std::vector<StageBars> stages;
  for (int stage = 0; stage <= 3; ++stage) {
    StageBars g;
    g.stage = stage;
    g.caption = stage == 2 ? "this run: measured" : "planned";
    if (stage == 2) g.bars.push_back(MemoryBar{"rank 0", {1 << 20, 1 << 20, 0, 0, 0, 0}, true});
    g.bars.push_back(MemoryBar{"plan", {1 << 20, 1 << 19, 0, 0, 0, 0}, false});
    stages.push_back(g);
  }
  const std::string svg = memory_svg("title <x>", stages);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  for (const char* label : {"stage 0", "stage 1", "stage 2", "stage 3", "rank 0", "title &lt;x&gt;"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // the measured bar's outline
  // Drawn by the plotting module: a real XML parser finds the 5 bars, rsvg-convert renders it.
  testing::TempDir dir;
  const std::string path = dir.path() + "/memory.svg";
  std::ofstream(path) << svg;
  const testing::CommandRun r = testing::check_svg(ZDP_SOURCE_DIR, path, {"--bars", "5"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A category the plan does not cover (-1: the engine's own plan has no activations) is
// missing, not zero: the plan bar's total reads "n/a", not a total without it.
TEST(ProfileSvg, AnUnplannedCategoryLeavesThePlansTotalUnknown) {
  StageBars g;
  g.stage = 1;
  g.bars.push_back(MemoryBar{"rank 0", {1 << 20, 1 << 20, 0, 0, 0, 1 << 21}, true});
  g.bars.push_back(MemoryBar{"plan", {1 << 20, 1 << 20, 0, 0, 0, -1}, false});
  const std::string svg = memory_svg("t", {g});
  EXPECT_NE(svg.find("data-total=\"4\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("data-total=\"n/a\""), std::string::npos) << svg;
  EXPECT_EQ(svg.find("data-total=\"2\""), std::string::npos) << "the plan drawn as if it had no activations";
}

}  // namespace
}  // namespace zdp::profile
