// Config errors: unknown keys with hints, wrong types, out-of-range values, cross-field
// conflicts, syntax errors and bad --set, each naming where, which key and which values;
// all problems of one file in one Status.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "zdp/config.h"

namespace zdp {
namespace {

// The message of the error parse_config gives for `text` (named configs/x.toml).
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  StatusOr<Config> config = parse_config(text, "configs/x.toml", overrides);
  EXPECT_FALSE(config.ok()) << "parsed:\n" << text;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  return config.status().message();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

TEST(ConfigErrors, UnknownKeyWithDidYouMean) {
  EXPECT_EQ(error_of("[train]\nsteps = 3\n\nmicro_bach = 4\n"),
            "configs/x.toml:4:1: unknown key 'train.micro_bach'; did you mean 'train.micro_batch'?");
  EXPECT_EQ(error_of("[zero]\nstgae = 1\n"),
            "configs/x.toml:2:1: unknown key 'zero.stgae'; did you mean 'zero.stage'?");
  // A key in the wrong section points to the right one.
  EXPECT_EQ(error_of("[train]\nlr = 0.1\n"), "configs/x.toml:2:1: unknown key 'train.lr'; did you mean 'optim.lr'?");
  EXPECT_EQ(error_of("steps = 3\n"),
            "configs/x.toml:1:1: unknown key 'steps' outside any section; did you mean 'train.steps'?");
  // Nothing plausible: no hint.
  EXPECT_EQ(error_of("[train]\nbanana = 1\n"), "configs/x.toml:2:1: unknown key 'train.banana'");
  EXPECT_EQ(error_of("[launch.envv]\nA = \"1\"\n"),
            "configs/x.toml:1:1: unknown key 'launch.envv'; did you mean 'launch.env'?");
  // A quoted key's control characters are escaped: its ESC sequences reached the terminal.
  EXPECT_EQ(error_of("[train]\n\"\\u001b]0;x\\u0007\" = 1\n"), "configs/x.toml:2:1: unknown key 'train.\\x1b]0;x\\x07'");
}

// A hint also takes a typo's letters swapped next to another typo, and nothing that is
// further than one typo in three letters; a long unknown name is shown cut, with its
// length (its hint once cost its length x every key's: dp-launch --dry-run took 3.5 s on
// a 200,000-character name, 0.09 s now).
TEST(ConfigErrors, HintsAreBoundedAndLongNamesCut) {
  EXPECT_EQ(error_of("[optim]\nwieght_decai = 0.1\n"),
            "configs/x.toml:2:1: unknown key 'optim.wieght_decai'; did you mean 'optim.weight_decay'?");
  EXPECT_EQ(error_of("[optim]\nwxyzht_decay = 0.1\n"),  // 3 typos in 18 letters: within 6
            "configs/x.toml:2:1: unknown key 'optim.wxyzht_decay'; did you mean 'optim.weight_decay'?");
  EXPECT_EQ(error_of("[optim]\nwxyzhq_dexxx = 0.1\n"), "configs/x.toml:2:1: unknown key 'optim.wxyzhq_dexxx'");
  const std::string name(200000, 'x');
  EXPECT_EQ(error_of("[train]\n" + name + " = 1\n"),
            "configs/x.toml:2:1: unknown key 'train." + name.substr(0, 74) + "...' (200006 characters)");
}

// A file that is not a config (a data file given by mistake) is refused in 51 lines: the
// first 50 problems, as a compiler stops at its error limit, and their count.
TEST(ConfigErrors, ManyProblemsAreCountedBeyondTheFirstFifty) {
  std::string text = "[train]\n";
  for (int i = 0; i < 1000; ++i) text += "stepz" + std::to_string(i) + " = 1\n";
  const std::vector<std::string> lines = lines_of(error_of(text));
  ASSERT_EQ(lines.size(), 51u);
  EXPECT_EQ(lines[0], "configs/x.toml:2:1: unknown key 'train.stepz0'; did you mean 'train.steps'?");
  EXPECT_EQ(lines[50], "... and 950 more problems");
}

TEST(ConfigErrors, UnknownSectionWithDidYouMean) {
  EXPECT_EQ(error_of("[train]\nsteps = 1\n[trian]\nsteps = 2\n"),
            "configs/x.toml:3:1: unknown section 'trian'; did you mean 'train'?");
  EXPECT_EQ(error_of("[optimizer]\n"), "configs/x.toml:1:1: unknown section 'optimizer'");
  EXPECT_EQ(error_of("zero = 2\n"), "configs/x.toml:1:8: 'zero' must be a section ([zero]), found integer 2");
}

TEST(ConfigErrors, WrongTypeNamesPositionKeyExpectedTypeAndValue) {
  EXPECT_EQ(error_of("[launch]\nmaster_port = \"29500\"\n"),
            "configs/x.toml:2:15: launch.master_port: expected integer in [1, 65535], found string \"29500\"");
  EXPECT_EQ(error_of("[train]\nsteps = 2.5\n"),
            "configs/x.toml:2:9: train.steps: expected integer >= 1, found float 2.5");
  EXPECT_EQ(error_of("[data]\nshuffle = 1\n"), "configs/x.toml:2:11: data.shuffle: expected boolean, found integer 1");
  EXPECT_EQ(error_of("[launch]\nbackend = 3\n"),
            "configs/x.toml:2:11: launch.backend: expected one of \"auto\", \"nccl\", \"gloo\", found integer 3");
  EXPECT_EQ(error_of("[launch]\nnproc_per_node = true\n"),
            "configs/x.toml:2:18: launch.nproc_per_node: expected integer in [1, 4096], or \"auto\", found boolean true");
  EXPECT_EQ(error_of("[launch]\nargs = \"--x\"\n"),
            "configs/x.toml:2:8: launch.args: expected array of strings, found string \"--x\"");
  // Elements are checked one by one, at their own position.
  EXPECT_EQ(error_of("[launch]\nargs = [\"a\", 1, \"b\", [2]]\n"),
            "configs/x.toml:2:14: launch.args[1]: expected string, found integer 1\n"
            "configs/x.toml:2:22: launch.args[3]: expected string, found array [2]");
  EXPECT_EQ(error_of("[launch.env]\nA = \"1\"\nB = 2\n"),
            "configs/x.toml:3:5: launch.env.B: expected string, found integer 2");
}

TEST(ConfigErrors, OutOfRangeValuesNameTheAllowedRange) {
  EXPECT_EQ(error_of("[launch]\nmaster_port = 70000\n"),
            "configs/x.toml:2:15: launch.master_port = 70000 is out of range: must be in [1, 65535]");
  EXPECT_EQ(error_of("[zero]\nstage = 5\n"), "configs/x.toml:2:9: zero.stage = 5 is out of range: must be in [0, 3]");
  EXPECT_EQ(error_of("[launch]\nnproc_per_node = -1\n"),
            "configs/x.toml:2:18: launch.nproc_per_node = -1 is out of range: must be in [1, 4096] or \"auto\"");
  EXPECT_EQ(error_of("[launch]\nnproc_per_node = 0\n"),
            "configs/x.toml:2:18: launch.nproc_per_node = 0 is out of range: must be in [1, 4096] or \"auto\"");
  EXPECT_EQ(error_of("[launch]\nnproc_per_node = \"all\"\n"),
            "configs/x.toml:2:18: launch.nproc_per_node = \"all\" is not allowed: must be integer in [1, 4096], or \"auto\"");
  EXPECT_EQ(error_of("[launch]\nbackend = \"mpi\"\n"),
            "configs/x.toml:2:11: launch.backend = \"mpi\" is not allowed: "
            "must be one of \"auto\", \"nccl\", \"gloo\"");
  // Addresses are resolved as written: a bracketed IPv6 address never resolved.
  EXPECT_NE(error_of("[launch]\nmaster_addr = \"[fd00::1]\"\n")
                .find("launch.master_addr = \"[fd00::1]\": write an IPv6 address without brackets (fd00::1)"),
            std::string::npos);
  // fp32's smallest normal: a smaller eps became 0 in the fp32 optimizer (0 / 0 = NaN).
  EXPECT_EQ(error_of("[optim]\neps = 1e-50\n"),
            "configs/x.toml:2:7: optim.eps = 1e-50 is out of range: must be in [1.17549e-38, 3.40282e+38]");
  EXPECT_EQ(error_of("[optim]\nbeta1 = 1.0\n"),
            "configs/x.toml:2:9: optim.beta1 = 1.0 is out of range: must be in [0, 1)");
  EXPECT_EQ(error_of("[optim]\nlr = nan\n"), "configs/x.toml:2:6: optim.lr = nan is not a finite number: must be in (0, 1000]");
  EXPECT_EQ(error_of("[launch]\nmaster_addr = \"\"\n"), "configs/x.toml:2:15: launch.master_addr must not be empty");
  // Beyond what the field can hold (an int).
  EXPECT_EQ(error_of("[model]\nd_model = 4294967296\n"),
            "configs/x.toml:2:11: model.d_model = 4294967296 is out of range: must be in [1, 1048576]");
}

TEST(ConfigErrors, CrossFieldConflictsPrintEveryValueInvolved) {
  StatusOr<Config> c = parse_config("[train]\nglobal_batch = 30\nmicro_batch = 4\n", "configs/x.toml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();  // fine until the world size is known
  const Status s = validate_for_world(*c, 2);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "configs/x.toml:2:16: train.global_batch (30) is not divisible by "
            "train.micro_batch (4) x world size (2) = 8");
  EXPECT_TRUE(validate_for_world(*c, 1).ok() == false);  // 30 % 4 != 0 either
  StatusOr<Config> accum =
      parse_config("[train]\nglobal_batch = 32\nmicro_batch = 4\naccum_steps = 2\n", "configs/x.toml");
  ASSERT_TRUE(accum.ok()) << accum.status().to_string();
  EXPECT_TRUE(validate_for_world(*accum, 4).ok());
  EXPECT_EQ(validate_for_world(*accum, 2).message(),
            "configs/x.toml:4:15: train.accum_steps (2) does not match train.global_batch (32) / "
            "(train.micro_batch (4) x world size (2)) = 4");
  EXPECT_EQ(validate_for_world(Config(), 0).message(), "<defaults>: world size (0) must be >= 1");
}

TEST(ConfigErrors, CrossFieldConflictsFoundWithoutTheWorldSize) {
  EXPECT_EQ(error_of("[launch]\nnnodes = 2\nnode_rank = 2\n"),
            "configs/x.toml:3:13: launch.node_rank (2) must be less than launch.nnodes (2)");
  EXPECT_EQ(error_of("[train]\nglobal_batch = 30\nmicro_batch = 4\naccum_steps = 2\n"),
            "configs/x.toml:2:16: train.global_batch (30) is not divisible by train.micro_batch (4) x "
            "train.accum_steps (2) = 8");
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\nd_model = 100\nn_heads = 3\n"),
            "configs/x.toml:3:11: model.d_model (100) is not divisible by model.n_heads (3) (model.kind = \"gpt\")");
  // (model.kind = "gpt": the default mlp trains on synthetic data only, a second error.)
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\n[data]\nkind = \"tokens\"\n"),
            "configs/x.toml:4:8: data.path must be set when data.kind = \"tokens\"");
  EXPECT_EQ(error_of("[optim]\nwarmup_steps = 200\nmin_lr = 1.0\n"),
            "configs/x.toml:2:16: optim.warmup_steps (200) exceeds train.steps (100)\n"
            "configs/x.toml:3:10: optim.min_lr (1.0) exceeds optim.lr (0.0003)");
  // Sharded accumulation needs the gradient shard of stages 2-3; "local" works everywhere.
  EXPECT_EQ(error_of("[zero]\nstage = 1\naccumulate = \"sharded\"\n"),
            "configs/x.toml:3:14: zero.accumulate = \"sharded\" needs zero.stage 2 or 3 (the gradient shard it "
            "accumulates into); zero.stage is 1: use \"local\"");
  EXPECT_EQ(error_of("[zero]\naccumulate = \"sharded\"\n", {"zero.stage=0"}),
            "configs/x.toml:2:14: zero.accumulate = \"sharded\" needs zero.stage 2 or 3 (the gradient shard it "
            "accumulates into); zero.stage is 0: use \"local\" (with --set zero.stage=0)");
  // A --set that makes a file's line wrong is named beside that line.
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\nd_model = 16\nn_heads = 2\n", {"model.n_heads=3"}),
            "configs/x.toml:3:11: model.d_model (16) is not divisible by model.n_heads (3) (model.kind = \"gpt\") "
            "(with --set model.n_heads=3)");
  EXPECT_TRUE(parse_config("[zero]\nstage = 3\naccumulate = \"sharded\"\n", "configs/x.toml").ok());
  EXPECT_TRUE(parse_config("[zero]\nstage = 0\naccumulate = \"local\"\n", "configs/x.toml").ok());
  // A decaying schedule needs a step after warmup: refused here, not at the engine's finalize.
  EXPECT_EQ(error_of("[train]\nsteps = 3\n[optim]\nschedule = \"cosine\"\nwarmup_steps = 3\n"),
            "configs/x.toml:5:16: optim.warmup_steps (3) must be less than train.steps (3) when "
            "optim.schedule = \"cosine\": the decay needs at least one step after warmup");
  EXPECT_EQ(error_of("[optim]\nschedule = \"linear\"\n", {"optim.warmup_steps=101"}),
            "--set optim.warmup_steps=101: optim.warmup_steps (101) must be less than train.steps (100) when "
            "optim.schedule = \"linear\": the decay needs at least one step after warmup");
  // Constant after warmup: warming up over every step is allowed.
  EXPECT_TRUE(parse_config("[train]\nsteps = 3\n[optim]\nwarmup_steps = 3\n", "configs/x.toml").ok());
  EXPECT_TRUE(parse_config("[train]\nsteps = 4\n[optim]\nschedule = \"cosine\"\nwarmup_steps = 3\n",
                           "configs/x.toml").ok());
  EXPECT_EQ(error_of("[checkpoint]\nevery_steps = 10\n"),
            "configs/x.toml:2:15: checkpoint.every_steps (10) needs checkpoint.dir: where should the checkpoints go?");
  EXPECT_EQ(error_of("[checkpoint]\nresume = \"\"\n"),
            "configs/x.toml:2:10: checkpoint.resume must not be empty");
  EXPECT_EQ(error_of("[profile]\nenabled = true\nactive_steps = 99\n"),
            "configs/x.toml:3:16: profile.warmup_steps (2) + profile.active_steps (99) = 101 "
            "exceeds train.steps (100)");
  EXPECT_EQ(error_of("[profile]\nenabled = true\nwarmup_steps = 100\n"),
            "configs/x.toml:3:16: profile.warmup_steps (100) leaves no step of train.steps (100) to measure");
}

