// Launchers joining a job (launcher/node_claim.h) over one store: every node takes node 0's
// run id (ZDP_RUN_ID, stored in each node's checkpoints: each node's own random one made
// per-node copies differ), a layout that differs and a node rank claimed twice are refused;
// a claim whose lease stopped (its launcher died) is taken over, the launcher it replaced
// learns it lost the node, a node that finished is never taken over, and node 0 names a
// launcher that is gone. A node whose config differs in a job-wide setting is refused
// naming the keys (settings_difference); per-node keys may differ.
#include "launcher/node_claim.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "launcher/settings_check.h"
#include "zdp/config.h"
#include "zdp/store.h"

namespace zdp::launcher {
namespace {

using std::chrono::milliseconds;

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

// A NodeLease's connections: views of one in-memory store, keys as they are.
class View final : public Store {
 public:
  explicit View(Store& base) : base_(base) {}
  Status set(const std::string& k, const std::string& v) override { return base_.set(k, v); }
  StatusOr<std::string> get(const std::string& k, milliseconds t) override { return base_.get(k, t); }
  StatusOr<int64_t> add(const std::string& k, int64_t d) override { return base_.add(k, d); }
  Status wait(const std::vector<std::string>& k, milliseconds t) override { return base_.wait(k, t); }
  StatusOr<bool> check(const std::vector<std::string>& k) override { return base_.check(k); }

 private:
  Store& base_;
};
NodeLease::Connect view_of(Store& store) {
  return [&store](const std::function<bool()>&) -> StatusOr<std::unique_ptr<Store>> {
    return std::unique_ptr<Store>(std::make_unique<View>(store));
  };
}

TEST(NodeClaim, EveryNodeTakesNodeZerosRunId) {
  InMemoryStore store;
  const milliseconds within(2000);
  int64_t epoch = 0;
  LaunchPlan zero = node(0, "0123456789abcdef"), one = node(1, "fedcba9876543210");
  ASSERT_TRUE(join_job(store, zero, within, &epoch).ok());
  ASSERT_TRUE(join_job(store, one, within, &epoch).ok());
  EXPECT_EQ(zero.run_id, "0123456789abcdef");
  EXPECT_EQ(one.run_id, "0123456789abcdef");
  const NodeLease alive(view_of(store), 1, epoch, [](const std::string&) {});  // node 1's launcher lives on
  LaunchPlan again = node(1, "");
  const Status twice = join_job(store, again, within, &epoch, milliseconds(1500));
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.message().find("node 1 has already joined"), std::string::npos) << twice.message();
  LaunchPlan other = node(1, "");
  other.nproc_per_node = 2;
  other.world_size = 4;
  EXPECT_NE(join_job(store, other, within, &epoch).message().find("node 0's plans 2 node(s) x 4 rank(s)"),
            std::string::npos);
}

// Node 1's launcher with another layout is refused and says so; node 0 said only that
// node 1 "never joined (no dp-launch ran with that node rank ...)": it names the refusal.
TEST(NodeClaim, NodeZeroNamesWhyANodeWasRefused) {
  InMemoryStore store;
  int64_t epoch = 0;
  LaunchPlan zero = node(0, "0123456789abcdef"), other = node(1, "");
  other.nproc_per_node = 2;
  other.world_size = 4;
  ASSERT_TRUE(join_job(store, zero, milliseconds(2000), &epoch).ok());
  ASSERT_FALSE(join_job(store, other, milliseconds(2000), &epoch).ok());
  const std::string missing = missing_launchers(store, 2, milliseconds(100));
  EXPECT_NE(missing.find("the launcher of node 1 reached the store and was refused: node 1: this launcher plans 2 "
                         "node(s) x 2 rank(s)"),
            std::string::npos)
      << missing;
  EXPECT_EQ(missing.find("never joined"), std::string::npos) << missing;
}

Config parsed(const std::string& text, const std::string& name) {
  StatusOr<Config> c = parse_config(text, name);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : Config();
}

LaunchPlan with_settings(LaunchPlan p, const Config& c) {
  p.settings = job_wide_settings(c);
  for (const auto& origin : c.origins) p.settings_where[origin.first] = c.where(origin.first);
  return p;
}

// Node 1's copy of the config trains with another evaluation interval and learning rate:
// refused before it claims its node rank, naming both keys, both values and where node 1
// set them; node 0 names the refusal. Its per-node keys (node rank, address, paths,
// environment) differ too and are not named; a node that differs only in those joins.
TEST(NodeClaim, ANodeWhoseConfigDiffersIsRefusedNamingTheKeys) {
  InMemoryStore store;
  int64_t epoch = 0;
  const char* common = "[optim]\nlr = 0.001\n[train]\neval_every = 10\n";
  const char* per_node = "[launch]\nnnodes = 2\nnode_rank = 1\nrank_addr = \"10.0.0.2\"\nlog_dir = \"/elsewhere\"\n"
                         "[launch.env]\nNCCL_IB_HCA = \"mlx5_1\"\n[checkpoint]\ndir = \"/mnt/b\"\n";
  LaunchPlan zero = with_settings(node(0, "0123456789abcdef"), parsed(std::string(common) + "[launch]\nnnodes = 2\n[checkpoint]\ndir = \"/mnt/a\"\n", "a.toml"));
  ASSERT_TRUE(join_job(store, zero, milliseconds(2000), &epoch).ok());
  LaunchPlan other = with_settings(
      node(1, ""), parsed(std::string("[optim]\nlr = 0.002\n[train]\neval_every = 20\n") + per_node, "b.toml"));
  const Status refused = join_job(store, other, milliseconds(2000), &epoch);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("node 1: this node's config differs from node 0's in settings every node must "
                                   "share: optim.lr = 0.002 here (b.toml:2:6), 0.001 on node 0; train.eval_every = "
                                   "20 here (b.toml:4:14), 10 on node 0. Give every node the same config"),
            std::string::npos)
      << refused.message();
  const std::string named = refused.message().substr(0, refused.message().find(". Give every node"));
  for (const char* per_node_key : {"node_rank", "rank_addr", "log_dir", "NCCL", "checkpoint.dir"}) {
    EXPECT_EQ(named.find(per_node_key), std::string::npos) << per_node_key << ": " << refused.message();
  }
  EXPECT_NE(missing_launchers(store, 2, milliseconds(100))
                .find("the launcher of node 1 reached the store and was refused: node 1: this node's config differs"),
            std::string::npos);
  LaunchPlan same = with_settings(node(1, ""), parsed(std::string(common) + per_node, "c.toml"));
  const Status joined = join_job(store, same, milliseconds(2000), &epoch);
  EXPECT_TRUE(joined.ok()) << joined.message();
}

