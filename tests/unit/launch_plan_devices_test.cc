// What a launch plans from the ranks' environment (launch.env). The GPUs are the ranks': launch.env's CUDA_VISIBLE_DEVICES, when set,
// leaves them fewer than the launcher sees. nproc_per_node = "auto" planned 8 NCCL ranks
// on an 8-GPU node whose ranks were given 2, and each rank then failed in init.
#include <gtest/gtest.h>

#include <string>

#include "launcher/launch_plan.h"
#include "testing/fake_env.h"
#include "tests/unit/launch_plan_inputs.h"

namespace zdp {
namespace {

using launch_plan_testing::inputs;
using launch_plan_testing::parsed;

TEST(LaunchPlanDevices, TheRanksVisibleDevicesDecideAutoAndTheOneGpuARankCheck) {
  launcher::PlanInputs in = inputs();
  in.cuda_devices = 8;
  const std::string nccl = "[launch]\nbackend = \"nccl\"\nnproc_per_node = \"auto\"\nprogram = \"/bin/true\"\n[train]\nglobal_batch = 16\nmicro_batch = 2\n";
  StatusOr<launcher::LaunchPlan> all = launcher::make_plan(parsed(nccl), in, testing::fake_env({}));
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ(all->nproc_per_node, 8);
  for (const auto& [visible, want] : {std::pair<const char*, int>{"0,1", 2}, {"3", 1}, {"5,6,-1,7", 2}}) {
    StatusOr<launcher::LaunchPlan> two =
        launcher::make_plan(parsed(nccl, {std::string("launch.env.CUDA_VISIBLE_DEVICES=\"") + visible + "\""}), in,
                            testing::fake_env({}));
    ASSERT_TRUE(two.ok()) << two.status().to_string();
    EXPECT_EQ(two->nproc_per_node, want) << visible;
  }
  StatusOr<launcher::LaunchPlan> eight = launcher::make_plan(
      parsed(nccl, {"launch.nproc_per_node=8", "launch.env.CUDA_VISIBLE_DEVICES=\"0,1\""}), in, testing::fake_env({}));
  ASSERT_FALSE(eight.ok());
  EXPECT_NE(eight.status().message().find("exceeds the 2 CUDA devices that launch.env.CUDA_VISIBLE_DEVICES leaves the ranks"),
            std::string::npos)
      << eight.status().message();
}

// An interface set by launch.env.GLOO_SOCKET_IFNAME that this node lacks: the error names
// the key and its place (it said "environment: GLOO_SOCKET_IFNAME", as if exported).
TEST(LaunchPlanDevices, AnInterfaceFromLaunchEnvIsNamedAsItsKey) {
  StatusOr<launcher::LaunchPlan> plan =
      launcher::make_plan(parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n[launch.env]\n"
                                 "GLOO_SOCKET_IFNAME = \"zdpnosuch0\"\n"),
                          inputs(), testing::fake_env({}));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("test.toml:4:1: launch.env.GLOO_SOCKET_IFNAME: GLOO_SOCKET_IFNAME = \"zdpnosuch0\""), std::string::npos)
      << plan.status().message();
}

// Node 0 of two whose master_addr is not this host's (203.0.113.7, TEST-NET-3: never a
// local address): planned without a word, then node 0 waited 30 s for its own store. Now
// a note; node 1 and a job of one node (whose store binds master_addr itself) get none.
TEST(LaunchPlanDevices, NodeZeroWhoseMasterAddrIsNotThisHostsGetsANote) {
  const std::string job = "[launch]\nnnodes = 2\nnproc_per_node = 1\nprogram = \"/bin/true\"\n"
                          "master_addr = \"203.0.113.7\"\n";
  const auto secret = testing::fake_env({{"ZDP_JOB_SECRET", "0123456789abcdef0123456789abcdef"}});
  for (const int node : {0, 1}) {
    launcher::PlanInputs in = inputs();
    in.node_rank = node;
    StatusOr<launcher::LaunchPlan> plan = launcher::make_plan(parsed(job), in, secret);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    std::string notes;
    for (const std::string& n : plan->notes) notes += n + "\n";
    const bool noted = notes.find("launch.master_addr = \"203.0.113.7\" is not an address of this host") != std::string::npos &&
                       notes.find("is this node 0") != std::string::npos;
    EXPECT_EQ(noted, node == 0) << "node " << node << ": " << notes;
  }
  StatusOr<launcher::LaunchPlan> local =
      launcher::make_plan(parsed("[launch]\nnnodes = 2\nnproc_per_node = 1\nprogram = \"/bin/true\"\nmaster_addr = \"127.0.0.1\"\n"),
                          inputs(), secret);
  ASSERT_TRUE(local.ok()) << local.status().to_string();
  EXPECT_TRUE(local->notes.empty()) << local->notes.front();
}

}  // namespace
}  // namespace zdp