// Keys that would otherwise do less than they say are refused where they cannot apply.
TEST(ConfigErrors, KeysThatCannotApplyAreRefusedNamingTheKey) {
  // The mlp initialises with 1/sqrt(d_model); model.init_std is the gpt's.
  EXPECT_EQ(error_of("[model]\nkind = \"mlp\"\ninit_std = 0.05\n"),
            "configs/x.toml:3:12: model.init_std (0.05) applies to model.kind = \"gpt\" only; the mlp initialises its "
            "weights with std 1/sqrt(d_model): leave model.init_std out");
  EXPECT_TRUE(parse_config("[model]\nkind = \"gpt\"\ninit_std = 0.05\n", "configs/x.toml").ok());
  // Fused attention is cuDNN's, 16-bit only; the mlp has no attention.
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\nattention = \"fused\"\n"),
            "configs/x.toml:3:13: model.attention = \"fused\" (cuDNN flash attention, on GPUs) needs model.dtype "
            "\"bf16\" or \"fp16\"; model.dtype is \"fp32\": use model.attention = \"batched\" or \"auto\"");
  EXPECT_EQ(error_of("[model]\nattention = \"batched\"\n"),
            "configs/x.toml:2:13: model.attention (\"batched\") applies to model.kind = \"gpt\" only: the mlp has no "
            "attention; leave it out");
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\nattention = \"flash\"\n"),
            "configs/x.toml:3:13: model.attention = \"flash\" is not allowed: must be one of \"auto\", \"fused\", "
            "\"batched\"");
  EXPECT_TRUE(parse_config("[model]\nkind = \"gpt\"\ndtype = \"bf16\"\nattention = \"fused\"\n", "configs/x.toml").ok());
  EXPECT_TRUE(parse_config("[model]\nkind = \"gpt\"\nattention = \"batched\"\n", "configs/x.toml").ok());
  // Kernel timing is the gpt's, in profiling runs.
  EXPECT_EQ(error_of("[model]\nkind = \"gpt\"\n[profile]\nkernels = true\n"),
            "configs/x.toml:4:11: profile.kernels = true times kernels in profiling runs only: set profile.enabled = "
            "true too");
  EXPECT_EQ(error_of("[profile]\nenabled = true\nkernels = true\n"),
            "configs/x.toml:3:11: profile.kernels = true times the gpt model's kernel regions (what the planner's GPU "
            "step model predicts); the mlp has none: leave it out");
  EXPECT_TRUE(parse_config("[model]\nkind = \"gpt\"\n[profile]\nenabled = true\nkernels = true\n", "configs/x.toml").ok());
  // Stochastic rounding rounds into bf16/fp16 parameters; fp32 ones are the masters.
  EXPECT_EQ(error_of("[optim]\nrounding = \"stochastic\"\n"),
            "configs/x.toml:2:12: optim.rounding = \"stochastic\" needs model.dtype \"bf16\" or \"fp16\" (it rounds "
            "the fp32 master weights into 16-bit parameters); model.dtype is \"fp32\"");
  EXPECT_EQ(error_of("[model]\ndtype = \"fp32\"\n", {"optim.rounding=stochastic"}),
            "--set optim.rounding=stochastic: optim.rounding = \"stochastic\" needs model.dtype \"bf16\" or \"fp16\" "
            "(it rounds the fp32 master weights into 16-bit parameters); model.dtype is \"fp32\"");
  EXPECT_TRUE(parse_config("[model]\ndtype = \"bf16\"\n[optim]\nrounding = \"stochastic\"\n", "configs/x.toml").ok());
  EXPECT_TRUE(parse_config("[model]\ndtype = \"fp16\"\n[optim]\nrounding = \"stochastic\"\n", "configs/x.toml").ok());
  EXPECT_EQ(error_of("[optim]\nrounding = \"up\"\n"),
            "configs/x.toml:2:12: optim.rounding = \"up\" is not allowed: must be one of \"nearest\", \"stochastic\"");
  // The engine's own options are held to the same rule.
  Config code;
  code.optim.rounding = ParamRounding::kStochastic;
  const Status engine = validate_keys(code, {"optim.", "model.dtype"});
  EXPECT_NE(engine.message().find("optim.rounding = \"stochastic\" needs model.dtype"), std::string::npos)
      << engine.message();
}

