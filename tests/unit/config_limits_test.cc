// Values that used to pass validation and fail later (or never): sub-millisecond and
// infinite timeouts, infinite or absurd learning rates, global batches that overflow,
// keys the chosen model or data kind would silently ignore, unwritable output
// directories, short job secrets. Each is refused at load with file:line and the key.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "testing/temp_dir.h"
#include "zdp/config.h"
#include "zdp/launch_env.h"

namespace zdp {
namespace {

std::string error_of(const std::string& text) {
  StatusOr<Config> config = parse_config(text, "configs/x.toml");
  EXPECT_FALSE(config.ok()) << "parsed:\n" << text;
  return config.ok() ? "" : config.status().message();
}

bool parses(const std::string& text) {
  StatusOr<Config> config = parse_config(text, "configs/x.toml");
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok();
}

TEST(ConfigLimits, StartupTimeoutBelowAMillisecondIsRefusedAndZeroStaysOff) {
  EXPECT_EQ(error_of("[launch]\nstartup_timeout_s = 0.0001\n"),
            "configs/x.toml:2:21: launch.startup_timeout_s = 0.0001 is out of range: must be 0 (off) or in "
            "[0.001, 86400]");
  EXPECT_TRUE(parses("[launch]\nstartup_timeout_s = 0\n"));
  EXPECT_TRUE(parses("[launch]\nstartup_timeout_s = 0.001\n"));
}

TEST(ConfigLimits, InfiniteAndAbsurdValuesAreRefused) {
  EXPECT_EQ(error_of("[optim]\nlr = inf\n"),
            "configs/x.toml:2:6: optim.lr = inf is not a finite number: must be in (0, 1000]");
  EXPECT_EQ(error_of("[optim]\nlr = 1e300\n"),
            "configs/x.toml:2:6: optim.lr = 1e300 is out of range: must be in (0, 1000]");
  EXPECT_EQ(error_of("[launch]\ncollective_timeout_s = inf\n"),
            "configs/x.toml:2:24: launch.collective_timeout_s = inf is not a finite number: must be in "
            "[0.001, 86400]");
  // A peak a unit turns into infinity printed MFU 0.0% (1e308 TFLOP/s x 1e12).
  EXPECT_EQ(error_of("[profile]\npeak_tflops = 1e308\n"),
            "configs/x.toml:2:15: profile.peak_tflops = 1e308 is out of range: must be in [0, 1e+06]");
  EXPECT_EQ(error_of("[launch]\ncollective_timeout_s = 1e300\n"),
            "configs/x.toml:2:24: launch.collective_timeout_s = 1e300 is out of range: must be in [0.001, 86400]");
  EXPECT_NE(error_of("[optim]\nweight_decay = inf\n").find("optim.weight_decay = inf is not a finite number"),
            std::string::npos);
  EXPECT_NE(error_of("[zero]\nbucket_mb = 1e300\n").find("zero.bucket_mb = 1e300 is out of range"), std::string::npos);
  EXPECT_NE(error_of("[optim]\nlr = nan\n").find("optim.lr = nan is not a finite number"), std::string::npos);
  // An init_std past fp32 made every weight inf, named by no key (dp-train's "init (inf, 0)");
  // 1e9 overflowed LayerNorm's fp32 variance, and the loss read ln V without a word.
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\ninit_std = 1e300\n"),
            "configs/x.toml:3:12: model.init_std = 1e300 is out of range: must be in (0, 100]");
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\ninit_std = 1e9\n"),
            "configs/x.toml:3:12: model.init_std = 1000000000.0 is out of range: must be in (0, 100]");
  // 2^31 - 1 restarts overflowed the attempt count dp-launch printed ("attempt 2 of -2147483648").
  EXPECT_EQ(error_of("[launch]\nmax_restarts = 2147483647\n"),
            "configs/x.toml:2:16: launch.max_restarts = 2147483647 is out of range: must be in [0, 1000]");
}