// Every key is either job-wide or per-node (a per-node name that is no key, a misspelling,
// would make that key job-wide and refuse nodes for their own addresses).
TEST(NodeClaim, EveryKeyIsJobWideOrPerNode) {
  const std::string settings = job_wide_settings(Config());
  const std::string resolved = to_toml(Config());
  const std::set<std::string> paths = {"data.path", "data.val_path", "checkpoint.dir", "profile.dir"};
  for (const std::string& key : per_node_keys()) {
    // A path only as set or empty (an empty checkpoint.dir on one node skipped its saves).
    EXPECT_EQ(settings.find(key + " = "), paths.count(key) ? settings.find(key + " = empty\n") : std::string::npos)
        << key;
    const std::string section = "[" + key.substr(0, key.find('.')) + "]";
    const std::string name = key.substr(key.find('.') + 1);
    const size_t at = resolved.find(section);
    ASSERT_NE(at, std::string::npos) << key;
    EXPECT_NE(resolved.find("\n" + name + " = ", at), std::string::npos) << key << " is not a key";
  }
  for (const char* key : {"zero.stage", "train.seed", "model.d_model", "launch.master_port", "checkpoint.resume"}) {
    EXPECT_NE(settings.find(std::string(key) + " = "), std::string::npos) << key;
  }
  Config from_path = Config();
  from_path.checkpoint.resume = ResumeMode::kPath;
  from_path.checkpoint.resume_path = "/mnt/node1/ckpt/step-10";
  EXPECT_NE(job_wide_settings(from_path).find("checkpoint.resume = a checkpoint path\n"), std::string::npos);
  from_path.checkpoint.dir = "/mnt/node1/ckpt";
  EXPECT_NE(job_wide_settings(from_path).find("checkpoint.dir = a path\n"), std::string::npos);
  EXPECT_NE(settings_difference(job_wide_settings(from_path), job_wide_settings(Config()), {}).find(
                "checkpoint.dir = a path here (the default), empty on node 0"),
            std::string::npos);
}

// Node 0's text came over the network: a control character in it is printed escaped, a key
// only node 0 has is named, and past six differences the rest are counted.
TEST(NodeClaim, SettingsDifferencesAreBoundedAndPrintable) {
  EXPECT_EQ(settings_difference("a.x = 1\nb.y = 2\n", "a.x = 1\nb.y = 2\n", {}), "");
  const std::string odd = settings_difference("a.x = 1\n", "a.x = \x1b[2J\nz.new = 3\n", {{"a.x", "f.toml:2:5"}});
  EXPECT_EQ(odd, "a.x = 1 here (f.toml:2:5), \\x1b[2J on node 0; z.new = 3 on node 0, not a key here");
  std::string mine, theirs;
  for (int i = 0; i < 9; ++i) {
    mine += "k.k" + std::to_string(i) + " = 1\n";
    theirs += "k.k" + std::to_string(i) + " = 2\n";
  }
  const std::string many = settings_difference(mine, theirs, {});
  EXPECT_NE(many.find("k.k0 = 1 here (the default), 2 on node 0"), std::string::npos) << many;
  EXPECT_NE(many.find("; and 3 more"), std::string::npos) << many;
  EXPECT_EQ(many.find("k.k6"), std::string::npos) << many;
}