// Text that a rank could not use as given: a NUL (the path or argument ends there), bytes
// that are not UTF-8 (the resolved config written for the ranks would not parse), and
// environment names that set another variable or one dp-launch sets itself.
TEST(ConfigErrors, TextThatCannotReachTheRanksAsWrittenIsRefused) {
  EXPECT_EQ(error_of("[launch]\nlog_dir = \"logs\\u0000zzz\"\n"),
            "configs/x.toml:2:11: launch.log_dir contains a NUL byte");
  EXPECT_EQ(error_of("", {"checkpoint.dir=ck\xff"}),
            "--set checkpoint.dir=ck\xff: checkpoint.dir is not valid UTF-8 (byte 2)");
  EXPECT_EQ(error_of("[launch]\nargs = [\"a\\u0000b\"]\n"), "configs/x.toml:2:8: launch.args[0] contains a NUL byte");
  EXPECT_NE(error_of("[launch.env]\n\"A=B\" = \"c\"\n").find("the name \"A=B\" is not a variable name"),
            std::string::npos);
  EXPECT_NE(error_of("", {"launch.env.=x"}).find("the name \"\" is not a variable name"), std::string::npos);
  EXPECT_NE(error_of("[launch.env]\nRANK = \"7\"\n").find("launch.env.RANK: dp-launch sets RANK for each rank"),
            std::string::npos);
  // Names no program reads as meant (quotes kept, dots, spaces), and the run id dp-launch
  // sets after launch.env (accepted, and silently replaced).
  for (const char* name : {"\"\\\"Q\\\"\"", "\"A.B\"", "\"C D\"", "\"9X\""}) {
    EXPECT_NE(error_of(std::string("[launch.env]\n") + name + " = \"x\"\n").find("is not a variable name"),
              std::string::npos)
        << name;
  }
  EXPECT_NE(error_of("", {"launch.env.ZDP_RUN_ID=mine"}).find("dp-launch sets ZDP_RUN_ID"), std::string::npos);
  // fp32's range: 1e39 became infinity inside the ranks, after the config was accepted.
  EXPECT_NE(error_of("", {"optim.weight_decay=1e39"}).find("optim.weight_decay"), std::string::npos);
  EXPECT_NE(error_of("", {"optim.eps=1e39"}).find("optim.eps"), std::string::npos);
  EXPECT_TRUE(parse_config("[launch.env]\nZDP_TEST = \"ok\"\nOMP_NUM_THREADS = \"4\"\n", "configs/x.toml").ok());
}

