// dp-train's checkpoint decisions without an engine: when a checkpoint is due, what the
// trainer stores, what a resume reports as changed, and $ZDP_TRAIN_FAULT's syntax.
#include <gtest/gtest.h>

#include <algorithm>

#include "trainer/loop/checkpointing.h"
#include "trainer/loop/train_fault.h"

namespace zdp::trainer {
namespace {

TEST(TrainerCheckpointing, DueEveryNStepsAndAfterTheLastOnlyWithADir) {
  Config c;
  c.train.steps = 25;
  c.checkpoint.every_steps = 10;
  for (int64_t done : {10, 20, 25, 5}) EXPECT_FALSE(checkpoint_due(c, done)) << "no dir, no checkpoint: " << done;
  c.checkpoint.dir = "ckpt";
  std::vector<int64_t> due;
  for (int64_t done = 1; done <= 25; ++done) {
    if (checkpoint_due(c, done)) due.push_back(done);
  }
  EXPECT_EQ(due, (std::vector<int64_t>{10, 20, 25}));
  c.checkpoint.every_steps = 0;  // only after the last step
  due.clear();
  for (int64_t done = 1; done <= 25; ++done) {
    if (checkpoint_due(c, done)) due.push_back(done);
  }
  EXPECT_EQ(due, (std::vector<int64_t>{25}));
}

TEST(TrainerCheckpointing, TrainerStateHoldsTheConfigAndWhatTheDataPositionMeans) {
  Config c;
  c.train.seed = 99;
  c.train.global_batch = 48;
  LossHistory history;
  for (int s = 1; s <= 3; ++s) history.add_step(s, 1.0 / s, 100);
  const nlohmann::json j = trainer_state(c, {1000, "corpus"}, history);
  EXPECT_EQ(j.at("history").at("step"), nlohmann::json({1, 2, 3}));  // loss.svg continues from it
  EXPECT_EQ(j.at("seed"), 99);
  EXPECT_EQ(j.at("global_batch"), 48);
  EXPECT_EQ(j.at("dataset_samples"), 1000);
  EXPECT_EQ(j.at("shuffle"), true);
  StatusOr<Config> back = parse_config(j.at("config").get<std::string>(), "saved");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, c);
}

TEST(TrainerCheckpointing, ResumeNotesNameEveryChangeWithBothValues) {
  Config c;
  c.zero.stage = 2;
  CheckpointState saved;
  saved.world_size = 4;
  saved.stage = 2;
  saved.compute_dtype = "fp32";
  saved.data_position = 320;
  saved.trainer_json = trainer_state(c, {1000, "corpus"}).dump();
  EXPECT_TRUE(resume_notes(saved, c, 4, {1000, "corpus"}).empty());

  Config other = c;
  other.zero.stage = 3;
  other.train.global_batch = 16;
  other.train.seed = 7;
  const std::vector<std::string> notes = resume_notes(saved, other, 2, {1000, "corpus"});
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[0], "saved by 4 rank(s) at ZeRO stage 2, loaded by 2 rank(s) at stage 3 (re-sharded)");
  EXPECT_EQ(notes[1], "train.global_batch 8 at save, 16 now: the data continues at position 320 with the new batch");
  EXPECT_NE(notes[2].find("train.seed 1234 -> 7"), std::string::npos) << notes[2];
  // Another end for a decaying schedule moves the learning rate: said. A constant one: not.
  Config longer = c;
  longer.train.steps = c.train.steps * 2;
  longer.optim.schedule = LrSchedule::kCosine;
  const std::vector<std::string> stretched = resume_notes(saved, longer, 4, {1000, "corpus"});
  ASSERT_EQ(stretched.size(), 1u);
  EXPECT_EQ(stretched[0], "train.steps " + std::to_string(c.train.steps) + " at save, " +
                              std::to_string(longer.train.steps) +
                              " now: the cosine schedule now ends at step " + std::to_string(longer.train.steps) +
                              ", so the learning rate continues from its value there, not from the saved run's");
  longer.optim.schedule = LrSchedule::kConstant;
  EXPECT_TRUE(resume_notes(saved, longer, 4, {1000, "corpus"}).empty());
  // As many samples of other contents (another corpus under data.path): said, once.
  const std::vector<std::string> rewritten = resume_notes(saved, c, 4, {1000, "other corpus"});
  ASSERT_EQ(rewritten.size(), 1u);
  EXPECT_EQ(rewritten[0], "the training data's contents differ from the saved run's (the same 1000 samples, sampled "
                          "digest corpus -> other corpus): the run continues at data position 320 of other data");
  // Unshuffled token files read one order whatever the seed: no note. Synthetic data is
  // drawn by the seed: said, shuffled or not.
  Config unshuffled = c;
  unshuffled.data.kind = DataKind::kTokens;
  unshuffled.data.shuffle = false;
  saved.trainer_json = trainer_state(unshuffled, {1000, "corpus"}).dump();
  unshuffled.train.seed = 99;
  EXPECT_TRUE(resume_notes(saved, unshuffled, 4, {1000, "corpus"}).empty());
  unshuffled.data.kind = DataKind::kSynthetic;
  EXPECT_EQ(resume_notes(saved, unshuffled, 4, {1000, "corpus"}).size(), 1u);
  // Another held-out file, or another eval_samples: the held-out curve measured other
  // samples before the resume (one line in loss.svg, without a word). The same: no note.
  saved.step = 40;
  saved.trainer_json = trainer_state(c, {1000, "corpus"}, {}, {500, "val"}).dump();
  EXPECT_TRUE(resume_notes(saved, c, 4, {1000, "corpus"}, {500, "val"}).empty());
  const std::vector<std::string> other_val = resume_notes(saved, c, 4, {1000, "corpus"}, {24, "val2"});
  ASSERT_EQ(other_val.size(), 1u);
  EXPECT_EQ(other_val[0], "the held-out loss now measures other samples than the saved run's (" +
                              std::to_string(std::min<int64_t>(c.train.eval_samples, 500)) + " of 500 held-out samples, digest val -> " +
                              std::to_string(std::min<int64_t>(c.train.eval_samples, 24)) +
                              " of 24, digest val2): the held-out points before step 40 and after it are not one curve");
  Config fewer = c;
  fewer.train.eval_samples = 3;
  EXPECT_EQ(resume_notes(saved, fewer, 4, {1000, "corpus"}, {500, "val"}).size(), 1u);
  EXPECT_TRUE(resume_notes(saved, c, 4, {1000, "corpus"}).empty()) << "no held-out set now: no curve to continue";
  // A checkpoint of a dp-train before the spread evaluation (no held-out fields, held-out
  // points in its history) measured a token file's first samples: said too.
  Config tokens = c;
  tokens.data.kind = DataKind::kTokens;
  LossHistory evaluated;
  evaluated.add_step(1, 2.0, 100);
  evaluated.add_eval(1, 2.5);
  saved.trainer_json = trainer_state(tokens, {1000, "corpus"}, evaluated).dump();
  const std::vector<std::string> older = resume_notes(saved, tokens, 4, {1000, "corpus"}, {500, "val"});
  ASSERT_EQ(older.size(), 1u);
  EXPECT_NE(older[0].find("the saved run's held-out points were measured on the held-out file's first samples"),
            std::string::npos) << older[0];
  // A checkpoint of another trainer (no trainer JSON): only what the engine saved counts.
  saved.trainer_json.clear();
  EXPECT_EQ(resume_notes(saved, other, 2, {5, "corpus"}).size(), 1u);
}

