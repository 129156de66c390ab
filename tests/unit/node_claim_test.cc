// Launchers joining a job (launcher/node_claim.h) over one store: every node takes node 0's
// run id (ZDP_RUN_ID, stored in each node's checkpoints: each node's own random one made
// per-node copies differ), a layout that differs and a node rank claimed twice are refused.
#include "launcher/node_claim.h"

#include <gtest/gtest.h>

#include <chrono>

#include "zdp/store.h"

namespace zdp::launcher {
namespace {

LaunchPlan node(int rank, const std::string& run_id) {
  LaunchPlan p;
  p.nnodes = 2;
  p.nproc_per_node = 4;
  p.world_size = 8;
  p.node_rank = rank;
  p.program = "/opt/bin/dp-train";
  p.run_id = run_id;
  return p;
}

TEST(NodeClaim, EveryNodeTakesNodeZerosRunId) {
  InMemoryStore store;
  const std::chrono::milliseconds within(2000);
  LaunchPlan zero = node(0, "0123456789abcdef"), one = node(1, "fedcba9876543210");
  ASSERT_TRUE(join_job(store, zero, within).ok());
  ASSERT_TRUE(join_job(store, one, within).ok());
  EXPECT_EQ(zero.run_id, "0123456789abcdef");
  EXPECT_EQ(one.run_id, "0123456789abcdef");
  LaunchPlan again = node(1, "");
  const Status twice = join_job(store, again, within);
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.message().find("node 1 has already joined"), std::string::npos) << twice.message();
  LaunchPlan other = node(1, "");
  other.nproc_per_node = 2;
  other.world_size = 4;
  EXPECT_NE(join_job(store, other, within).message().find("node 0's plans 2 node(s) x 4 rank(s)"), std::string::npos);
}

}  // namespace
}  // namespace zdp::launcher