// Values whose combination a rank would refuse (or misread) are refused at load.
TEST(ConfigErrors, DerivedValuesAreCheckedBeforeAnythingStarts) {
  // The learning rate after its batch-size rule, refused only inside the ranks before.
  EXPECT_NE(error_of("[optim]\nlr = 1.0\nlr_scaling = \"linear\"\nbase_batch = 1\n[train]\nglobal_batch = 2048\n"
                     "micro_batch = 2048\n")
                .find("optim.lr (1.0) scaled by optim.lr_scaling = \"linear\" from optim.base_batch (1) to "
                      "train.global_batch (2048) is 2048.0, above optim.lr's bound (1000.0)"),
            std::string::npos);
  // warmup + active overflowed int64 and passed, and the profile measured nothing.
  EXPECT_NE(error_of("[profile]\nenabled = true\nwarmup_steps = 1\nactive_steps = 9223372036854775807\n")
                .find("= more than 9223372036854775807 exceeds train.steps"),
            std::string::npos);
}

TEST(ConfigErrors, ARefusedValueDoesNotCauseCrossFieldNoise) {
  // global_batch keeps its default after the type error; checks that involve it are skipped.
  EXPECT_EQ(error_of("[train]\nglobal_batch = \"x\"\nmicro_batch = 3\naccum_steps = 1\n"),
            "configs/x.toml:2:16: train.global_batch: expected integer in [1, 1073741824], found string \"x\"");
}

