// zero.compress = "inter-node" end to end: the MLP job of configs/mlp-cpu.toml as two
// dp-launch instances on this host (--node-rank 0 and 1 over 127.0.0.1, 2 ranks each, so
// each rank learns its node from GROUP_RANK as on real nodes), profiled. Each rank has one
// peer on its node and two on the other, so the gradient bytes on the wire must be exactly
// 1/3 of the fp32 run's plus 2/3 of the int8-everywhere run's (whatever the bucket sizes),
// and the held-out loss must stay within 1% of the fp32 run's.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/dp_launch_run.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  double grad_bytes = -1;  // the profiler's gradient bytes sent per rank and step
  double loss = 0;         // held-out after the last step
  std::string console;     // node 0's
};

Outcome run(const fs::path& dir, const std::string& name, const std::vector<std::string>& extra) {
  std::vector<std::string> sets = {"launch.nproc_per_node=2", "train.steps=60", "train.log_every=60",
                                   "train.eval_every=0", "checkpoint.dir=''", "checkpoint.every_steps=0",
                                   "profile.enabled=true", "profile.warmup_steps=2", "profile.trace=false",
                                   "profile.dir=" + (dir / name / "profile").string()};
  sets.insert(sets.end(), extra.begin(), extra.end());
  const bench::Run r = bench::launch_run(ZDP_DP_LAUNCH, std::string(ZDP_SOURCE_DIR) + "/configs/mlp-cpu.toml", sets,
                                         dir / name, name, 2);
  Outcome o;
  std::ifstream console(dir / name / "console.log");
  std::stringstream text;
  text << console.rdbuf();
  o.console = text.str();
  EXPECT_TRUE(r.ok) << r.error << "\n" << o.console;
  if (!r.ok) return o;
  o.grad_bytes = bench::profile_summary_value(dir / name / "profile" / "profile.jsonl", "sent_grad_bytes_per_step");
  EXPECT_TRUE(r.summary.contains("eval_loss") && r.summary.at("eval_loss").is_number()) << r.summary.dump();
  o.loss = r.summary.value("eval_loss", 0.0);
  return o;
}

TEST(CompressNodes, TwoLaunchersQuantizeOnlyBetweenNodes) {
  testing::TempDir dir;
  const Outcome fp32 = run(dir.path(), "fp32", {});
  const Outcome all = run(dir.path(), "all", {"zero.reduce_dtype=int8"});
  const Outcome inter = run(dir.path(), "inter", {"zero.reduce_dtype=int8", "zero.compress=inter-node"});
  ASSERT_GT(fp32.grad_bytes, 0);
  ASSERT_GT(all.grad_bytes, 0);
  ASSERT_GT(inter.grad_bytes, 0);
  const double want = fp32.grad_bytes / 3 + 2 * all.grad_bytes / 3;
  std::printf("gradient bytes sent per rank and step: fp32 %.0f, int8 everywhere %.0f (%.2fx less), int8 inter-node "
              "%.0f (%.2fx less; 1/3 fp32 + 2/3 int8 = %.0f); held-out loss %.4f / %.4f / %.4f\n",
              fp32.grad_bytes, all.grad_bytes, fp32.grad_bytes / all.grad_bytes, inter.grad_bytes,
              fp32.grad_bytes / inter.grad_bytes, want, fp32.loss, all.loss, inter.loss);
  // The timeline rounds each exchange's bytes down by under one byte.
  EXPECT_NEAR(inter.grad_bytes, want, 1e-3 * want);
  EXPECT_LT(inter.grad_bytes, 0.6 * fp32.grad_bytes);
  EXPECT_GT(inter.grad_bytes, 1.5 * all.grad_bytes);
  EXPECT_LT(std::fabs(inter.loss - fp32.loss), 0.01 * fp32.loss);
  EXPECT_NE(inter.console.find("4 ranks on 2 nodes; quantized chunks go only to peers on other nodes"),
            std::string::npos)
      << inter.console;
}

}  // namespace
}  // namespace zdp