// launch.env and launch.args reach every rank through execve: a string past MAX_ARG_STRLEN
// failed every rank with "Argument list too long", naming no key; so did all of them past
// ARG_MAX.
TEST(ConfigLimits, RankEnvironmentAndArgumentsFitExecve) {
  const std::string big(200000, 'x');
  EXPECT_NE(error_of("[launch.env]\nBIG = \"" + big + "\"\n")
                .find("launch.env.BIG: 200005 bytes, more than one environment variable of a process may hold (131072"),
            std::string::npos);
  EXPECT_NE(error_of("[launch]\nargs = [\"a\", \"" + big + "\"]\n")
                .find("configs/x.toml:2:8: launch.args[1]: 200001 bytes, more than one argument of a process may hold"),
            std::string::npos);
  std::string many = "[launch.env]\n";
  for (int i = 0; i < 10; ++i) many += "V" + std::to_string(i) + " = \"" + std::string(120000, 'y') + "\"\n";
  EXPECT_NE(error_of(many).find("launch.env and launch.args hold 1200040 bytes, more than zdp passes to a rank (1048576"),
            std::string::npos);
  EXPECT_TRUE(parses("[launch.env]\nOK = \"" + std::string(131000, 'z') + "\"\n"));
}

// A value past the int's own limit saw only "must be >= 1", which 2147483648 is.
TEST(ConfigLimits, AnIntegerPastItsTypesLimitIsToldTheLimit) {
  EXPECT_EQ(error_of("[checkpoint]\nkeep_last = 2147483648\n"),
            "configs/x.toml:2:13: checkpoint.keep_last = 2147483648 is out of range: must be >= 1, at most 2147483647");
  EXPECT_EQ(error_of("[checkpoint]\nkeep_last = 0\n"),
            "configs/x.toml:2:13: checkpoint.keep_last = 0 is out of range: must be >= 1");
}