TEST(ConfigErrors, SyntaxErrorNamesLineAndColumn) {
  const std::string message = error_of("[train]\nsteps = 3\nseed = \n");
  EXPECT_EQ(message.rfind("configs/x.toml:3:", 0), 0u) << message;
  EXPECT_NE(message.find("invalid TOML: "), std::string::npos) << message;
  const std::string dup = error_of("[train]\nsteps = 3\nsteps = 4\n");
  EXPECT_EQ(dup.rfind("configs/x.toml:3:", 0), 0u) << dup;
}

TEST(ConfigErrors, SetErrorsNameTheOverride) {
  EXPECT_EQ(error_of("", {"zero.stage=9"}), "--set zero.stage=9: zero.stage = 9 is out of range: must be in [0, 3]");
  EXPECT_EQ(error_of("", {"train.micro_bach=4"}),
            "--set train.micro_bach=4: unknown key 'train.micro_bach'; did you mean 'train.micro_batch'?");
  EXPECT_EQ(error_of("", {"zero.stage"}), "--set zero.stage: expected section.key=value");
  EXPECT_EQ(error_of("", {"launch.args=--x"}),
            "--set launch.args=--x: launch.args: expected array of strings, found string \"--x\"");
  EXPECT_EQ(error_of("", {"launch.backend=mpi"}),
            "--set launch.backend=mpi: launch.backend = \"mpi\" is not allowed: "
            "must be one of \"auto\", \"nccl\", \"gloo\"");
  EXPECT_EQ(error_of("", {"train.steps=ten"}),
            "--set train.steps=ten: train.steps: expected integer >= 1, found string \"ten\"");
  EXPECT_EQ(error_of("", {"zero.stage.x=1"}),
            "--set zero.stage.x=1: unknown key 'zero.stage.x'; did you mean 'zero.stage'?");
  EXPECT_EQ(error_of("", {"=1"}), "--set =1: expected section.key=value");
  // TOML++ reads "10 # 20" as 10: what follows a TOML value is refused, not dropped, at any
  // position (code points after a multi-byte character, a later line of an array).
  const std::string after = " (a --set holds one TOML value; quote a string that holds '#')";
  EXPECT_EQ(error_of("", {"train.steps=10 # 20"}), "--set train.steps=10 # 20: text after the value: '# 20'" + after);
  EXPECT_EQ(error_of("", {"checkpoint.dir=\"caf\u00e9\" #x"}),
            "--set checkpoint.dir=\"caf\u00e9\" #x: text after the value: '#x'" + after);
  EXPECT_EQ(error_of("", {"launch.args=[\"\u00e9\u00e9\",\n\"b\"] # c"}),
            "--set launch.args=[\"\u00e9\u00e9\",\n\"b\"] # c: text after the value: '# c'" + after);
  StatusOr<Config> spaced = parse_config("", "configs/x.toml", {"launch.args=[\"\u00e9\",\n\"b\"]  \t"});
  ASSERT_TRUE(spaced.ok()) << spaced.status().message();
  EXPECT_EQ(spaced->launch.args, (std::vector<std::string>{"\u00e9", "b"}));
  // A cross-field conflict created by a --set is reported at that --set.
  EXPECT_EQ(error_of("[launch]\nnnodes = 2\n", {"launch.node_rank=5"}),
            "--set launch.node_rank=5: launch.node_rank (5) must be less than launch.nnodes (2)");
}