// A launcher that died (no NodeLease renewing its claim) leaves its node to a new one,
// which rejoins: the claim was held for good, and a lost node could never come back. A
// launcher that is alive keeps its node; one that comes back after it was taken over
// learns that it lost it (two launchers ran one node).
TEST(NodeClaim, AClaimWhoseLeaseStoppedIsTakenOverAndTheOldLauncherLearnsIt) {
  InMemoryStore store;
  const milliseconds within(2000);
  int64_t zero_epoch = 0, dead_epoch = 0, new_epoch = 0;
  LaunchPlan zero = node(0, "0123456789abcdef"), dead = node(1, "");
  ASSERT_TRUE(join_job(store, zero, within, &zero_epoch).ok());
  ASSERT_TRUE(join_job(store, dead, within, &dead_epoch).ok());  // and it stops renewing
  EXPECT_NE(missing_launchers(store, 2, milliseconds(100)).find("the launcher of node(s) 1 is gone"),
            std::string::npos);
  LaunchPlan replacement = node(1, "");
  const Status took = join_job(store, replacement, within, &new_epoch, milliseconds(200));
  ASSERT_TRUE(took.ok()) << took.message();
  EXPECT_EQ(replacement.run_id, "0123456789abcdef");
  EXPECT_GT(new_epoch, dead_epoch);
  std::atomic<bool> lost{false};
  {
    const NodeLease alive(view_of(store), 1, new_epoch, [](const std::string&) { ADD_FAILURE() << "lost"; });
    // The old launcher comes back: its first renewal sees the raised epoch.
    { const NodeLease back(view_of(store), 1, dead_epoch, [&](const std::string&) { lost = true; }); }
    EXPECT_TRUE(lost.load());
    LaunchPlan twin = node(1, "");
    int64_t twin_epoch = 0;
    const Status refused = join_job(store, twin, within, &twin_epoch, milliseconds(1500));
    EXPECT_NE(refused.message().find("node 1 has already joined"), std::string::npos) << refused.message();
    EXPECT_EQ(missing_launchers(store, 2, milliseconds(1500)), "");
  }
}

// A node whose ranks finished is never taken over: a rerun of it would join a job that is
// over for that node and fail it.
TEST(NodeClaim, ANodeThatFinishedIsNotTakenOver) {
  InMemoryStore store;
  int64_t epoch = 0;
  LaunchPlan zero = node(0, "0123456789abcdef"), one = node(1, "");
  ASSERT_TRUE(join_job(store, zero, milliseconds(2000), &epoch).ok());
  ASSERT_TRUE(join_job(store, one, milliseconds(2000), &epoch).ok());
  {
    NodeLease lease(view_of(store), 1, epoch, [](const std::string&) {});
    lease.finished();
  }
  LaunchPlan rerun = node(1, "");
  const Status refused = join_job(store, rerun, milliseconds(2000), &epoch, milliseconds(200));
  EXPECT_NE(refused.message().find("its launcher finished its part of it"), std::string::npos) << refused.message();
  EXPECT_EQ(missing_launchers(store, 2, milliseconds(100)), "");
  // Node 0's attempt, for a node that joins later.
  EXPECT_EQ(published_attempt(store), 0);
  ASSERT_TRUE(publish_attempt(store, 2).ok());
  EXPECT_EQ(published_attempt(store), 2);
}

// A second node 0 whose client reaches the running job's store (on another host: its own
// store is its own, master_addr leads elsewhere) wrote its run id and layout there before
// its claim was refused, and a node that joined later took that run id. It is refused
// before it writes anything. A launcher that reconnects checks the store is still its run's
// (a node 0 restarted since is a new run: check_same_run).
TEST(NodeClaim, ASecondNodeZeroChangesNothingAndAReconnectionChecksTheRun) {
  InMemoryStore store;
  int64_t epoch = 0;
  LaunchPlan zero = node(0, "0123456789abcdef"), one = node(1, "");
  ASSERT_TRUE(join_job(store, zero, milliseconds(2000), &epoch).ok());
  ASSERT_TRUE(join_job(store, one, milliseconds(2000), &epoch).ok());
  LaunchPlan twin = node(0, "aaaaaaaaaaaaaaaa");
  twin.nproc_per_node = 2;  // another layout too
  twin.world_size = 4;
  const Status refused = join_job(store, twin, milliseconds(2000), &epoch);
  EXPECT_NE(refused.message().find("node 0 has already joined the job"), std::string::npos) << refused.message();
  LaunchPlan late = node(1, "");
  const Status joined = join_job(store, late, milliseconds(2000), &epoch, milliseconds(200));  // takes node 1 over
  ASSERT_TRUE(joined.ok()) << joined.message();
  EXPECT_EQ(late.run_id, "0123456789abcdef");
  EXPECT_TRUE(check_same_run(store, "0123456789abcdef").ok());
  const Status other = check_same_run(store, "fedcba9876543210");
  EXPECT_EQ(other.code(), StatusCode::kPeerFailure);
  EXPECT_NE(other.message().find("another run (id 0123456789abcdef), not this job's (fedcba9876543210): node 0's "
                                 "launcher was restarted"),
            std::string::npos)
      << other.message();
  InMemoryStore restarted;
  EXPECT_NE(check_same_run(restarted, "0123456789abcdef").message().find("holds no run yet"), std::string::npos);
}

}  // namespace
}  // namespace zdp::launcher