// The resolved config (what the ranks read) quotes each value's origin in a comment: a
// control character from a --set made it unparseable TOML for every rank.
TEST(ConfigLimits, TheResolvedConfigOfAControlCharacterParses) {
  testing::TempDir dir;
  const std::string path = dir.file("x\x7fy.toml");  // the file's name is quoted in a comment too
  std::ofstream(path) << "[launch]\nnproc_per_node = 2\n";
  StatusOr<Config> c = load_config(path, {"launch.env.FOO=a\x01" "b"});
  ASSERT_TRUE(c.ok()) << c.status().message();
  const std::string resolved = describe_resolved(*c);
  StatusOr<Config> again = parse_config(resolved, "resolved.toml");
  ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << resolved;
  EXPECT_EQ(again->launch.env.at("FOO"), "a\x01" "b");
  // A file name that is not UTF-8 (Latin-1's "caf\xe9"): TOML allows no such byte in a
  // comment either, and every rank failed to parse the config it was handed.
  const std::string latin1 = dir.file("caf\xe9.toml");
  std::ofstream(latin1) << "[launch]\nnproc_per_node = 2\n";
  StatusOr<Config> named = load_config(latin1);
  ASSERT_TRUE(named.ok()) << named.status().message();
  StatusOr<Config> parsed = parse_config(describe_resolved(*named), "resolved.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->launch.nproc_per_node, 2);
}

TEST(ConfigLimits, HeartbeatTimeoutIsOffOrAtLeastASecond) {
  EXPECT_EQ(error_of("[launch]\nheartbeat_timeout_s = 0.01\n"),
            "configs/x.toml:2:23: launch.heartbeat_timeout_s = 0.01 is out of range: must be 0 (off) or in "
            "[1, 3600]");
  EXPECT_NE(error_of("[launch]\nheartbeat_timeout_s = 3601\n").find("must be 0 (off) or in [1, 3600]"),
            std::string::npos);
  EXPECT_TRUE(parses("[launch]\nheartbeat_timeout_s = 0\n"));
  EXPECT_TRUE(parses("[launch]\nheartbeat_timeout_s = 1\n"));
}

TEST(ConfigLimits, AbsurdGlobalBatchIsRefusedBeforeItMakesAccumulationSteps) {
  EXPECT_EQ(error_of("[train]\nglobal_batch = 9223372036854775806\n"),
            "configs/x.toml:2:16: train.global_batch = 9223372036854775806 is out of range: must be in "
            "[1, 1073741824]");
  // Within the range, steps x global_batch must stay a representable data position.
  EXPECT_EQ(error_of("[train]\nglobal_batch = 1073741824\nsteps = 9223372036854775807\n"),
            "configs/x.toml:3:9: train.steps (9223372036854775807) x train.global_batch (1073741824) = more than "
            "9223372036854775807 samples exceeds 4611686018427387904 (2^62), the most a run's data position may "
            "reach");
}

// A synthetic epoch past 2^62 samples (more than any run reads) hung every rank in the
// sampler's shuffle before the first step; it is refused at load.
TEST(ConfigLimits, SyntheticEpochBeyondAnyRunIsRefused) {
  EXPECT_EQ(error_of("[data]\nsynthetic_samples = 4611686018427387905\n"),
            "configs/x.toml:2:21: data.synthetic_samples = 4611686018427387905 is out of range: must be in "
            "[1, 4611686018427387904]");
  EXPECT_TRUE(parses("[data]\nsynthetic_samples = 4611686018427387904\n"));
}

// A model's shape is bounded key by key and as a whole before anything multiplies it:
// 2e9 layers made dp-launch plan end in std::bad_alloc and dp-train allocate for minutes,
// and a wide, deep model overflowed int64 in the parameter count.
TEST(ConfigLimits, ModelsBeyondAnyDeviceAreRefusedBeforeTheirSizeOverflows) {
  EXPECT_EQ(error_of("[model]\nn_layers = 2000000000\n"),
            "configs/x.toml:2:12: model.n_layers = 2000000000 is out of range: must be in [1, 65536]");
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\nseq_len = 16777217\n"),
            "configs/x.toml:3:11: model.seq_len = 16777217 is out of range: must be in [1, 16777216]");
  // Every key in range, the product not: about 12 x 65536 x 2^40 parameters.
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\nn_layers = 65536\nd_model = 1048576\nn_heads = 16\n"),
            "configs/x.toml:3:12: the model (gpt, model.n_layers 65536, model.d_model 1048576, model.vocab_size 256, "
            "model.seq_len 64) has about 8.65e+17 parameters, more than zdp plans for (2^48 = 2.81e+14)");
  EXPECT_EQ(error_of("[model]\nn_layers = 4\nd_model = 1048576\nvocab_size = 1073741824\n"),
            "configs/x.toml:2:12: the model (mlp, model.n_layers 4, model.d_model 1048576, model.vocab_size "
            "1073741824) has about 1.13e+15 parameters, more than zdp plans for (2^48 = 2.81e+14)");
  // A small model with a micro-batch whose activations no device holds.
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\nseq_len = 1000000\n[train]\nmicro_batch = 100000\n"
                     "global_batch = 100000\n"),
            "configs/x.toml:5:15: a micro-batch of 100000 keeps about 8e+17 activation values for backward "
            "(model.n_layers 2, model.d_model 64, model.seq_len 1000000), more than zdp plans for (2^50 = 1.13e+15)");
  // Deterministic mode's exact norm sums at most 2^32 squares: a larger model is refused at
  // load (every rank's finalize refused it, naming no key).
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\nn_layers = 8\nd_model = 8192\nn_heads = 8\n[train]\ndeterministic = true\n"),
            "configs/x.toml:7:17: train.deterministic: the model has about 6.45e+09 parameters, more than the exact "
            "gradient norm sums (2^32 = 4294967296 elements): use a smaller model or leave train.deterministic out");
  EXPECT_TRUE(parses("[model]\nkind = \"gpt\"\nn_layers = 8\nd_model = 8192\nn_heads = 8\n"));
  // GPT-2 XL's shape at its own batch passes, and so does a long context at micro-batch 1.
  EXPECT_TRUE(parses("[model]\nkind = \"gpt\"\nn_layers = 48\nd_model = 1600\nn_heads = 25\nvocab_size = 50304\n"
                     "seq_len = 1024\n[train]\nmicro_batch = 16\nglobal_batch = 512\n"));
  EXPECT_TRUE(parses("[model]\nkind = \"gpt\"\nn_layers = 32\nd_model = 4096\nn_heads = 32\nseq_len = 131072\n"
                     "[train]\nmicro_batch = 1\nglobal_batch = 8\n"));
}