TEST(ConfigErrors, AllProblemsOfOneRunAreReportedTogether) {
  const std::string message = error_of(
      "[launch]\n"
      "master_port = 70000\n"  // out of range
      "backend = \"mpi\"\n"    // not allowed
      "node_rank = 3\n"        // not below nnodes (default 1)
      "[train]\n"
      "micro_bach = 4\n"       // unknown key
      "steps = \"many\"\n"     // wrong type
      "[optim]\n"
      "warmup_steps = 500\n"   // exceeds train.steps, but train.steps was refused: not checked
      "[zeroo]\n",             // unknown section
      {"zero.stage=9", "nope.key=1"});
  const std::vector<std::string> lines = lines_of(message);
  ASSERT_EQ(lines.size(), 8u) << message;
  // File problems in line order, then --set problems in order, then cross-field ones.
  EXPECT_EQ(lines[0].rfind("configs/x.toml:2:15: launch.master_port", 0), 0u) << message;
  EXPECT_EQ(lines[1].rfind("configs/x.toml:3:11: launch.backend", 0), 0u) << message;
  EXPECT_EQ(lines[2].rfind("configs/x.toml:6:1: unknown key 'train.micro_bach'", 0), 0u) << message;
  EXPECT_EQ(lines[3].rfind("configs/x.toml:7:9: train.steps: expected integer", 0), 0u) << message;
  EXPECT_EQ(lines[4].rfind("configs/x.toml:10:1: unknown section 'zeroo'", 0), 0u) << message;
  EXPECT_EQ(lines[5].rfind("--set zero.stage=9: ", 0), 0u) << message;
  EXPECT_EQ(lines[6].rfind("--set nope.key=1: unknown key 'nope.key'", 0), 0u) << message;
  EXPECT_EQ(lines[7], "configs/x.toml:4:13: launch.node_rank (3) must be less than launch.nnodes (1)") << message;
}

