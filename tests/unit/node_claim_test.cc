// Launchers joining a job (launcher/node_claim.h) over one store: every node takes node 0's
// run id (ZDP_RUN_ID, stored in each node's checkpoints: each node's own random one made
// per-node copies differ), a layout that differs and a node rank claimed twice are refused;
// a claim whose lease stopped (its launcher died) is taken over, and node 0 names it gone.
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
  const NodeLease alive(store, 1);  // node 1's launcher lives on
  LaunchPlan again = node(1, "");
  const Status twice = join_job(store, again, within, std::chrono::milliseconds(1500));
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.message().find("node 1 has already joined"), std::string::npos) << twice.message();
  LaunchPlan other = node(1, "");
  other.nproc_per_node = 2;
  other.world_size = 4;
  EXPECT_NE(join_job(store, other, within).message().find("node 0's plans 2 node(s) x 4 rank(s)"), std::string::npos);
}

// A launcher that died (no NodeLease renewing its claim) leaves its node to a new one,
// which rejoins: the claim was held for good, and a lost node could never come back. A
// launcher that is alive keeps its node.
TEST(NodeClaim, AClaimWhoseLeaseStoppedIsTakenOverAndALiveOneIsNot) {
  InMemoryStore store;
  const std::chrono::milliseconds within(2000);
  LaunchPlan zero = node(0, "0123456789abcdef"), dead = node(1, "");
  ASSERT_TRUE(join_job(store, zero, within).ok());
  ASSERT_TRUE(join_job(store, dead, within).ok());  // and it dies: no lease renewed
  EXPECT_NE(missing_launchers(store, 2, std::chrono::milliseconds(100)).find("the launcher of node(s) 1 is gone"),
            std::string::npos);
  LaunchPlan replacement = node(1, "");
  const Status took = join_job(store, replacement, within, std::chrono::milliseconds(200));
  ASSERT_TRUE(took.ok()) << took.message();
  EXPECT_EQ(replacement.run_id, "0123456789abcdef");
  {
    const NodeLease alive(store, 1);
    LaunchPlan twin = node(1, "");
    const Status refused = join_job(store, twin, within, std::chrono::milliseconds(1500));
    EXPECT_NE(refused.message().find("node 1 has already joined"), std::string::npos) << refused.message();
    EXPECT_EQ(missing_launchers(store, 2, std::chrono::milliseconds(1500)), "");
  }
}

}  // namespace
}  // namespace zdp::launcher
