// The launch plan's view of the config (launcher/launch_plan.h): the world size the config
// is loaded with, the settings dp-train's ranks will not use, and --dry-run's command
// lines as a shell reads them back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "launcher/launch_plan.h"
#include "runtime/internal/token_header.h"
#include "testing/temp_dir.h"
#include "zdp/launch_env.h"
#include "testing/fake_env.h"
#include "tests/unit/launch_plan_inputs.h"

namespace zdp {
namespace {

EnvLookup fake(const std::map<std::string, std::string>& vars) { return testing::fake_env(vars); }

using launch_plan_testing::parsed;

using launch_plan_testing::inputs;

// Keys that do nothing for dp-train in this config are said before the launch (and in
// --dry-run); another program reads the model, data and loop keys as it likes.
TEST(LaunchPlan, DpTrainsInertSettingsAreNotes) {
  testing::TempDir dir;
  const std::string dp_train = dir.file("dp-train");
  std::filesystem::copy_file("/bin/true", dp_train, std::filesystem::copy_options::overwrite_existing);
  const std::string rest = "nproc_per_node = 2\n[zero]\nstage = 2\nprefetch_layers = 3\n";
  Config c = parsed("[launch]\nprogram = \"" + dp_train + "\"\n" + rest);
  auto plan = launcher::make_plan(c, inputs(), fake({}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  ASSERT_EQ(plan->inert.size(), 1u);
  EXPECT_EQ(plan->inert[0], "test.toml:6:19: zero.prefetch_layers has no effect: only zero.stage = 3 gathers "
                            "parameters ahead of use (zero.stage is 2)");
  EXPECT_NE(launcher::describe_plan(*plan, c).find("# note: " + plan->inert[0]), std::string::npos)
      << launcher::describe_plan(*plan, c);
  Config other = parsed("[launch]\nprogram = \"/bin/true\"\n" + rest);
  auto other_plan = launcher::make_plan(other, inputs(), fake({}));
  ASSERT_TRUE(other_plan.ok()) << other_plan.status().to_string();
  EXPECT_TRUE(other_plan->inert.empty());
}

// zero.compress = "inter-node" on one node quantizes nothing: said before the launch
// (only rank 0's log said so once the job ran), for the keys the config gave.
TEST(LaunchPlan, InterNodeCompressionOnOneNodeIsANote) {
  const std::string zero = "[zero]\nstage = 2\nreduce_dtype = \"int8\"\ncompress = \"inter-node\"\n";
  Config one = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\n" + zero);
  auto plan = launcher::make_plan(one, inputs(), fake({}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  ASSERT_EQ(plan->inert.size(), 1u);
  EXPECT_EQ(plan->inert[0], "test.toml:6:16: zero.reduce_dtype has no effect: zero.compress = \"inter-node\" "
                            "quantizes only between nodes, and this job runs on one");
  Config two = parsed("[launch]\nnproc_per_node = 2\nnnodes = 2\nmaster_addr = \"10.0.0.1\"\n"
                      "program = \"/bin/true\"\n" + zero);
  auto plan2 = launcher::make_plan(two, inputs(), fake({{"ZDP_JOB_SECRET", "0123456789abcdef0123456789abcdef"}}));
  ASSERT_TRUE(plan2.ok()) << plan2.status().to_string();
  EXPECT_TRUE(plan2->inert.empty());
}

// --dry-run prints each rank's command as a shell reads it back: an argument with a space
// or a quote stays one word.
TEST(LaunchPlan, DryRunQuotesArgumentsAndValuesAShellWouldSplit) {
  Config c = parsed("[launch]\nnproc_per_node = 1\nprogram = \"/bin/true\"\nargs = [\"--foo\", \"bar baz\", \"it's\", \"\"]\n"
                    "env = { GREETING = \"hello world\", OMP_NUM_THREADS = \"7\" }\n");
  auto plan = launcher::make_plan(c, inputs(), fake({}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const std::string text = launcher::describe_plan(*plan, c);
  EXPECT_NE(text.find("# rank 0: /bin/true --foo 'bar baz' 'it'\\''s' ''\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" GREETING='hello world' "), std::string::npos) << text;
  // The threads the ranks get: launch.env's over the plan's (it printed the plan's alone).
  EXPECT_NE(text.find("# threads per rank: OMP 7 (launch.env), OpenBLAS "), std::string::npos) << text;
  // A value with a line break stays inside its comment line.
  Config odd = parsed("[launch]\nnproc_per_node = 1\nprogram = \"/bin/true\"\nenv = { OMP_NUM_THREADS = \"7\\nfoo\" }\n");
  const std::string odd_text = launcher::describe_plan(launcher::make_plan(odd, inputs(), fake({})).value(), odd);
  EXPECT_NE(odd_text.find("# threads per rank: OMP 7\\x0afoo (launch.env)"), std::string::npos) << odd_text;
  // ... and in the env line, as a word a shell reads back ($'...'): it split the line.
  EXPECT_NE(odd_text.find(" OMP_NUM_THREADS=$'7\\x0afoo'"), std::string::npos) << odd_text;
  Config esc = parsed("[launch]\nnproc_per_node = 1\nprogram = \"/bin/true\"\nargs = [\"a\\u001b[2J'\\\\\"]\n");
  const std::string esc_text = launcher::describe_plan(launcher::make_plan(esc, inputs(), fake({})).value(), esc);
  EXPECT_NE(esc_text.find("# rank 0: /bin/true $'a\\x1b[2J\\'\\\\'\n"), std::string::npos) << esc_text;
  EXPECT_EQ(esc_text.find('\x1b'), std::string::npos);
  Config csi = parsed("[launch]\nnproc_per_node = 1\nprogram = \"/bin/true\"\nargs = [\"a\\u009b2Jb\"]\n");
  const std::string csi_text = launcher::describe_plan(launcher::make_plan(csi, inputs(), fake({})).value(), csi);
  EXPECT_NE(csi_text.find("# rank 0: /bin/true $'a\\u009b2Jb'\n"), std::string::npos) << csi_text;
}

// dp-train reads every setting from the config dp-launch resolved: launch.args for it is
// refused before any rank starts (dry-run too), naming the key. Its --set or --config
// would have changed every rank's config after the launcher's checks, and an unknown flag
// stopped every rank at start-up. Another program takes its arguments as it likes.
TEST(LaunchPlan, ArgumentsForDpTrainAreRefusedBeforeAnyRankStarts) {
  testing::TempDir dir;
  const std::string dp_train = dir.file("dp-train");
  std::filesystem::copy_file("/bin/true", dp_train, std::filesystem::copy_options::overwrite_existing);
  const std::map<std::string, std::string> why = {
      {"\"--set\", \"zero.stage=3\"", "put the --set on dp-launch's command line instead"},
      {"\"--set=zero.stage=3\"", "put the --set on dp-launch's command line instead"},
      {"\"--config\", \"other.toml\"", "name the file on dp-launch's command line instead"},
      {"\"--help\"", "would end every rank without training"},
      {"\"--lr\", \"1\"", "dp-train takes no argument '--lr'"}};
  for (const auto& [args, reason] : why) {
    Config c = parsed("[launch]\nnproc_per_node = 2\nprogram = \"" + dp_train + "\"\nargs = [" + args + "]\n");
    for (const bool dry_run : {false, true}) {
      launcher::PlanInputs in = inputs();
      in.dry_run = dry_run;
      auto plan = launcher::make_plan(c, in, fake({}));
      ASSERT_FALSE(plan.ok()) << args;
      EXPECT_NE(plan.status().message().find("test.toml:4:8: launch.args = ["), std::string::npos) << plan.status().message();
      EXPECT_NE(plan.status().message().find(reason), std::string::npos) << plan.status().message();
    }
  }
  Config plain = parsed("[launch]\nnproc_per_node = 2\nprogram = \"" + dp_train + "\"\nargs = []\n");
  EXPECT_TRUE(launcher::make_plan(plain, inputs(), fake({})).ok());
  Config other = parsed("[launch]\nnproc_per_node = 2\nprogram = \"/bin/true\"\nargs = [\"--set\", \"x\"]\n");
  EXPECT_TRUE(launcher::make_plan(other, inputs(), fake({})).ok());
}

// The files dp-train's ranks would read are checked before any rank starts: every rank
// used to find a missing token file or resume checkpoint by itself. A dry run (of another
// cluster's config) prints them as notes; another program reads these keys as it likes.
TEST(LaunchPlan, DpTrainsInputFilesAreCheckedBeforeAnyRankStarts) {
  testing::TempDir dir;
  const std::string dp_train = dir.file("dp-train");
  std::filesystem::copy_file("/bin/true", dp_train, std::filesystem::copy_options::overwrite_existing);
  // Token files by their header (runtime/internal/token_header.h): model.seq_len is 64.
  const auto token_file = [&](const std::string& name, int32_t tokens, int32_t magic = kTokenFileMagic) {
    std::vector<int32_t> header(kTokenFileHeaderInts, 0);
    header[0] = magic;
    header[1] = kTokenFileVersion;
    header[2] = tokens;
    std::ofstream out(dir.file(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), kTokenFileHeaderBytes);
    out << std::string(2 * static_cast<size_t>(tokens), '\0');
  };
  token_file("train_0.bin", 65);
  token_file("val.bin", 65);
  const std::string head = "[launch]\nnproc_per_node = 2\nprogram = \"" + dp_train + "\"\n[model]\nkind = \"gpt\"\n"
                           "[data]\nkind = \"tokens\"\n";
  const auto plan_of = [&](const std::string& program, const std::string& rest, bool dry_run) {
    std::string text = head + rest;
    if (program != dp_train) text.replace(text.find(dp_train), dp_train.size(), program);
    launcher::PlanInputs in = inputs();
    in.dry_run = dry_run;
    return launcher::make_plan(parsed(text), in, fake({}));
  };
  const std::string good = "path = \"" + dir.file("train_*.bin") + "\"\nval_path = \"" + dir.file("val.bin") + "\"\n";
  auto ok = plan_of(dp_train, good, false);
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();

  const std::string missing = "path = \"" + dir.file("none_*.bin") + "\"\nval_path = \"" + dir.file("nope.bin") + "\"\n"
                              "[checkpoint]\nresume = \"" + dir.file("ckpt") + "\"\n";
  auto refused = plan_of(dp_train, missing, false);
  ASSERT_FALSE(refused.ok());
  const std::string m = refused.status().message();
  EXPECT_NE(m.find("test.toml:8:8: data.path (\"" + dir.file("none_*.bin") + "\"): token files '" + dir.file("none_*.bin") +
                   "': no file matches the pattern"),
            std::string::npos) << m;
  EXPECT_NE(m.find("test.toml:9:12: data.val_path (\"" + dir.file("nope.bin") + "\"): cannot read token file '" +
                   dir.file("nope.bin") + "': No such file or directory"),
            std::string::npos) << m;
  EXPECT_NE(m.find("test.toml:11:10: checkpoint.resume = \"" + dir.file("ckpt") + "\": "), std::string::npos) << m;
  // The dry run plans, with each problem a note.
  auto dry = plan_of(dp_train, missing, true);
  ASSERT_TRUE(dry.ok()) << dry.status().to_string();
  ASSERT_EQ(dry->notes.size(), 3u) << launcher::describe_plan(*dry, parsed(head + missing));
  EXPECT_NE(dry->notes[0].find("data.path"), std::string::npos) << dry->notes[0];
  EXPECT_NE(dry->notes[0].find(": the launch itself would stop here"), std::string::npos) << dry->notes[0];
  EXPECT_TRUE(plan_of("/bin/true", missing, false).ok()) << "another program reads data.path as it likes";

  // A held-out file that is also a training file, and a folder where a file should be.
  auto same = plan_of(dp_train, "path = \"" + dir.file("*.bin") + "\"\nval_path = \"" + dir.file("val.bin") + "\"\n", false);
  ASSERT_FALSE(same.ok());
  EXPECT_NE(same.status().message().find("data.val_path: the held-out file '" + dir.file("val.bin") + "' is also a training file"),
            std::string::npos) << same.status().message();
  // A token file shorter than one sample, or not a token file: every rank found it after
  // the launch; a dry run found nothing.
  token_file("short.bin", 64);
  token_file("magic.bin", 65, 7);
  auto short_one = plan_of(dp_train, "path = \"" + dir.file("short.bin") + "\"\nval_path = \"" + dir.file("magic.bin") + "\"\n", false);
  ASSERT_FALSE(short_one.ok());
  EXPECT_NE(short_one.status().message().find("test.toml:8:8: data.path (\"" + dir.file("short.bin") + "\"): token file '" +
                                            dir.file("short.bin") + "': 64 tokens, fewer than model.seq_len + 1 = 65 (one sample)"),
            std::string::npos) << short_one.status().message();
  EXPECT_NE(short_one.status().message().find("token file '" + dir.file("magic.bin") + "': magic number 7 is not 20240520"),
            std::string::npos) << short_one.status().message();
  std::filesystem::remove(dir.file("short.bin"));
  std::filesystem::remove(dir.file("magic.bin"));
  auto folder = plan_of(dp_train, "path = \"" + dir.path() + "\"\n", false);
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.status().message().find("token file '" + dir.path() + "' is a directory, not a regular file"), std::string::npos)
      << folder.status().message();
}

// dp-launch loads the config with the world it will launch (planned_world_size), so the
// checks that need one are listed with the file's other problems: the global batch's
// divisibility used to show only once an unknown key and a bad warmup were fixed.
TEST(LaunchPlan, WorldSizeChecksAreListedWithEveryOtherProblem) {
  testing::TempDir dir;
  const std::string path = dir.file("bad.toml");
  std::ofstream(path) << "[launch]\nnproc_per_node = 2\n[model]\nn_layer = 3\n"
                         "[train]\nsteps = 100\nglobal_batch = 30\nmicro_batch = 4\n[optim]\nwarmup_steps = 500\n";
  launcher::PlanInputs in;
  const EnvLookup no_env = fake({});
  StatusOr<Config> c = load_config(path, {}, [&](const Config& config) {
    return launcher::planned_world_size(config, in, no_env);
  });
  ASSERT_FALSE(c.ok());
  const std::string m = c.status().message();
  EXPECT_NE(m.find("bad.toml:4:1: unknown key 'model.n_layer'"), std::string::npos) << m;
  EXPECT_NE(m.find("optim.warmup_steps (500) exceeds train.steps (100)"), std::string::npos) << m;
  EXPECT_NE(m.find("bad.toml:7:16: train.global_batch (30) is not divisible by train.micro_batch (4) x world size (2) = 8"),
            std::string::npos)
      << m;
  // Without the world the divisibility waits (the ranks check it with theirs).
  StatusOr<Config> plain = load_config(path);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().message().find("is not divisible"), std::string::npos) << plain.status().message();
  // Slurm's node count is the launch's: 3 nodes x 2 ranks.
  Config three;
  three.launch.nproc_per_node = 2;
  EXPECT_EQ(launcher::planned_world_size(three, in, fake({{"SLURM_NNODES", "3"}, {"SLURM_NODEID", "1"}})), 6);
  EXPECT_EQ(launcher::planned_world_size(three, in, no_env), 2);
}

// The config the ranks are given records the layout the launch resolved: under Slurm every
// node's copy said node_rank = 0, nnodes = 1 and master_addr = 127.0.0.1 (the file's
// defaults), and "auto" ranks as 0. Each resolved value names where it came from, and a
// rank reading the file back sees the values and their origins.
TEST(LaunchPlan, TheRanksConfigRecordsTheLayoutTheLaunchResolved) {
  testing::TempDir dir;
  const Config c = parsed("[launch]\nprogram = \"/bin/true\"\nmaster_port = 29511\n");
  const auto slurm = fake({{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "1"}, {"SLURM_JOB_NODELIST", "gpu[07-08]"},
                           {"ZDP_JOB_SECRET", "0123456789abcdef"}});
  const auto plan = launcher::make_plan(c, inputs(), slurm);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const std::string path = dir.path() + "/config.node-1.toml";
  ASSERT_TRUE(write_config_file(launcher::config_for_ranks(c, *plan, inputs()), path).ok());
  const StatusOr<Config> read = load_config(path);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(read->launch.nnodes, 2);
  EXPECT_EQ(read->launch.node_rank, 1);
  EXPECT_EQ(read->launch.master_addr, "gpu07");
  EXPECT_EQ(read->launch.nproc_per_node, kCpuDefaultNprocPerNode);
  EXPECT_EQ(read->where("launch.node_rank"), "SLURM_NODEID");
  EXPECT_EQ(read->where("launch.nnodes"), "SLURM_NNODES");
  EXPECT_EQ(read->where("launch.master_addr"), "the first host of Slurm's node list");
  EXPECT_EQ(read->where("launch.nproc_per_node"), "\"auto\": the CPU default");
  EXPECT_EQ(read->where("launch.master_port"), "test.toml:3:15") << "a value the file gave keeps its place";

  // Without Slurm, --node-rank is where node 1 learnt it is node 1; the file's values stay.
  const Config two = parsed("[launch]\nprogram = \"/bin/true\"\nnnodes = 2\nnproc_per_node = 2\n"
                            "master_addr = \"10.0.0.1\"\n");
  launcher::PlanInputs flagged = inputs();
  flagged.node_rank = 1;
  const auto node1 = launcher::make_plan(two, flagged, fake({{"ZDP_JOB_SECRET", "0123456789abcdef"}}));
  ASSERT_TRUE(node1.ok()) << node1.status().to_string();
  const Config given = launcher::config_for_ranks(two, *node1, flagged);
  EXPECT_EQ(given.launch.node_rank, 1);
  EXPECT_EQ(given.where("launch.node_rank"), "--node-rank");
  EXPECT_EQ(given.where("launch.nnodes"), "test.toml:3:10");
  EXPECT_EQ(given.launch.nproc_per_node, 2);
  EXPECT_EQ(given.launch.master_addr, "10.0.0.1");
  // One node of the file's own layout: nothing to resolve, so nothing changes.
  const auto node0 = launcher::make_plan(two, inputs(), fake({{"ZDP_JOB_SECRET", "0123456789abcdef"}}));
  ASSERT_TRUE(node0.ok()) << node0.status().to_string();
  EXPECT_EQ(describe_resolved(launcher::config_for_ranks(two, *node0, inputs())), describe_resolved(two));
}

}  // namespace
}  // namespace zdp