// A resolved config (dp-launch's, or --dry-run's output saved) names the user's place in a
// comment, which errors name while its values digest matches; an edited copy kept the
// comment of a value it no longer held, and its errors blamed a file that said otherwise:
// now they name the line read too.
TEST(ConfigErrors, AResolvedConfigEditedByHandNamesTheLineReadBesideTheComment) {
  Config c = parse_config("[train]\nsteps = 4\n[optim]\nschedule = \"cosine\"\nwarmup_steps = 2\n", "configs/user.toml")
                 .value();
  const std::string resolved = describe_resolved(c);
  ASSERT_TRUE(parse_config(resolved, "resolved.toml").ok());
  // As written, a rank's errors name the user's place alone (the values changed in code).
  std::string edited = resolved;
  const size_t at = edited.find("warmup_steps = 2");
  ASSERT_NE(at, std::string::npos) << resolved;
  edited.replace(at, 16, "warmup_steps = 9");
  StatusOr<Config> bad = parse_config(edited, "resolved.toml");
  ASSERT_FALSE(bad.ok());
  const std::string line = std::to_string(std::count(edited.begin(), edited.begin() + static_cast<long>(at), '\n') + 1);
  EXPECT_NE(bad.status().message().find("resolved.toml:" + line + ":16 (from configs/user.toml:5:16): optim.warmup_steps (9)"),
            std::string::npos)
      << bad.status().message();
  // dp-launch's own file, as written: the user's place alone.
  StatusOr<Config> intact = parse_config(resolved, "resolved.toml");
  EXPECT_EQ(intact->where("optim.warmup_steps"), "configs/user.toml:5:16");
  c.optim.warmup_steps = 9;  // refused by the ranks' check of a file written with it
  StatusOr<Config> written = parse_config(describe_resolved(c), "resolved.toml");
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.status().message().find("configs/user.toml:5:16: optim.warmup_steps (9)"), std::string::npos)
      << written.status().message();
}

