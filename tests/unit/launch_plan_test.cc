// The launch environment and the launch plan with faked environments (torchrun, Slurm).
#include <gtest/gtest.h>

#include <map>

#include "launcher/launch_plan.h"
#include "zdp/launch_env.h"

namespace zdp {
namespace {

EnvLookup fake(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchEnv, TorchrunVariables) {
  auto env = read_launch_env(fake({{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"},
                                   {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29501"}, {"ZDP_ATTEMPT", "2"},
                                   {"ZDP_JOB_SECRET", "0123456789abcdef"}}));
  ASSERT_TRUE(env.ok()) << env.status().to_string();
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->master_addr, "node0");
  EXPECT_EQ(env->master_port, 29501);
  EXPECT_EQ(env->attempt, 2);
  // Without dp-launch over two nodes: rank 0 hosts the store at MASTER_ADDR:MASTER_PORT.
  EXPECT_TRUE(env->rank0_hosts_store);
  EXPECT_EQ(env->store_host, "node0");
  EXPECT_EQ(env->store_port, 29501);
  EXPECT_EQ(env->origin, "RANK/WORLD_SIZE");
}

TEST(LaunchEnv, WhoHostsTheStore) {
  const std::map<std::string, std::string> five = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"},
                                                   {"MASTER_ADDR", "gpu07"}, {"MASTER_PORT", "29500"}};
  auto plain = read_launch_env(fake(five));
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_TRUE(plain->rank0_hosts_store);
  EXPECT_EQ(plain->store_host, "127.0.0.1") << "one node: loopback, whatever MASTER_ADDR says";
  EXPECT_EQ(plain->store_port, 29500);

  auto with = [&](std::map<std::string, std::string> extra) {
    extra.insert(five.begin(), five.end());
    return read_launch_env(fake(extra));
  };
  auto torchrun = with({{"TORCHELASTIC_RUN_ID", "job"}});
  ASSERT_TRUE(torchrun.ok());
  EXPECT_EQ(torchrun->origin, "torchrun");
  EXPECT_EQ(torchrun->store_port, 29501) << "torchrun's agent holds MASTER_PORT";
  EXPECT_EQ(with({{"TORCHELASTIC_RUN_ID", "job"}, {"ZDP_STORE_PORT", "4000"}})->store_port, 4000);

  auto launched = with({{"ZDP_LAUNCHER", "dp-launch"}});
  ASSERT_TRUE(launched.ok());
  EXPECT_FALSE(launched->rank0_hosts_store);
  EXPECT_EQ(launched->store_host, "gpu07");
  EXPECT_EQ(launched->store_port, 29500);

  auto nodes = with({{"LOCAL_WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}});
  ASSERT_FALSE(nodes.ok());
  EXPECT_NE(nodes.status().message().find("export the same ZDP_JOB_SECRET on every node"), std::string::npos)
      << nodes.status().message();
  EXPECT_FALSE(with({{"ZDP_STORE_PORT", "70000"}}).ok());
}

TEST(LaunchEnv, NothingSetIsAWorldOfOne) {
  auto env = read_launch_env(fake({}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->master_port, 0);
  EXPECT_EQ(env->origin, "single process");
}

TEST(LaunchEnv, InconsistentValuesNameTheVariables) {
  auto env = read_launch_env(fake({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_PORT", "x"}}));
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("MASTER_PORT=\"x\" is not an integer"), std::string::npos)
      << env.status().message();
  auto env2 = read_launch_env(fake({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_PORT", "1"}}));
  EXPECT_NE(env2.status().message().find("rank 4 is not in a world of 4"), std::string::npos);
}

TEST(LaunchEnv, SlurmTasksWithoutALauncher) {
  auto env = read_launch_env(fake({{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "2"},
                                   {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_JOB_NODELIST", "gpu[07-08]"},
                                   {"ZDP_JOB_SECRET", "0123456789abcdef"}}));
  ASSERT_TRUE(env.ok()) << env.status().to_string();
  EXPECT_EQ(env->rank, 6);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->master_addr, "gpu07");
  EXPECT_EQ(env->master_port, 29500);
}

TEST(SlurmNodelist, FirstHost) {
  EXPECT_EQ(*first_slurm_host("gpu[07-09,12],cpu1"), "gpu07");
  EXPECT_EQ(*first_slurm_host("node3,node4"), "node3");
  EXPECT_EQ(*first_slurm_host("a[1,3]-ib"), "a1-ib");
  EXPECT_FALSE(first_slurm_host("").ok());
  EXPECT_FALSE(first_slurm_host("x[").ok());
}

Config parsed(const std::string& text, const std::vector<std::string>& sets = {}) {
  StatusOr<Config> c = parse_config(text, "test.toml", sets);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : Config{};
}

launcher::PlanInputs inputs() {
  launcher::PlanInputs in;
  in.cpu_cores = 8;
  in.config_file = "/tmp/x/config.toml";
  return in;
}

TEST(LaunchPlan, SlurmDerivesTheNodeLayoutAndMaster) {
  Config c = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n");
  auto plan = launcher::make_plan(c, inputs(), fake({{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "1"},
                                                     {"SLURM_JOB_NODELIST", "gpu[07-08]"},
                                                     {"ZDP_JOB_SECRET", "s"}}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->nnodes, 2);
  EXPECT_EQ(plan->node_rank, 1);
  EXPECT_EQ(plan->world_size, 4);
  EXPECT_EQ(plan->master_addr, "gpu07");
  EXPECT_EQ(plan->bind_host, "0.0.0.0");
  EXPECT_EQ(plan->threads_per_rank, 4);
  const auto ranks = plan->local_ranks(c, 0);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1].rank, 3);
  EXPECT_EQ(ranks[1].env.at("RANK"), "3");
  EXPECT_EQ(ranks[1].env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(ranks[1].env.at("WORLD_SIZE"), "4");
  EXPECT_EQ(ranks[1].env.at("MASTER_ADDR"), "gpu07");
  EXPECT_EQ(ranks[1].env.at("OMP_NUM_THREADS"), "4");
}

TEST(LaunchPlan, NodeRankFlagBeatsSlurmAndSingleNodeStaysOnLoopback) {
  Config c = parsed("[launch]\nnproc_per_node = 3\nprogram = \"/bin/true\"\n", {"train.global_batch=6"});
  launcher::PlanInputs in = inputs();
  auto plan = launcher::make_plan(c, in, fake({}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->bind_host, "127.0.0.1");
  EXPECT_EQ(plan->secret.size(), 32u);  // generated
  EXPECT_EQ(plan->world_size, 3);
}

TEST(LaunchPlan, ProblemsAreListedTogether) {
  Config c = parsed("[launch]\nnproc_per_node = 2\nnnodes = 2\nnode_rank = 1\nprogram = \"/no/such\"\n");
  launcher::PlanInputs in = inputs();
  in.node_rank = 5;
  auto plan = launcher::make_plan(c, in, fake({}));
  ASSERT_FALSE(plan.ok());
  const std::string m = plan.status().message();
  EXPECT_NE(m.find("node rank 5 is not in [0, nnodes = 2)"), std::string::npos) << m;
  EXPECT_NE(m.find("ZDP_JOB_SECRET"), std::string::npos) << m;
  EXPECT_NE(m.find("/no/such"), std::string::npos) << m;
}

}  // namespace
}  // namespace zdp
