// The typed config: defaults, precedence (--set > file > default), round trips through
// to_toml, the --dry-run and --help texts, and every example config in configs/.
#include "zdp/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace zdp {
namespace {

Config parse_ok(const std::string& text, const std::vector<std::string>& overrides = {}) {
  StatusOr<Config> config = parse_config(text, "test.toml", overrides);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return config.ok() ? *config : Config();
}

TEST(Config, EmptyTextGivesTheDeclaredDefaults) {
  const Config config = parse_ok("");
  EXPECT_EQ(config, Config());
  EXPECT_TRUE(config.origins.empty());
  EXPECT_EQ(config.source, "test.toml");
  EXPECT_EQ(config.launch.nproc_per_node, 0);  // "auto"
  EXPECT_EQ(config.launch.master_port, 29500);
  EXPECT_EQ(config.launch.backend, Backend::kAuto);
  EXPECT_EQ(config.zero.stage, 2);
  EXPECT_EQ(config.zero.reduce_dtype, DType::kF32);
  EXPECT_EQ(config.train.accum_steps, 0);
  for (int world : {1, 2, 4, 8}) EXPECT_TRUE(validate_for_world(config, world).ok()) << world;
}

TEST(Config, ReadsEverySectionAndRemembersPositions) {
  const Config c = parse_ok(
      "[launch]\n"
      "nproc_per_node = 4\n"
      "backend = \"nccl\"\n"
      "args = [\"--foo\", \"1\"]\n"
      "env = { OMP_NUM_THREADS = \"2\" }\n"
      "[model]\nkind = \"gpt\"\nd_model = 96\nn_heads = 6\ndtype = \"bf16\"\n"
      "[data]\nkind = \"tokens\"\npath = \"t.bin\"\nshuffle = false\n"
      "[train]\nglobal_batch = 64\nmicro_batch = 2\nsteps = 7\n"
      "[optim]\nname = \"sgd\"\nlr = 0.5\nschedule = \"cosine\"\n"
      "[zero]\nstage = 3\nreduce_dtype = \"bf16\"\noverlap = false\n"
      "[checkpoint]\nresume = \"never\"\n"
      "[profile]\nenabled = true\ntrace = false\ndir = \"prof\"\n");
  EXPECT_EQ(c.launch.nproc_per_node, 4);
  EXPECT_EQ(c.launch.backend, Backend::kNccl);
  EXPECT_EQ(c.launch.args, (std::vector<std::string>{"--foo", "1"}));
  EXPECT_EQ(c.launch.env.at("OMP_NUM_THREADS"), "2");
  EXPECT_EQ(c.model.kind, ModelKind::kGpt);
  EXPECT_EQ(c.model.dtype, DType::kBF16);
  EXPECT_EQ(c.data.kind, DataKind::kTokens);
  EXPECT_FALSE(c.data.shuffle);
  EXPECT_EQ(c.train.global_batch, 64);
  EXPECT_EQ(c.optim.name, OptimizerKind::kSgd);
  EXPECT_EQ(c.optim.schedule, LrSchedule::kCosine);
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_EQ(c.zero.reduce_dtype, DType::kBF16);
  EXPECT_FALSE(c.zero.overlap);
  EXPECT_EQ(c.checkpoint.resume, ResumeMode::kNever);
  EXPECT_TRUE(c.profile.enabled);
  EXPECT_FALSE(c.profile.trace);
  EXPECT_EQ(c.profile.dir, "prof");
  EXPECT_EQ(c.origins.at("launch.backend").source, ValueSource::kFile);
  EXPECT_EQ(c.where("launch.backend"), "test.toml:3:11");
  EXPECT_EQ(c.where("zero.bucket_mb"), "test.toml");  // a default
  EXPECT_EQ(c.origins.count("zero.bucket_mb"), 0u);
}

// checkpoint.resume is "auto", "never" or a path; the path survives to_toml. Without
// checkpoint.dir (the default) nothing is saved or looked for.
TEST(Config, CheckpointResumeIsAutoNeverOrAPath) {
  const Config defaults = parse_ok("");
  EXPECT_EQ(defaults.checkpoint.dir, "");
  EXPECT_EQ(defaults.checkpoint.resume, ResumeMode::kAuto);
  EXPECT_EQ(defaults.checkpoint.storage, CheckpointStorage::kShared);
  EXPECT_EQ(parse_ok("[checkpoint]\nresume = \"never\"\n").checkpoint.resume, ResumeMode::kNever);
  const Config path = parse_ok("[checkpoint]\nresume = \"runs/a/step-40\"\nstorage = \"per-node\"\n");
  EXPECT_EQ(path.checkpoint.resume, ResumeMode::kPath);
  EXPECT_EQ(path.checkpoint.resume_path, "runs/a/step-40");
  EXPECT_EQ(path.checkpoint.storage, CheckpointStorage::kPerNode);
  EXPECT_EQ(parse_ok(to_toml(path)), path);
  const Config back = parse_ok("", {"checkpoint.resume=runs/b", "checkpoint.resume=auto"});
  EXPECT_EQ(back.checkpoint.resume, ResumeMode::kAuto);
  EXPECT_EQ(back.checkpoint.resume_path, "");
  EXPECT_STREQ(to_string(ResumeMode::kPath), "path");
}

TEST(Config, NprocPerNodeIsANumberOrAuto) {
  EXPECT_EQ(parse_ok("[launch]\nnproc_per_node = \"auto\"\n").launch.nproc_per_node, 0);
  EXPECT_EQ(parse_ok("[launch]\nnproc_per_node = 3\n").launch.nproc_per_node, 3);
  LaunchConfig launch;
  EXPECT_EQ(resolve_nproc_per_node(launch, 0), kCpuDefaultNprocPerNode);
  EXPECT_EQ(resolve_nproc_per_node(launch, 8), 8);
  launch.nproc_per_node = 3;
  EXPECT_EQ(resolve_nproc_per_node(launch, 8), 3);
  EXPECT_EQ(resolve_backend(Backend::kAuto, true), Backend::kNccl);
  EXPECT_EQ(resolve_backend(Backend::kAuto, false), Backend::kGloo);
  EXPECT_EQ(resolve_backend(Backend::kGloo, true), Backend::kGloo);
  EXPECT_STREQ(to_string(Backend::kNccl), "nccl");
  EXPECT_STREQ(to_string(LrSchedule::kCosine), "cosine");
}

TEST(Config, FloatKeysAcceptIntegersAndBothTableFormsWork) {
  const Config c = parse_ok("[launch]\ncollective_timeout_s = 60\n[launch.env]\nA = \"1\"\nB = \"x y\"\n");
  EXPECT_EQ(c.launch.collective_timeout_s, 60.0);
  EXPECT_EQ(c.launch.env, (std::map<std::string, std::string>{{"A", "1"}, {"B", "x y"}}));
  EXPECT_EQ(parse_ok("launch.master_port = 1234\n").launch.master_port, 1234);  // a dotted key at the root
}

TEST(Config, SetOverridesWinOverTheFileAndTheDefaults) {
  const Config c = parse_ok("[zero]\nstage = 1\n[launch]\nbackend = \"nccl\"\n",
                            {"zero.stage=3", "launch.args=[\"--x\",\"1\"]", "launch.backend=gloo",
                             "launch.master_addr=10.0.0.1", "launch.program=2", "launch.env.FOO=bar baz",
                             "launch.env.N=4", "train.steps = 5", "train.steps=6", "launch.nproc_per_node=auto",
                             "checkpoint.dir=\"quoted # not a comment\""});
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_EQ(c.launch.args, (std::vector<std::string>{"--x", "1"}));
  EXPECT_EQ(c.launch.backend, Backend::kGloo);          // a bare word is a string
  EXPECT_EQ(c.launch.master_addr, "10.0.0.1");          // not TOML: taken as a string
  EXPECT_EQ(c.launch.program, "2");                     // a string key takes the text as given
  EXPECT_EQ(c.launch.env, (std::map<std::string, std::string>{{"FOO", "bar baz"}, {"N", "4"}}));
  EXPECT_EQ(c.train.steps, 6);                          // the later --set wins
  EXPECT_EQ(c.launch.nproc_per_node, 0);
  EXPECT_EQ(c.checkpoint.dir, "quoted # not a comment");
  EXPECT_EQ(c.where("zero.stage"), "--set zero.stage=3");
  EXPECT_EQ(c.origins.at("zero.stage").source, ValueSource::kOverride);
  EXPECT_EQ(c.where("launch.env"), "--set launch.env.N=4");
  EXPECT_EQ(c.origins.count("zero.bucket_mb"), 0u);
  // A whole table set after single entries replaces them, as any later --set wins (the
  // entries were applied after it and survived); entries after it add to it.
  EXPECT_TRUE(parse_ok("", {"launch.env.FOO=1", "launch.env={}"}).launch.env.empty());
  EXPECT_EQ(parse_ok("", {"launch.env.FOO=1", "launch.env={B=\"2\"}", "launch.env.C=3"}).launch.env,
            (std::map<std::string, std::string>{{"B", "2"}, {"C", "3"}}));
}

TEST(Config, ToTomlRoundTripsExactly) {
  Config c;
  c.launch.program = "/opt/my \"trainer\"\\bin";
  c.launch.args = {"--name=a b", "tab\there", "new\nline", "ünïcode ✓", ""};
  c.launch.env = {{"WEIRD_KEY", "v\"1 \\ a\tb"}, {"PATH", "/usr/bin:/bin"}};  // names are variable names: the values escaped
  c.launch.collective_timeout_s = 1.0 / 3.0;
  c.optim.lr = 3e-4;
  c.optim.eps = 1e-8;
  c.optim.beta2 = 0.95;
  c.zero.bucket_mb = 0.1;
  c.train.seed = 9007199254740993LL;  // not representable as a double: stays an integer
  c.launch.nproc_per_node = 5;
  c.model.kind = ModelKind::kGpt;
  const std::string text = to_toml(c);
  const Config back = parse_ok(text);
  EXPECT_EQ(back, c) << text;
  EXPECT_EQ(back.launch.args, c.launch.args);
  EXPECT_EQ(back.launch.collective_timeout_s, c.launch.collective_timeout_s);
  EXPECT_EQ(parse_ok(to_toml(Config())), Config());
  EXPECT_NE(text.find("nproc_per_node = 5\n"), std::string::npos) << text;
  EXPECT_NE(to_toml(Config()).find("nproc_per_node = \"auto\"\n"), std::string::npos);
}

TEST(Config, EqualityComparesValuesNotOrigins) {
  Config a = parse_ok("[train]\nsteps = 100\n");  // equal to the default, but from the file
  EXPECT_EQ(a, Config());
  a.zero.overlap = false;
  EXPECT_NE(a, Config());
}

TEST(Config, DescribeResolvedMarksEveryOrigin) {
  const Config c = parse_ok("[launch]\nnproc_per_node = 2\n", {"zero.stage=3"});
  const std::string text = describe_resolved(c);
  EXPECT_NE(text.find("nproc_per_node = 2"), std::string::npos) << text;
  EXPECT_NE(text.find("# test.toml:2:18\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# --set zero.stage=3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("master_port = 29500"), std::string::npos) << text;
  EXPECT_NE(text.find("# default\n"), std::string::npos) << text;
  EXPECT_EQ(parse_ok(text), c);  // still a valid config
}

TEST(Config, KeyReferenceDocumentsEveryKeyWithItsDefault) {
  const std::string help = key_reference();
  for (const char* section : {"launch", "model", "data", "train", "optim", "zero", "checkpoint", "profile"}) {
    EXPECT_NE(help.find("[" + std::string(section) + "]\n"), std::string::npos) << section;
  }
  for (const char* line : {"nproc_per_node = \"auto\"", "master_port = 29500", "integer in [1, 65535]",
                           "backend = \"auto\"", "one of \"auto\", \"nccl\", \"gloo\"", "collective_timeout_s = 300.0",
                           "stage = 2", "integer in [0, 3]", "args = []", "env = {}", "program = \"\"",
                           "beta1 = 0.9", "number in [0, 1)", "lr = 0.0003", "number in (0, 100]"}) {
    EXPECT_NE(help.find(line), std::string::npos) << line << "\n" << help;
  }
  // Every key of to_toml appears in the reference.
  std::istringstream toml(to_toml(Config()));
  std::string line;
  while (std::getline(toml, line)) {
    if (line.empty() || line[0] == '#' || line[0] == '[') continue;
    EXPECT_NE(help.find("  " + line), std::string::npos) << line;
  }
}

TEST(Config, ResolvedAccumSteps) {
  TrainConfig t;
  t.global_batch = 16;
  t.micro_batch = 4;
  EXPECT_EQ(resolved_accum_steps(t, 2), 2);
  EXPECT_EQ(resolved_accum_steps(t, 4), 1);
  t.accum_steps = 2;
  EXPECT_EQ(resolved_accum_steps(t, 2), 2);
}

TEST(Config, WriteConfigFileThenLoadItBack) {
  const std::string path = ::testing::TempDir() + "zdp_config_" + std::to_string(::getpid()) + ".toml";
  const Config c = parse_ok("[train]\nsteps = 17\n", {"launch.env.X=1"});
  ASSERT_TRUE(write_config_file(c, path).ok());
  StatusOr<Config> back = load_config(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, c);
  EXPECT_EQ(back->source, path);
  EXPECT_EQ(back->origins.at("train.steps").source, ValueSource::kFile);
  // A rank reads what dp-launch resolved, but its errors name where the user gave each
  // value (they named the resolved file's line, which the user never wrote).
  EXPECT_EQ(back->where("train.steps"), c.where("train.steps"));
  EXPECT_EQ(back->where("train.steps"), "test.toml:2:9");
  EXPECT_EQ(back->where("launch.env"), "--set launch.env.X=1");
  EXPECT_EQ(back->where("train.micro_batch").rfind(path + ":", 0), 0u) << "a default names the resolved file's line";
  std::filesystem::remove(path);
  // A value whose text holds a '#' keeps its own origin.
  const Config hashed = parse_ok("[launch]\nlog_dir = \"logs/a#b  # c\"\n");
  ASSERT_TRUE(write_config_file(hashed, path).ok());
  back = load_config(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->launch.log_dir, "logs/a#b  # c");
  EXPECT_EQ(back->where("launch.log_dir"), "test.toml:2:11");
  std::filesystem::remove(path);

  StatusOr<Config> missing = load_config("/nonexistent/zdp.toml");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/zdp.toml"), std::string::npos);
  EXPECT_FALSE(write_config_file(c, "/nonexistent/dir/zdp.toml").ok());
}

TEST(Config, EveryExampleConfigParsesAndValidates) {
  const std::filesystem::path dir = std::filesystem::path(ZDP_SOURCE_DIR) / "configs";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    StatusOr<Config> config = load_config(entry.path().string());
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    const int world = resolve_nproc_per_node(config->launch, 0) * config->launch.nnodes;
    EXPECT_TRUE(validate_for_world(*config, world).ok()) << validate_for_world(*config, world).to_string();
    EXPECT_EQ(parse_ok(to_toml(*config)), *config);
    EXPECT_FALSE(config->origins.empty());
    // Nothing an example config sets is inert in it (zdp/config.h inert_settings).
    EXPECT_EQ(inert_settings(*config), std::vector<std::string>{});
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

TEST(Config, QuickstartAndGpt2ConfigsSayWhatTheyPromise) {
  const std::string root = ZDP_SOURCE_DIR;
  StatusOr<Config> cpu = load_config(root + "/configs/mlp-cpu.toml");
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  EXPECT_EQ(cpu->launch.backend, Backend::kGloo);
  EXPECT_EQ(cpu->launch.nproc_per_node, 2);
  EXPECT_EQ(resolved_accum_steps(cpu->train, 2), 2);
  StatusOr<Config> gpu = load_config(root + "/configs/gpu-gpt2.toml");
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  EXPECT_EQ(gpu->launch.backend, Backend::kNccl);
  EXPECT_EQ(gpu->launch.nproc_per_node, 8);
  EXPECT_EQ(resolved_accum_steps(gpu->train, 8), 4);
  // Two nodes, as its header comment suggests.
  StatusOr<Config> two = load_config(root + "/configs/gpu-gpt2.toml",
                                     {"launch.nnodes=2", "launch.node_rank=1", "train.micro_batch=8"});
  ASSERT_TRUE(two.ok()) << two.status().to_string();
  EXPECT_TRUE(validate_for_world(*two, 16).ok());
}

}  // namespace
}  // namespace zdp