// The comment after a value is found past the value's end, which TOML++ gives in code
// points: a value with multi-byte characters and a '#' was searched from inside itself.
TEST(ConfigErrors, AResolvedValueWithMultiByteTextAndAHashKeepsItsOrigin) {
  const Config c = parse_config("[model]\nkind = \"gpt\"\n[data]\nkind = \"tokens\"\n"
                                "path = \"/d/\u20ac\u20ac\u20ac\u20ac#x.bin\"\n",
                                "configs/user.toml")
                       .value();
  StatusOr<Config> read = parse_config(describe_resolved(c), "resolved.toml");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->data.path, c.data.path);
  EXPECT_EQ(read->where("data.path"), "configs/user.toml:5:8");
}

TEST(ConfigErrors, ValidateForWorldRechecksAConfigBuiltInCode) {
  Config c;
  c.zero.stage = 7;
  c.launch.master_port = 0;
  c.train.global_batch = 30;
  c.train.micro_batch = 4;
  const std::vector<std::string> lines = lines_of(validate_for_world(c, 2).message());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "<defaults>: launch.master_port = 0 is out of range: must be in [1, 65535]");
  EXPECT_EQ(lines[1], "<defaults>: zero.stage = 7 is out of range: must be in [0, 3]");
  EXPECT_EQ(lines[2],
            "<defaults>: train.global_batch (30) is not divisible by train.micro_batch (4) x world size (2) = 8");
}

}  // namespace
}  // namespace zdp