TEST(TrainerCheckpointing, SavedHistoryContinuesTheCurveOrIsRefusedWhenItRunsPastTheStep) {
  LossHistory history;
  for (int s = 1; s <= 3; ++s) history.add_step(s, 1.0 / s, 100);
  const std::string trainer = trainer_state(Config(), {1000, "corpus"}, history).dump();
  StatusOr<LossHistory> back = saved_history(trainer, 3);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->points().size(), 3u);
  EXPECT_TRUE(saved_history("", 3).value().points().empty());         // another trainer's checkpoint
  EXPECT_TRUE(saved_history("{\"seed\": 1}", 3).value().points().empty());  // an older dp-train's
  // Edited to run past the step it was saved at: the resumed steps would run it backwards.
  const StatusOr<LossHistory> past = saved_history(trainer, 2);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().message(), "loss history: it runs to step 3, past the checkpoint's step 2");
  nlohmann::json edited = nlohmann::json::parse(trainer);
  edited["history"]["stride"] = -4;
  EXPECT_NE(saved_history(edited.dump(), 3).status().message().find("'stride' = -4 is outside"), std::string::npos);
}

TEST(TrainerCheckpointing, PerNodeResumeTakesTheNewestStepEveryNodeHas) {
  EXPECT_EQ(common_resume_step({}, "d").value(), -1);
  EXPECT_EQ(common_resume_step({-1, -1}, "d").value(), -1);  // a fresh job
  EXPECT_EQ(common_resume_step({20, 20}, "d").value(), 20);
  EXPECT_EQ(common_resume_step({20, 10, 20}, "d").value(), 10);  // node 1 missed the last save
  StatusOr<int64_t> mixed = common_resume_step({20, -1, 10, -1}, "ckpt");
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), StatusCode::kNotFound);
  EXPECT_NE(mixed.status().message().find("node(s) 1, 3 have no checkpoint in ckpt but node(s) 0, 2 do (up to step 20)"),
            std::string::npos)
      << mixed.status().message();
}

