// The memory chart (profile/src/memory_svg.h): one group per ZeRO stage, a bar per rank
// or plan, the measured bar outlined, and the title escaped.
#include "profile/src/memory_svg.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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
}

}  // namespace
}  // namespace zdp::profile
