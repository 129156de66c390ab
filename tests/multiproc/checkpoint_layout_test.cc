// Per-node checkpoint storage on a rank layout it cannot serve: nodes must hold
// LOCAL_WORLD_SIZE consecutive ranks, as the engine's per-node save needs. Ranks dealt
// to 2 nodes cyclically (Slurm's --distribution=cyclic: ranks 0 and 2 on node 0) left
// node 1's resume key unwritten, and rank 0 waited out the collective timeout (120 s
// here, with the check disabled); now every rank says why at once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "testing/engine_runs.h"
#include "testing/temp_dir.h"
#include "trainer/loop/train_loop.h"
#include "zdp/context.h"

namespace zdp::trainer {
namespace {

TEST(CheckpointLayout, PerNodeResumeRefusesRanksNotInConsecutiveNodesAtOnce) {
  testing::TempDir dir;
  Config c;
  c.model.kind = ModelKind::kMlp;
  c.model.n_layers = 2;
  c.model.d_model = 32;
  c.model.vocab_size = 10;
  c.train.global_batch = 16;
  c.train.micro_batch = 2;
  c.train.steps = 4;
  c.train.log_every = 1000;
  c.checkpoint.storage = CheckpointStorage::kPerNode;
  c.checkpoint.dir = dir.file("cyclic");
  c.launch.collective_timeout_s = 120;
  const std::string report = dir.file("rank0.txt");
  const auto start = std::chrono::steady_clock::now();
  const std::string failures =
      testing::describe_failures(testing::fork_ranks(4, [&](int rank, int k, Store& store) -> Status {
        std::unique_ptr<Device> device = create_cpu_device();
        CommOptions options;
        options.timeout = std::chrono::seconds(120);
        ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                             create_gloo_communicator(store, rank, k, *device, options));
        LaunchEnv env;
        env.rank = rank, env.world_size = k, env.local_world_size = 2;
        env.node_rank = rank % 2, env.local_rank = rank / 2;  // cyclic
        env.origin = "fork_ranks";
        Context ctx = Context::assemble(env, c, std::make_unique<PrefixStore>("test", store), std::move(device),
                                        std::move(comm), options.timeout);
        TrainOptions quiet;
        quiet.out = std::fopen("/dev/null", "w");
        StatusOr<TrainSummary> s = train(ctx, c, quiet);
        std::fclose(quiet.out);
        if (rank == 0) std::ofstream(report) << s.status().to_string();
        return s.status();
      }));
  EXPECT_NE(failures, "");
  std::stringstream text;
  text << std::ifstream(report).rdbuf();
  EXPECT_NE(text.str().find("needs nodes of LOCAL_WORLD_SIZE consecutive ranks"), std::string::npos) << text.str();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

}  // namespace
}  // namespace zdp::trainer