// The engine's advice names API settings a dp-train user cannot reach; the trainer says
// what its config can do instead (the engine's own messages, as load and save return them).
TEST(TrainerCheckpointing, EngineAdviceIsGivenInConfigTerms) {
  EXPECT_EQ(in_config_terms("x/optimizer.safetensors holds the state of SGD, but the configured optimizer is AdamW: "
                            "configure the optimizer it was saved with, or load weights only "
                            "(LoadScope::kWeightsOnly) to start the optimizer afresh"),
            "x/optimizer.safetensors holds the state of SGD, but the configured optimizer is AdamW: configure the "
            "optimizer it was saved with, or start over with checkpoint.resume = \"never\" (dp-train resumes the "
            "whole state)");
  EXPECT_EQ(in_config_terms("s.json lists no optimizer.safetensors (load with LoadScope::kWeightsOnly to take the "
                            "weights alone)"),
            "s.json lists no optimizer.safetensors (dp-train resumes the whole state)");
  EXPECT_EQ(in_config_terms("d is shared with node 1: per-node storage is for node-local disks; use "
                            "CheckpointStorage::kShared here"),
            "d is shared with node 1: per-node storage is for node-local disks; set checkpoint.storage = \"shared\"");
  EXPECT_EQ(in_config_terms("no advice"), "no advice");
}

TEST(TrainFault, ParsesRankStepAndOptionalAttempt) {
  StatusOr<TrainFault> f = parse_train_fault("rank=1,step=13,attempt=0");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_TRUE(f->fires(1, 13, 0));
  EXPECT_FALSE(f->fires(1, 13, 1)) << "only in attempt 0";
  EXPECT_FALSE(f->fires(0, 13, 0));
  EXPECT_FALSE(f->fires(1, 12, 0));
  StatusOr<TrainFault> any = parse_train_fault("step=2,rank=0");
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any->fires(0, 2, 5));
  for (const char* bad : {"rank=1", "rank=1,step=x", "rank=1,step=2,when=3", "rank=1,rank=2,step=3", "rank=-1,step=2",
                          "rank=1;step=2", "rank=4294967297,step=2", "rank=1,step=2,attempt=4294967296",
                          "rank=1,step= 2"}) {
    StatusOr<TrainFault> r = parse_train_fault(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("ZDP_TRAIN_FAULT=\"") + bad + "\""), std::string::npos)
        << r.status().message();
  }
}

TEST(TrainFault, PhasesAndActions) {
  StatusOr<TrainFault> f = parse_train_fault("rank=0,step=4,phase=optimizer,action=stop");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->action, "stop");
  EXPECT_TRUE(f->fires(0, 4, 0, TrainPhase::kOptimizer));
  EXPECT_FALSE(f->fires(0, 4, 0, TrainPhase::kForward));
  EXPECT_FALSE(f->fires(0, 4, 0)) << "after_step is the default phase only";
  StatusOr<TrainFault> d = parse_train_fault("rank=0,step=4");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, "kill");
  EXPECT_EQ(d->phase, TrainPhase::kAfterStep);
  EXPECT_EQ(parse_train_fault("rank=0,step=4,action=slow,ms=250")->ms, 250);
  for (const char* bad : {"rank=0,step=1,phase=backward", "rank=0,step=1,action=pause", "rank=0,step=1,ms=-5",
                          "rank=0,step=1,action=slow,ms=9223372036854775807"}) {
    StatusOr<TrainFault> r = parse_train_fault(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("ZDP_TRAIN_FAULT=\"") + bad + "\""), std::string::npos);
  }
}

}  // namespace
}  // namespace zdp::trainer
