// The launch environment and the launch plan with faked environments (torchrun, Slurm).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "launcher/launch_plan.h"
#include "zdp/launch_env.h"
#include "testing/fake_env.h"
#include "tests/unit/launch_plan_inputs.h"

namespace zdp {
namespace {

EnvLookup fake(const std::map<std::string, std::string>& vars) { return testing::fake_env(vars); }

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
  EXPECT_EQ(env->node_rank, 1);  // rank / LOCAL_WORLD_SIZE without GROUP_RANK
}

// A rank's node (zero.compress = "inter-node"): GROUP_RANK (dp-launch, torchrun) beats
// the rank / LOCAL_WORLD_SIZE default; Slurm says SLURM_NODEID; out of range is refused.
TEST(LaunchEnv, NodeRank) {
  std::map<std::string, std::string> vars = {{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"},
                                             {"MASTER_PORT", "29501"}, {"GROUP_RANK", "0"},
                                             {"ZDP_JOB_SECRET", "0123456789abcdef"}};
  auto env = read_launch_env(fake(vars));
  ASSERT_TRUE(env.ok()) << env.status().to_string();
  EXPECT_EQ(env->node_rank, 0);
  vars["GROUP_RANK"] = "8";
  env = read_launch_env(fake(vars));
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("node rank 8"), std::string::npos) << env.status().message();
  env = read_launch_env(fake({{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "2"},
                              {"SLURM_NODEID", "1"}, {"SLURM_TASKS_PER_NODE", "4(x2)"},
                              {"SLURM_JOB_NODELIST", "gpu[07-08]"}, {"ZDP_JOB_SECRET", "0123456789abcdef"}}));
  ASSERT_TRUE(env.ok()) << env.status().to_string();
  EXPECT_EQ(env->node_rank, 1);
}

TEST(LaunchEnv, WhoHostsTheStore) {
  const std::map<std::string, std::string> five = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"},
                                                   {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "gpu07"},
                                                   {"MASTER_PORT", "29500"}};
  auto plain = read_launch_env(fake(five));
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_TRUE(plain->rank0_hosts_store);
  EXPECT_EQ(plain->store_host, "127.0.0.1") << "one node: loopback, whatever MASTER_ADDR says";
  EXPECT_EQ(plain->store_port, 29500);
  // Without LOCAL_WORLD_SIZE a MASTER_ADDR that is not loopback may be another node: it
  // was taken as one node, rank 0's store on loopback, and the other nodes' ranks hung.
  std::map<std::string, std::string> unsized = five;
  unsized.erase("LOCAL_WORLD_SIZE");
  auto refused = read_launch_env(fake(unsized));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("LOCAL_WORLD_SIZE is not set, and MASTER_ADDR=gpu07 is not loopback"),
            std::string::npos) << refused.status().message();
  unsized.erase("LOCAL_RANK");  // a process per node (a pod each): each rank its own node
  unsized["ZDP_JOB_SECRET"] = "0123456789abcdef";
  auto pods = read_launch_env(fake(unsized));
  ASSERT_TRUE(pods.ok()) << pods.status().to_string();
  EXPECT_EQ(pods->local_world_size, 1);
  EXPECT_EQ(pods->node_rank, 1);
  EXPECT_EQ(pods->store_host, "gpu07");
  unsized["MASTER_ADDR"] = "127.0.0.1";  // loopback: one node
  unsized["LOCAL_RANK"] = "1";
  auto loopback = read_launch_env(fake(unsized));
  ASSERT_TRUE(loopback.ok()) << loopback.status().to_string();
  EXPECT_EQ(loopback->local_world_size, 2);
  // A world of one needs no MASTER_PORT (its store is in memory).
  auto alone = read_launch_env(fake({{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  ASSERT_TRUE(alone.ok()) << alone.status().to_string();
  EXPECT_EQ(alone->store_port, 0);

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
                                   {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_JOB_NODELIST", "gpu[05-08]"}, {"SLURM_STEP_NODELIST", "gpu[07-08]"},
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
  EXPECT_EQ(*first_slurm_host("rack[1-2]-n[01-04],x"), "rack1-n01");  // every bracket group (was rack1-n[01-04])
  EXPECT_FALSE(first_slurm_host("a[1]-b[").ok());
  EXPECT_FALSE(first_slurm_host("").ok());
  EXPECT_FALSE(first_slurm_host("x[").ok());
}

using launch_plan_testing::parsed;

using launch_plan_testing::inputs;

TEST(LaunchPlan, SlurmDerivesTheNodeLayoutAndMaster) {
  Config c = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n");
  auto plan = launcher::make_plan(c, inputs(), fake({{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "1"},
                                                     {"SLURM_JOB_NODELIST", "gpu[05-08]"}, {"SLURM_STEP_NODELIST", "gpu[07-08]"},
                                                     {"ZDP_JOB_SECRET", "0123456789abcdef"}}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->nnodes, 2);
  EXPECT_EQ(plan->node_rank, 1);
  EXPECT_EQ(plan->world_size, 4);
  EXPECT_EQ(plan->master_addr, "gpu07");
  EXPECT_EQ(plan->bind_host, "::");  // a host name: dual-stack (it may resolve to IPv6 elsewhere)
  EXPECT_EQ(plan->threads_per_rank, 4);
  const auto ranks = plan->local_ranks(c, 0);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1].rank, 3);
  EXPECT_EQ(ranks[1].env.at("RANK"), "3");
  EXPECT_EQ(ranks[1].env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(ranks[1].env.at("WORLD_SIZE"), "4");
  EXPECT_EQ(ranks[1].env.at("MASTER_ADDR"), "gpu07");
  EXPECT_EQ(ranks[1].env.at("OMP_NUM_THREADS"), "4");
  // The run's id, the same in every attempt (restarts resume from the run's own checkpoints).
  EXPECT_EQ(plan->run_id.size(), 16u);
  EXPECT_EQ(plan->local_ranks(c, 1)[0].env.at("ZDP_RUN_ID"), ranks[0].env.at("ZDP_RUN_ID"));
  EXPECT_EQ(read_launch_env(fake(ranks[0].env))->run_id, plan->run_id);
  EXPECT_NE(read_launch_env(fake({{"ZDP_RUN_ID", "a b"}})).status().message().find("ZDP_RUN_ID=\"a b\" is not"),
            std::string::npos);
  // Nodes may share the log folder: each reads its own resolved config.
  EXPECT_EQ(plan->config_file, "/tmp/x/config.node-1.toml");
  EXPECT_EQ(ranks[1].env.at("ZDP_CONFIG"), "/tmp/x/config.node-1.toml");
  // --node-rank beats SLURM_NODEID, and the layout's origin says so (--dry-run printed
  // "this is node 0 (layout from Slurm (..., SLURM_NODEID=1))").
  launcher::PlanInputs flagged = inputs();
  flagged.node_rank = 0;
  auto overridden = launcher::make_plan(c, flagged, fake({{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "1"},
                                                          {"SLURM_JOB_NODELIST", "gpu[07-08]"},
                                                          {"ZDP_JOB_SECRET", "0123456789abcdef"}}));
  ASSERT_TRUE(overridden.ok()) << overridden.status().to_string();
  EXPECT_EQ(overridden->node_rank, 0);
  EXPECT_NE(overridden->layout_origin.find("SLURM_NODEID=1), node rank from --node-rank"), std::string::npos)
      << overridden->layout_origin;
}

// A Slurm value that is not a number in range is refused naming the variable: it fell back
// to the config's one-node layout without a word (each node a job of its own), or blamed
// the config ("world size (0) must be >= 1") for Slurm's count.
TEST(LaunchPlan, SlurmValuesOutOfRangeAreRefusedByName) {
  Config c = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n");
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> bad = {
      {{{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "x1"}}, "SLURM_NODEID=\"x1\" is not a node rank in [0, SLURM_NNODES = 2)"},
      {{{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "2"}}, "SLURM_NODEID=\"2\" is not a node rank"},
      {{{"SLURM_NNODES", "99999999999"}, {"SLURM_NODEID", "0"}}, "SLURM_NNODES=\"99999999999\" is not a node count"},
      {{{"SLURM_NNODES", "-3"}, {"SLURM_NODEID", "0"}}, "SLURM_NNODES=\"-3\" is not a node count in [1, 1048576]"},
      {{{"SLURM_NNODES", "0"}, {"SLURM_NODEID", "0"}}, "SLURM_NNODES=\"0\" is not a node count"}};
  for (const auto& [vars, message] : bad) {
    auto plan = launcher::make_plan(c, inputs(), fake(vars));
    ASSERT_FALSE(plan.ok()) << message;
    EXPECT_NE(plan.status().message().find(message), std::string::npos) << plan.status().message();
  }
}

// A loopback master_addr from the config under a Slurm job of several nodes is refused by
// its key (the shipped configs once set 127.0.0.1, which beat Slurm's node list).
TEST(LaunchPlan, ALoopbackMasterAddrUnderSlurmsNodesIsRefused) {
  Config c = parsed("[launch]\nnproc_per_node = 2\nmaster_addr = \"127.0.0.1\"\nprogram = \"/bin/true\"\n");
  auto plan = launcher::make_plan(c, inputs(), fake({{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "0"},
                                                     {"SLURM_JOB_NODELIST", "gpu[07-08]"},
                                                     {"ZDP_JOB_SECRET", "0123456789abcdef"}}));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("test.toml:3:15: launch.master_addr 127.0.0.1 is loopback, but Slurm runs this job on 2 nodes"),
            std::string::npos)
      << plan.status().message();
}

EnvLookup slurm_node(const char* node_id) {
  return fake({{"SLURM_NNODES", "2"}, {"SLURM_NODEID", node_id}, {"SLURM_JOB_NODELIST", "gpu[07-08]"},
               {"ZDP_JOB_SECRET", "0123456789abcdef"}});
}

// --node-rank is a deliberate per-node flag: it beats SLURM_NODEID, and a launch.node_rank
// that contradicts Slurm too.
TEST(LaunchPlan, NodeRankFlagBeatsSlurm) {
  Config c = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n");
  launcher::PlanInputs in = inputs();
  in.node_rank = 0;
  auto plan = launcher::make_plan(c, in, slurm_node("1"));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->node_rank, 0);
  EXPECT_EQ(plan->local_ranks(c, 0)[0].env.at("RANK"), "0");
  Config contradicting = parsed("[launch]\nnproc_per_node = 2\nnnodes = 2\nnode_rank = 1\nprogram = \"/bin/true\"\n");
  auto flagged = launcher::make_plan(contradicting, in, slurm_node("1"));
  ASSERT_TRUE(flagged.ok()) << flagged.status().to_string();
  EXPECT_EQ(flagged->node_rank, 0);
}

// Like launch.nnodes against SLURM_NNODES: a launch.node_rank from the config (file or
// --set) must agree with SLURM_NODEID, or the plan names both; left out, Slurm decides.
TEST(LaunchPlan, ConfigNodeRankMustAgreeWithSlurm) {
  Config wrong = parsed("[launch]\nnproc_per_node = 2\nnnodes = 2\nnode_rank = 0\nprogram = \"/bin/true\"\n");
  auto refused = launcher::make_plan(wrong, inputs(), slurm_node("1"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("test.toml:4:13: launch.node_rank (0) contradicts SLURM_NODEID (1)"),
            std::string::npos)
      << refused.status().message();
  Config set = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n", {"launch.nnodes=2", "launch.node_rank=0"});
  auto by_set = launcher::make_plan(set, inputs(), slurm_node("1"));
  ASSERT_FALSE(by_set.ok());
  EXPECT_NE(by_set.status().message().find("--set launch.node_rank=0: launch.node_rank (0) contradicts"),
            std::string::npos)
      << by_set.status().message();
  Config agreeing = parsed("[launch]\nnproc_per_node = 2\nnnodes = 2\nnode_rank = 1\nprogram = \"/bin/true\"\n");
  auto plan = launcher::make_plan(agreeing, inputs(), slurm_node("1"));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->node_rank, 1);
  Config unset = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n");
  auto from_slurm = launcher::make_plan(unset, inputs(), slurm_node("1"));
  ASSERT_TRUE(from_slurm.ok()) << from_slurm.status().to_string();
  EXPECT_EQ(from_slurm->node_rank, 1);
}

TEST(LaunchPlan, SingleNodeStaysOnLoopback) {
  Config c = parsed("[launch]\nnproc_per_node = 3\nprogram = \"/bin/true\"\n", {"train.global_batch=6"});
  launcher::PlanInputs in = inputs();
  auto plan = launcher::make_plan(c, in, fake({}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->bind_host, "127.0.0.1");
  EXPECT_EQ(plan->secret.size(), 32u);  // generated
  EXPECT_EQ(plan->world_size, 3);
  // Gloo ranks advertise loopback: the address that routes to master_addr 127.0.0.1.
  EXPECT_EQ(plan->rank_address.address, "127.0.0.1");
  EXPECT_EQ(plan->rank_address.origin, "the local address routing to master_addr 127.0.0.1");
  EXPECT_EQ(plan->local_ranks(c, 0)[0].env.count("GLOO_SOCKET_IFNAME"), 0u);
}

// launch.socket_ifname reaches every library that opens sockets (Gloo through the config
// and GLOO_SOCKET_IFNAME, NCCL through NCCL_SOCKET_IFNAME); launch.env still wins.
TEST(LaunchPlan, SocketIfnameIsPassedToGlooAndNccl) {
  Config c = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\nsocket_ifname = \"lo\"\n");
  auto plan = launcher::make_plan(c, inputs(), fake({}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->rank_address.iface, "lo");
  EXPECT_EQ(plan->rank_address.origin, "launch.socket_ifname");
  const auto ranks = plan->local_ranks(c, 0);
  EXPECT_EQ(ranks[1].env.at("GLOO_SOCKET_IFNAME"), "lo");
  EXPECT_EQ(ranks[1].env.at("NCCL_SOCKET_IFNAME"), "lo");
  Config own = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\nsocket_ifname = \"lo\"\n"
                      "env = { NCCL_SOCKET_IFNAME = \"ib0\" }\n");
  EXPECT_EQ(launcher::make_plan(own, inputs(), fake({}))->local_ranks(own, 0)[0].env.at("NCCL_SOCKET_IFNAME"), "ib0");
  EXPECT_NE(launcher::describe_plan(*plan, c).find("# ranks advertise to their peers: the address of interface lo "
                                                   "(launch.socket_ifname)"),
            std::string::npos)
      << launcher::describe_plan(*plan, c);
}

// --dry-run of an NCCL job names the interface the ranks will get: launch.env's
// NCCL_SOCKET_IFNAME beats launch.socket_ifname (it printed socket_ifname's).
TEST(LaunchPlan, DryRunNamesTheNcclInterfaceTheRanksGet) {
  Config c = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\nbackend = \"nccl\"\n"
                    "socket_ifname = \"lo\"\nenv = { NCCL_SOCKET_IFNAME = \"ib0\" }\n");
  launcher::PlanInputs in = inputs();
  in.dry_run = true;
  in.cuda_devices = 2;
  auto plan = launcher::make_plan(c, in, fake({}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const std::string text = launcher::describe_plan(*plan, c);
  EXPECT_NE(text.find("# NCCL chooses its interface: NCCL_SOCKET_IFNAME=ib0 (launch.env)"), std::string::npos) << text;
  EXPECT_EQ(plan->local_ranks(c, 0)[0].env.at("NCCL_SOCKET_IFNAME"), "ib0");
}

// An interface or address this host lacks is a config error before anything starts,
// naming the key and where it was set; GLOO_SOCKET_IFNAME is checked the same way.
TEST(LaunchPlan, RankAddressesThisHostLacksAreRefused) {
  Config no_if = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\nsocket_ifname = \"zdpnosuch0\"\n");
  auto a = launcher::make_plan(no_if, inputs(), fake({}));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("test.toml:4:17: launch.socket_ifname = \"zdpnosuch0\": this host has no such "
                                      "network interface"),
            std::string::npos)
      << a.status().message();
  // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of this host.
  Config foreign = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n", {"launch.rank_addr=192.0.2.77"});
  auto b = launcher::make_plan(foreign, inputs(), fake({}));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("--set launch.rank_addr=192.0.2.77: launch.rank_addr = \"192.0.2.77\" is not "
                                      "an address of this host"),
            std::string::npos)
      << b.status().message();
  Config plain = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n");
  auto c = launcher::make_plan(plain, inputs(), fake({{"GLOO_SOCKET_IFNAME", "zdpnosuch0,lo"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("environment: GLOO_SOCKET_IFNAME = \"zdpnosuch0\": this host has no such"),
            std::string::npos)
      << c.status().message();
  Config local = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n", {"launch.rank_addr=127.0.0.1"});
  auto d = launcher::make_plan(local, inputs(), fake({}));
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->rank_address.address, "127.0.0.1");
  EXPECT_EQ(d->rank_address.origin, "launch.rank_addr");
}

// Gloo ranks compute on the CPU, which has only an fp32 GEMM: a 16-bit model.dtype is a
// config error before any rank starts (dry-run too), naming where the key was set.
// Another program may compute in 16 bits on the CPU as it likes.
TEST(LaunchPlan, SixteenBitComputeOnCpuRanksIsRefused) {
  char dir_template[] = "/tmp/zdp-launch-plan-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string program = dir + "/dp-train";  // a stand-in: only its name and mode matter here
  { std::ofstream(program) << "#!/bin/sh\n"; }
  ASSERT_EQ(chmod(program.c_str(), 0755), 0);
  for (const char* dtype : {"fp16", "bf16"}) {
    Config c = parsed("[launch]\nnproc_per_node = 2\nprogram = \"" + program + "\"\n[model]\ndtype = \"" + dtype +
                      "\"\n");
    auto plan = launcher::make_plan(c, inputs(), fake({}));  // no CUDA device: "auto" resolves to gloo
    ASSERT_FALSE(plan.ok()) << dtype;
    EXPECT_NE(plan.status().message().find(std::string("test.toml:5:9: model.dtype = \"") + dtype +
                                           "\" needs GPU ranks (backend nccl), but this job's ranks use the CPU"),
              std::string::npos)
        << plan.status().message();
  }
  Config fp32 = parsed("[launch]\nnproc_per_node = 2\nprogram = \"" + program + "\"\n[model]\ndtype = \"fp32\"\n");
  EXPECT_TRUE(launcher::make_plan(fp32, inputs(), fake({})).ok());
  // GPU ranks (a CUDA device, backend auto -> nccl) may compute in bf16 (the gpt; the mlp: dp_train_checks_test).
  Config gpu = parsed("[launch]\nprogram = \"" + program + "\"\n[model]\nkind = \"gpt\"\ndtype = \"bf16\"");
  launcher::PlanInputs with_gpu = inputs();
  with_gpu.cuda_devices = 1;
  auto g = launcher::make_plan(gpu, with_gpu, fake({}));
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  Config own = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n[model]\ndtype = \"bf16\"\n");
  EXPECT_TRUE(launcher::make_plan(own, inputs(), fake({})).ok());
  std::filesystem::remove_all(dir);
}

// A GPU config plans (--dry-run) on a machine without GPUs; the launch itself refuses.
TEST(LaunchPlan, DryRunOfAGpuJobWorksWithoutGpus) {
  Config c = parsed("[launch]\nnproc_per_node = 4\nbackend = \"nccl\"\nprogram = \"/bin/true\"\n", {"train.global_batch=8"});
  auto launch = launcher::make_plan(c, inputs(), fake({}));
  ASSERT_FALSE(launch.ok());
  EXPECT_NE(launch.status().message().find("test.toml:3:11: launch.backend is \"nccl\" but this machine has no CUDA device"),
            std::string::npos)
      << launch.status().message();
  launcher::PlanInputs dry = inputs();
  dry.dry_run = true;
  auto plan = launcher::make_plan(c, dry, fake({}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->backend, Backend::kNccl);
  EXPECT_EQ(plan->world_size, 4);
  EXPECT_NE(launcher::describe_plan(*plan, c).find("# note: test.toml:3:11: launch.backend is \"nccl\" but this machine "
                                                   "has no CUDA device: the launch itself would stop here; the plan is "
                                                   "for a node with 4 GPU(s)"),
            std::string::npos)
      << launcher::describe_plan(*plan, c);
}

// A multi-node dry run on a login node (the gpu-gpt2 config's recipe) needs no secret
// yet: the launch would stop, the dry run says so and prints the plan.
TEST(LaunchPlan, AMultiNodeDryRunWithoutASecretIsANote) {
  Config c = parsed("[launch]\nnproc_per_node = 2\nnnodes = 2\nprogram = \"/bin/true\"\n");
  launcher::PlanInputs dry = inputs();
  dry.dry_run = true;
  auto plan = launcher::make_plan(c, dry, fake({}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_NE(launcher::describe_plan(*plan, c).find("# note: a job of 2 nodes needs the same ZDP_JOB_SECRET"),
            std::string::npos) << launcher::describe_plan(*plan, c);
  EXPECT_FALSE(launcher::make_plan(c, inputs(), fake({})).ok()) << "the launch itself still refuses";
}

// A directory passes access(X_OK): it passed the checks and --dry-run, then failed to
// spawn in every rank, restarted for nothing.
TEST(LaunchPlan, ADirectoryIsNotAProgram) {
  Config c = parsed("[launch]\nnproc_per_node = 1\nprogram = \"/tmp\"\n");
  auto plan = launcher::make_plan(c, inputs(), fake({}));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("test.toml:3:11: launch.program '/tmp' is not an executable file"),
            std::string::npos) << plan.status().message();
}

TEST(LaunchPlan, ProblemsAreListedTogether) {
  Config c = parsed("[launch]\nnproc_per_node = 2\nnnodes = 2\nnode_rank = 1\nprogram = \"/no/such\"\n");
  launcher::PlanInputs in = inputs();
  in.node_rank = 5;
  auto plan = launcher::make_plan(c, in, fake({}));
  ASSERT_FALSE(plan.ok());
  const std::string m = plan.status().message();
  EXPECT_NE(m.find("--node-rank: node rank 5 is not in [0, nnodes = 2) (launch.nnodes)"), std::string::npos) << m;
  EXPECT_NE(m.find("ZDP_JOB_SECRET"), std::string::npos) << m;
  EXPECT_NE(m.find("/no/such"), std::string::npos) << m;
}

}  // namespace
}  // namespace zdp