TEST(ConfigLimits, KeysTheModelOrDataKindIgnoresAreRefused) {
  // A path with the default kind: the user expected tokens and forgot data.kind.
  EXPECT_EQ(error_of("[data]\npath = \"train.bin\"\n"),
            "configs/x.toml:2:8: data.path (\"train.bin\") would be ignored: data.kind is \"synthetic\" by "
            "default; set data.kind = \"tokens\" to train on it, or leave data.path out");
  EXPECT_NE(error_of("[data]\nval_path = \"val.bin\"\n").find("data.val_path (\"val.bin\") would be ignored"),
            std::string::npos);
  // "synthetic" chosen on purpose (a token config run on synthetic data) leaves the paths unused.
  EXPECT_TRUE(parses("[data]\nkind = \"synthetic\"\npath = \"train.bin\"\n"));
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\ntask = \"regression\"\n"),
            "configs/x.toml:3:8: model.task (\"regression\") applies to model.kind = \"mlp\" only; the gpt "
            "predicts the next token: leave model.task out");
  EXPECT_TRUE(parses("[model]\nkind = \"mlp\"\ntask = \"regression\"\n"));
  // Every resolved config (to_toml, what dp-launch hands its ranks) names the default task.
  StatusOr<Config> gpt = parse_config("[model]\nkind = \"gpt\"\n", "configs/x.toml");
  ASSERT_TRUE(gpt.ok());
  EXPECT_TRUE(parses(to_toml(*gpt)));
  EXPECT_TRUE(parses("[model]\nkind = \"gpt\"\n[data]\nkind = \"tokens\"\npath = \"t.bin\"\nval_path = \"v.bin\"\n"));
}

// Before: "train.global_batch (8) is not divisible by train.micro_batch (1) x
// train.accum_steps (3) = 3", without the world size that is the third factor.
TEST(ConfigLimits, AccumulationErrorNamesTheWorldSize) {
  StatusOr<Config> c = parse_config("[train]\nglobal_batch = 8\nmicro_batch = 1\naccum_steps = 3\n", "configs/x.toml");
  ASSERT_FALSE(c.ok());  // 8 is not a multiple of 3 at any world size
  c = parse_config("[train]\nglobal_batch = 12\nmicro_batch = 2\naccum_steps = 3\n", "configs/x.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const Status s = validate_for_world(*c, 4);
  EXPECT_EQ(s.message(),
            "configs/x.toml:2:16: train.global_batch (12) is not divisible by train.micro_batch (2) x "
            "train.accum_steps (3) x world size (4) = 24; it must equal that product");
  EXPECT_TRUE(validate_for_world(*c, 2).ok());
}

void touch(const std::string& path) { std::ofstream(path) << "x"; }

TEST(ConfigLimits, UnwritableOutputDirectoriesAreFoundUpFront) {
  testing::TempDir dir;
  touch(dir.path() + "/file");
  StatusOr<Config> c = parse_config("[checkpoint]\ndir = \"" + dir.path() + "/file/ckpt\"\n[profile]\nenabled = true\n" +
                                        "dir = \"" + dir.path() + "/file\"\n[launch]\nlog_dir = \"" + dir.path() +
                                        "/logs\"\n",
                                    "configs/x.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const Status s = check_output_dirs(*c);
  EXPECT_EQ(s.message(), "configs/x.toml:2:7: checkpoint.dir (\"" + dir.path() + "/file/ckpt\") cannot be created: " +
                             dir.path() + "/file is a regular file, not a directory; checkpoints could not be "
                             "written there\n"
                             "configs/x.toml:5:7: profile.dir (\"" + dir.path() + "/file\") is a regular file, not a "
                             "directory; the profile could not be written there");
  c->checkpoint.dir = dir.path() + "/new/deeper";  // created at the first save
  c->profile.dir = dir.path();
  EXPECT_TRUE(check_output_dirs(*c).ok()) << check_output_dirs(*c).message();
  // A directory without write permission (root's permissions bypass the mode bits).
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(dir.path().c_str(), 0500), 0);
    c->checkpoint.dir = dir.path() + "/ckpt";
    EXPECT_NE(check_output_dirs(*c).message().find("cannot be created in " + dir.path() + ": Permission denied"),
              std::string::npos)
        << check_output_dirs(*c).message();
    ASSERT_EQ(::chmod(dir.path().c_str(), 0700), 0);
  } else {
    // Root: access() says yes to /proc, where nothing can be made (a profile.dir there
    // failed after the whole run); a directory made and removed answers. Nothing is left.
    c->profile.dir = "/proc/zdp-no-such-dir/profile";
    EXPECT_NE(check_output_dirs(*c).message().find("profile.dir (\"/proc/zdp-no-such-dir/profile\") cannot be created "
                                                   "in /proc: "),
              std::string::npos)
        << check_output_dirs(*c).message();
    c->profile.dir = dir.path();
    ASSERT_TRUE(check_output_dirs(*c).ok());
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1) << "only 'file': the probe is gone";
  }
}

