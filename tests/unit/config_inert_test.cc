// inert_settings (zdp/config.h): the keys a config sets that do nothing in it, each named
// where it was set, with the reason; defaults and keys that apply are never listed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zdp/config.h"

namespace zdp {
namespace {

std::vector<std::string> inert(const std::string& text, const std::vector<std::string>& sets = {}) {
  StatusOr<Config> c = parse_config(text, "run.toml", sets);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? inert_settings(*c) : std::vector<std::string>{"unparsed"};
}

TEST(ConfigInert, DefaultsAndKeysThatApplyAreNeverListed) {
  EXPECT_EQ(inert(""), std::vector<std::string>{});
  // Each key below applies where it is set.
  EXPECT_EQ(inert("[zero]\nstage = 3\nprefetch_layers = 2\n"
                  "[checkpoint]\ndir = \"ck\"\nkeep_last = 5\nstorage = \"per-node\"\n"
                  "[data]\nsynthetic_samples = 100\n[train]\neval_every = 5\neval_samples = 8\n"
                  "[optim]\nbeta2 = 0.95\neps = 1e-6\nschedule = \"cosine\"\nmin_lr = 1e-5\n"
                  "lr_scaling = \"linear\"\nbase_batch = 8\n"
                  "[model]\nkind = \"gpt\"\nn_heads = 2\nseq_len = 32\n"),
            std::vector<std::string>{});
  // Tokens with held-out data evaluate.
  EXPECT_EQ(inert("[model]\nkind = \"gpt\"\n[data]\nkind = \"tokens\"\npath = \"t.bin\"\nval_path = \"v.bin\"\n"
                  "[train]\neval_every = 5\n"),
            std::vector<std::string>{});
}

TEST(ConfigInert, EachInertKeyIsNamedWhereItWasSetWithTheReason) {
  const std::vector<std::string> notes = inert(
      "[zero]\nstage = 2\nprefetch_layers = 2\n"
      "[checkpoint]\nkeep_last = 5\n"
      "[optim]\nname = \"sgd\"\nbeta2 = 0.95\neps = 1e-6\nmin_lr = 0.0\nbase_batch = 8\n"
      "[model]\nn_heads = 2\nseq_len = 32\n");
  const std::vector<std::string> expected = {
      "run.toml:3:19: zero.prefetch_layers has no effect: only zero.stage = 3 gathers parameters ahead of use "
      "(zero.stage is 2)",
      "run.toml:5:13: checkpoint.keep_last has no effect: no checkpoints are written (checkpoint.dir is empty)",
      "run.toml:8:9: optim.beta2 has no effect: optim.name = \"sgd\" keeps no second moment (optim.beta1 is its "
      "momentum)",
      "run.toml:9:7: optim.eps has no effect: optim.name = \"sgd\" has no denominator",
      "run.toml:10:10: optim.min_lr has no effect: optim.schedule = \"constant\" never decays to it",
      "run.toml:11:14: optim.base_batch has no effect: optim.lr_scaling = \"none\" scales nothing by it",
      "run.toml:13:11: model.n_heads has no effect: the mlp has no attention (model.kind = \"mlp\")",
      "run.toml:14:11: model.seq_len has no effect: the mlp's samples are vectors, not sequences (model.kind = "
      "\"mlp\")",
  };
  EXPECT_EQ(notes, expected);
}

TEST(ConfigInert, HeldOutKeysWithoutHeldOutTokensAndSyntheticSizeWithTokens) {
  const std::string tokens = "[model]\nkind = \"gpt\"\n[data]\nkind = \"tokens\"\npath = \"t.bin\"\n";
  const std::vector<std::string> notes =
      inert(tokens, {"train.eval_every=5", "train.eval_samples=8", "data.synthetic_samples=100"});
  const std::vector<std::string> expected = {
      "--set train.eval_every=5: train.eval_every has no effect: nothing is evaluated (data.kind = \"tokens\" and "
      "data.val_path is empty)",
      "--set train.eval_samples=8: train.eval_samples has no effect: nothing is evaluated (data.kind = \"tokens\" "
      "and data.val_path is empty)",
      "--set data.synthetic_samples=100: data.synthetic_samples has no effect: it sizes the synthetic data, and "
      "data.kind is \"tokens\"",
  };
  EXPECT_EQ(notes, expected);
}

// A token file given to a config that chose synthetic data on purpose (configs/mlp-cpu.toml
// sets data.kind; with the default kind the check refuses the path instead).
TEST(ConfigInert, TokenFilesUnderChosenSyntheticDataAreNotes) {
  EXPECT_EQ(inert("[data]\nkind = \"synthetic\"\n", {"data.path=x.bin", "data.val_path=v.bin"}),
            (std::vector<std::string>{
                "--set data.path=x.bin: data.path has no effect: data.kind = \"synthetic\" generates its samples and "
                "reads no file",
                "--set data.val_path=v.bin: data.val_path has no effect: data.kind = \"synthetic\" generates its "
                "samples and reads no file"}));
}

// Found by the audit of keys that do nothing: each ran silently.
TEST(ConfigInert, ScalingWithoutABaseResumeWithoutADirAndSwitchesOfOtherSetups) {
  const std::vector<std::string> notes =
      inert("[model]\nkind = \"gpt\"\n[launch]\nbackend = \"gloo\"\n",
            {"optim.lr_scaling=linear", "checkpoint.resume=auto", "optim.rounding=nearest", "zero.error_feedback=true",
             "train.accum_steps=1", "zero.accumulate=sharded", "model.attention=batched"});
  const std::vector<std::string> expected = {
      "--set optim.lr_scaling=linear: optim.lr_scaling has no effect: optim.base_batch is 0 (= train.global_batch): "
      "the ratio is 1 at every global batch",
      "--set checkpoint.resume=auto: checkpoint.resume has no effect: \"auto\" looks in checkpoint.dir, which is empty",
      "--set optim.rounding=nearest: optim.rounding has no effect: fp32 parameters are the masters, not rounded copies",
      "--set zero.error_feedback=true: zero.error_feedback has no effect: only a quantized zero.reduce_dtype "
      "(\"int8\", \"int4\") has a rounding error to feed back",
      "--set zero.accumulate=sharded: zero.accumulate has no effect: train.accum_steps is 1: nothing accumulates",
      "--set model.attention=batched: model.attention has no effect: CPU ranks (launch.backend = \"gloo\") always run "
      "the batched path; it chooses for GPUs",
  };
  EXPECT_EQ(notes, expected);
  // Where they apply: a base batch, a checkpoint dir, 16-bit parameters, quantized
  // gradients, accumulation, GPU ranks.
  EXPECT_EQ(inert("[model]\nkind = \"gpt\"\ndtype = \"bf16\"\n[launch]\nbackend = \"nccl\"\n",
                  {"optim.lr_scaling=linear", "optim.base_batch=8", "checkpoint.resume=auto", "checkpoint.dir=ck",
                   "optim.rounding=nearest", "zero.reduce_dtype=int8", "zero.stage=2", "zero.error_feedback=true",
                   "train.accum_steps=2", "zero.accumulate=sharded", "model.attention=batched"}),
            std::vector<std::string>{});
}

TEST(ConfigInert, AStageThreeConfigRunAtStageTwoSaysItsPrefetchIsIdle) {
  // The sweep the notes are for: a stage-3 config with --set zero.stage=2 still runs.
  StatusOr<Config> c = parse_config("[zero]\nstage = 3\nprefetch_layers = 2\n", "z3.toml", {"zero.stage=2"});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(validate_for_world(*c, 2).ok());
  ASSERT_EQ(inert_settings(*c).size(), 1u);
  EXPECT_EQ(inert_settings(*c)[0].rfind("z3.toml:3:19: zero.prefetch_layers has no effect", 0), 0u)
      << inert_settings(*c)[0];
}

TEST(ConfigInert, AnExplicitProfilingSwitchKeepsItsSettingsQuiet) {
  // profile.enabled = false is a switch; the settings under it wait for it (configs/gpu-gpt2.toml).
  EXPECT_EQ(inert("[profile]\nenabled = false\nwarmup_steps = 10\nactive_steps = 20\n"), std::vector<std::string>{});
}

// launch.rank_addr is Gloo's: with backend "nccl" it is said to do nothing (NCCL chooses
// its own address); with "gloo" it applies.
TEST(ConfigInert, ARankAddressUnderNcclIsSaidToDoNothing) {
  const std::vector<std::string> nccl = inert("[launch]\nbackend = \"nccl\"\nrank_addr = \"10.0.0.2\"\n");
  ASSERT_EQ(nccl.size(), 1u);
  EXPECT_EQ(nccl[0], "run.toml:3:13: launch.rank_addr has no effect: it is the address Gloo ranks advertise; NCCL "
                     "chooses its own (NCCL_SOCKET_IFNAME, launch.socket_ifname)");
  EXPECT_EQ(inert("[launch]\nbackend = \"gloo\"\nrank_addr = \"10.0.0.2\"\n"), std::vector<std::string>{});
}

// SGD's Nesterov momentum and dampening: notes under AdamW (and dampening without a
// momentum); refused where torch.optim.SGD refuses them, naming the keys.
TEST(ConfigInert, SgdsNesterovAndDampeningAreNotesUnderAdamwAndCheckedUnderSgd) {
  const std::vector<std::string> adamw = inert("[optim]\nnesterov = true\ndampening = 0.1\n");
  ASSERT_EQ(adamw.size(), 2u);
  EXPECT_EQ(adamw[0], "run.toml:3:13: optim.dampening has no effect: it is SGD's; optim.name is \"adamw\"");
  EXPECT_EQ(adamw[1], "run.toml:2:12: optim.nesterov has no effect: it is SGD's; optim.name is \"adamw\"");
  EXPECT_EQ(inert("[optim]\nname = \"sgd\"\nbeta1 = 0\ndampening = 0.1\n"),
            std::vector<std::string>{"run.toml:4:13: optim.dampening has no effect: optim.beta1 (SGD's momentum) is 0: "
                                     "there is no momentum to damp"});
  EXPECT_EQ(inert("[optim]\nname = \"sgd\"\nnesterov = true\n"), std::vector<std::string>{});
  StatusOr<Config> damped = parse_config("[optim]\nname = \"sgd\"\nnesterov = true\ndampening = 0.1\n", "run.toml");
  ASSERT_FALSE(damped.ok());
  EXPECT_NE(damped.status().message().find("optim.nesterov needs a momentum (optim.beta1 > 0, is 0.9) and no dampening "
                                           "(optim.dampening = 0, is 0.1), as torch.optim.SGD"),
            std::string::npos) << damped.status().message();
  EXPECT_FALSE(parse_config("[optim]\nname = \"sgd\"\nnesterov = true\nbeta1 = 0\n", "run.toml").ok());
}

}  // namespace
}  // namespace zdp