TEST(ConfigLimits, AShortJobSecretIsRefusedNamingTheMinimum) {
  const auto env = [](const char* secret) {
    return [secret](const char* name) -> const char* { return std::string(name) == "ZDP_JOB_SECRET" ? secret : nullptr; };
  };
  const StatusOr<LaunchEnv> short_one = read_launch_env(env("x"));
  ASSERT_FALSE(short_one.ok());
  EXPECT_NE(short_one.status().message().find("ZDP_JOB_SECRET has 1 characters, fewer than the 16 a job secret needs"),
            std::string::npos)
      << short_one.status().message();
  EXPECT_TRUE(read_launch_env(env("0123456789abcdef")).ok());
  const std::string long_secret(5000, 'k');
  const StatusOr<LaunchEnv> long_one = read_launch_env(env(long_secret.c_str()));
  ASSERT_FALSE(long_one.ok());
  EXPECT_NE(long_one.status().message().find("ZDP_JOB_SECRET has 5000 characters, more than the 4096"),
            std::string::npos)
      << long_one.status().message();
}

// torchrun's variables are bounded before anything is sized by them: WORLD_SIZE=2^31 - 1
// made init allocate a store key per rank (bad_alloc, naming nothing); a 100 kB value was
// printed whole, escapes and all.
TEST(ConfigLimits, TorchrunsWorldSizesAreBoundedAndTheirTextPrintable) {
  const auto torchrun = [](const char* world, const char* local, const char* rank = "0") {
    return [=](const char* name) -> const char* {
      const std::string n = name;
      if (n == "RANK") return rank;
      if (n == "WORLD_SIZE") return world;
      if (n == "LOCAL_RANK") return "0";
      if (n == "LOCAL_WORLD_SIZE") return local;
      if (n == "MASTER_ADDR") return "127.0.0.1";
      if (n == "MASTER_PORT") return "29500";
      return nullptr;
    };
  };
  ASSERT_TRUE(read_launch_env(torchrun("8", "8")).ok());
  const StatusOr<LaunchEnv> huge = read_launch_env(torchrun("2000000000", "2000000000"));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("world size 2000000000 (WORLD_SIZE / SLURM_NTASKS) is more than a job may have"),
            std::string::npos)
      << huge.status().message();
  EXPECT_NE(huge.status().message().find("local world size 2000000000"), std::string::npos) << huge.status().message();
  const std::string sevens(100000, '7'), escape = "\x1b[31mred";
  for (const std::string& rank : {sevens, escape}) {
    const StatusOr<LaunchEnv> bad = read_launch_env(torchrun("8", "8", rank.c_str()));
    ASSERT_FALSE(bad.ok());
    EXPECT_LT(bad.status().message().size(), 400u);
    EXPECT_EQ(bad.status().message().find('\x1b'), std::string::npos) << "a raw escape reached the message";
  }
}

// SLURM_TASKS_PER_NODE's first count is read in range: 4294967297 (2^32 + 1) wrapped to 1
// and was accepted; a list that starts with no count is refused too.
TEST(ConfigLimits, SlurmsTasksPerNodeIsReadInRange) {
  const auto slurm = [](const char* tasks) {
    return [tasks](const char* name) -> const char* {
      const std::string n = name;
      if (n == "SLURM_PROCID" || n == "SLURM_LOCALID" || n == "SLURM_NODEID") return "0";
      if (n == "SLURM_NTASKS") return "6";
      if (n == "SLURM_JOB_NODELIST") return "node[1-3]";
      if (n == "SLURM_TASKS_PER_NODE") return tasks;
      if (n == "ZDP_JOB_SECRET") return "0123456789abcdef";
      return nullptr;
    };
  };
  const StatusOr<LaunchEnv> good = read_launch_env(slurm("2(x3)"));
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_EQ(good->local_world_size, 2);
  for (const char* bad : {"4294967297", "99999999999999999999(x2)", "(x3)", "0"}) {
    const StatusOr<LaunchEnv> refused = read_launch_env(slurm(bad));
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("does not start with a task count in [1, 2^20]"), std::string::npos)
        << refused.status().message();
  }
  const StatusOr<LaunchEnv> larger = read_launch_env(slurm("8(x3)"));
  ASSERT_FALSE(larger.ok());
  EXPECT_NE(larger.status().message().find("the local world of 8 (LOCAL_WORLD_SIZE / SLURM_TASKS_PER_NODE) is larger than "
                                           "the world of 6"),
            std::string::npos)
      << larger.status().message();
}

}  // namespace
}  // namespace zdp
