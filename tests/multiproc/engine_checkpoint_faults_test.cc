// Checkpoints that must not load or must not be written, on real rank processes (CPU,
// Gloo): another optimizer's state is refused unless only the weights are loaded, damaged
// checkpoints are refused naming what and where, a rank killed during a save leaves the
// previous checkpoint loadable, ranks saving different steps and per-node storage on a
// shared directory are refused, and a write that fails on one rank of a per-node save is
// named on every rank. Resumes that work: engine_checkpoint_test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "testing/checkpoint_jobs.h"
#include "testing/engine_comparisons.h"
#include "testing/temp_dir.h"
#include "zdp/checkpoint.h"
#include "zdp/safetensors.h"

namespace zdp {
namespace {

using testing::EngineRun;
using testing::EngineRunResult;
using ::testing::HasSubstr;
using testing::max_difference;
using testing::run_engine;
using testing::TempDir;
using testing::checkpoint_jobs::file_bytes;
using testing::checkpoint_jobs::job;
using testing::checkpoint_jobs::options;
using testing::checkpoint_jobs::save_step_2;
using testing::checkpoint_jobs::sgd_job;

// What each rank's load_checkpoint returned, brought back through files.
std::vector<std::string> load_messages(
    int world, const std::string& path,
    const std::function<StatusOr<testing::TinyMlp>(Engine&)>& model = [](Engine& e) {
      return testing::TinyMlp::create(e);
    },
    const EngineOptions& engine_options = options(2), const LoadOptions& load = {}) {
  TempDir out;
  const std::string failures =
      testing::describe_failures(testing::fork_ranks(world, [&](int rank, int K, Store& store) -> Status {
        ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, K, store));
        Engine engine(ctx, engine_options);
        ZDP_RETURN_IF_ERROR(model(engine).status());
        ZDP_RETURN_IF_ERROR(engine.finalize());
        StatusOr<CheckpointState> loaded = engine.load_checkpoint(path, load);
        std::ofstream(out.path() + "/" + std::to_string(rank)) << (loaded.ok() ? "loaded" : loaded.status().message());
        return Status::Ok();
      }));
  EXPECT_EQ(failures, "");
  std::vector<std::string> messages;
  for (int r = 0; r < world; ++r) messages.push_back(file_bytes(out.path() + "/" + std::to_string(r)));
  return messages;
}

// What each rank's save_checkpoint(root, step_of(rank)) returned ("saved" or the error)
// after `steps` optimizer steps of TinyMlp on 2 ranks, brought back through files.
std::vector<std::string> save_messages(const std::string& root, int steps, const std::function<int64_t(int)>& step_of,
                                       int64_t data_position = 0, const SaveOptions& save = {}) {
  TempDir out;
  const std::string failures = testing::describe_failures(
      testing::fork_ranks(2, [&](int rank, int K, Store& store) -> Status {
        ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, K, store));
        Engine engine(ctx, options(2));
        ZDP_ASSIGN_OR_RETURN(testing::TinyMlp model, testing::TinyMlp::create(engine));
        ZDP_RETURN_IF_ERROR(engine.finalize());
        for (int step = 0; step < steps; ++step) {
          ZDP_RETURN_IF_ERROR(model.train_micro<float>(engine, step, rank * 12, 12).status());
          ZDP_RETURN_IF_ERROR(engine.step().status());
        }
        CheckpointState state;
        state.step = step_of(rank);
        state.data_position = data_position;
        StatusOr<std::string> saved = engine.save_checkpoint(root, state, save);
        std::ofstream(out.path() + "/" + std::to_string(rank)) << (saved.ok() ? "saved" : saved.status().message());
        return Status::Ok();
      }));
  EXPECT_EQ(failures, "");
  return {file_bytes(out.path() + "/0"), file_bytes(out.path() + "/1")};
}

// A checkpoint of another optimizer's state is refused, naming both, unless only the
// weights are loaded.
TEST(Checkpoint, AnotherOptimizersStateIsRefusedUnlessWeightsOnly) {
  TempDir dir;
  const std::string adamw = dir.path() + "/adamw", sgd = dir.path() + "/sgd", plain = dir.path() + "/plain";
  ASSERT_EQ(save_step_2(job(2, 2), adamw), "");
  ASSERT_EQ(save_step_2(sgd_job(2, 2, 0.9), sgd), "");
  ASSERT_EQ(save_step_2(sgd_job(2, 2, 0.0), plain), "");

  const std::string adamw_state = "adamw (exp_avg and exp_avg_sq per parameter)";
  const std::string momentum_state = "sgd with momentum (momentum_buffer per parameter)";
  const std::string plain_state = "sgd without momentum (no tensors)";
  struct Case {
    EngineOptions engine;
    std::string from, saved, configured;
  };
  const auto tiny = [](Engine& e) { return testing::TinyMlp::create(e); };
  for (const Case& c : {Case{sgd_job(2, 2, 0.9).options, adamw, adamw_state, momentum_state},
                        Case{sgd_job(2, 1, 0.0).options, adamw, adamw_state, plain_state},
                        Case{job(2, 2).options, sgd, momentum_state, adamw_state},
                        Case{sgd_job(2, 3, 0.0).options, sgd, momentum_state, plain_state},
                        Case{job(2, 0).options, plain, plain_state, adamw_state}}) {
    const std::vector<std::string> refused = load_messages(2, c.from, tiny, c.engine);
    std::printf("%s\n", refused[0].c_str());
    for (const std::string& m : refused) {
      EXPECT_THAT(m, HasSubstr(c.from + "/step-2/optimizer.safetensors holds the state of " + c.saved +
                               ", but the configured optimizer is " + c.configured +
                               ": configure the optimizer it was saved with, or load weights only"));
    }
    for (const std::string& m : load_messages(2, c.from, tiny, c.engine, LoadOptions{LoadScope::kWeightsOnly})) {
      EXPECT_EQ(m, "loaded") << c.from << " weights only";
    }
  }
}

TEST(Checkpoint, DamagedCheckpointsAreRefusedNamingWhatAndWhere) {
  TempDir dir;
  ASSERT_EQ(save_step_2(job(2, 2), dir.path() + "/good"), "");
  const std::string good = dir.path() + "/good/step-2";
  for (const std::string& m : load_messages(2, good)) EXPECT_EQ(m, "loaded");

  auto copy = [&](const std::string& name) {
    const std::string path = dir.path() + "/" + name;
    std::filesystem::copy(good, path, std::filesystem::copy_options::recursive);
    return path;
  };
  auto expect_all = [](const std::vector<std::string>& messages, const std::string& what) {
    for (size_t r = 0; r < messages.size(); ++r) EXPECT_THAT(messages[r], HasSubstr(what)) << "rank " << r;
  };

  // One flipped byte in chunk 1 of the masters (1 KiB chunks).
  const std::string flipped = copy("flipped");
  {
    std::fstream f(flipped + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff at = static_cast<std::streamoff>(
        safetensors::Reader::open(flipped + "/model.safetensors").value().data_start() + 1500);
    f.seekg(at);
    const char c = static_cast<char>(f.get() ^ 0x10);
    f.seekp(at);
    f.put(c);
  }
  std::vector<std::string> messages = load_messages(2, flipped);
  expect_all(messages, flipped + "/model.safetensors: chunk 1 (data bytes [1024, 2048)) has checksum");
  for (int r = 0; r < 2; ++r) {
    std::printf("rank %d: %s\n", r, messages[static_cast<size_t>(r)].c_str());
    EXPECT_THAT(messages[static_cast<size_t>(r)], HasSubstr("rank " + std::to_string(r) + ": load_checkpoint from "));
  }
  const StatusOr<VerifyReport> verify = verify_checkpoint(flipped);
  ASSERT_FALSE(verify.ok());
  EXPECT_THAT(verify.status().message(), HasSubstr("chunk 1 (data bytes [1024, 2048))"));

  const std::string truncated = copy("truncated");
  std::filesystem::resize_file(truncated + "/optimizer.safetensors",
                               std::filesystem::file_size(truncated + "/optimizer.safetensors") - 100);
  expect_all(load_messages(2, truncated), truncated + "/optimizer.safetensors: truncated");

  const std::string missing = copy("missing");
  std::filesystem::remove(missing + "/optimizer.safetensors");
  expect_all(load_messages(2, missing), missing + "/optimizer.safetensors is missing");

  const std::string garbled = copy("garbled");
  std::ofstream(garbled + "/state.json") << "{\"format\": \"zdp-checkpoint\", \"format_version\": 1";
  expect_all(load_messages(2, garbled), garbled + "/state.json: not a JSON object");

  // Weights that are NaN (a checkpoint of a diverged run; checksums skipped, so only the
  // finite check stands between them and a run that skips every step).
  const std::string nan = copy("nan");
  {
    std::fstream f(nan + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(safetensors::Reader::open(nan + "/model.safetensors").value().data_start()));
    const float not_a_number = std::numeric_limits<float>::quiet_NaN();
    f.write(reinterpret_cast<const char*>(&not_a_number), sizeof(not_a_number));
  }
  LoadOptions unchecked;
  unchecked.checksums = ChecksumPolicy::kSkip;
  messages = load_messages(2, nan, [](Engine& e) { return testing::TinyMlp::create(e); }, options(2), unchecked);
  EXPECT_THAT(messages[0], HasSubstr("model.safetensors: tensor 'fc0.weight' element 0 is nan: a checkpoint of a "
                                     "diverged run; resume from an earlier one"));
  EXPECT_THAT(messages[1], HasSubstr("rank 0 failed"));  // the slice with the NaN is rank 0's
  // A moment that is infinite (AdamW's exp_avg, the first tensor of the optimizer file):
  // loaded, it made its slice NaN at the first update.
  const std::string inf = copy("inf");
  {
    std::fstream f(inf + "/optimizer.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(
        safetensors::Reader::open(inf + "/optimizer.safetensors").value().data_start()));
    const float infinite = std::numeric_limits<float>::infinity();
    f.write(reinterpret_cast<const char*>(&infinite), sizeof(infinite));
  }
  messages = load_messages(2, inf, [](Engine& e) { return testing::TinyMlp::create(e); }, options(2), unchecked);
  EXPECT_THAT(messages[0], HasSubstr("optimizer.safetensors: tensor 'fc0.weight.exp_avg' element 0 is inf"));
  // A negative second moment: finite, but its square root is NaN at the first update.
  const std::string negative = copy("negative");
  {
    const safetensors::Reader reader = safetensors::Reader::open(negative + "/optimizer.safetensors").value();
    const int t = reader.find("fc0.weight.exp_avg_sq");
    ASSERT_GE(t, 0);
    std::fstream f(negative + "/optimizer.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(reader.data_start() + reader.header().tensors[static_cast<size_t>(t)].begin +
                                        3 * 4));
    const float below_zero = -0.5f;
    f.write(reinterpret_cast<const char*>(&below_zero), sizeof(below_zero));
  }
  messages = load_messages(2, negative, [](Engine& e) { return testing::TinyMlp::create(e); }, options(2), unchecked);
  EXPECT_THAT(messages[0], HasSubstr("optimizer.safetensors: tensor 'fc0.weight.exp_avg_sq' element 3 is -0.5 (a "
                                     "second moment is never negative)"));
  LoadOptions weights_only = unchecked;
  weights_only.scope = LoadScope::kWeightsOnly;
  EXPECT_EQ(load_messages(2, inf, [](Engine& e) { return testing::TinyMlp::create(e); }, options(2), weights_only),
            (std::vector<std::string>{"loaded", "loaded"}))
      << "the weights alone are sound";

  // Another model: fc1.weight is [24, 25] instead of [24, 24]. The refusal comes before
  // anything is loaded, so the engine stays usable.
  messages = load_messages(2, good, [](Engine& e) -> StatusOr<testing::TinyMlp> {
    for (int l = 0; l < testing::TinyMlp::kLayers; ++l) {
      const std::string name = "fc" + std::to_string(l);
      const int64_t in = testing::TinyMlp::kIn[l] + (l == 1 ? 1 : 0);
      ZDP_RETURN_IF_ERROR(e.add_param(name + ".weight", {testing::TinyMlp::kOut[l], in}, Init::zeros(), l).status());
      ZDP_RETURN_IF_ERROR(e.add_param(name + ".bias", {testing::TinyMlp::kOut[l]}, Init::zeros(), l).status());
    }
    return testing::TinyMlp();
  });
  expect_all(messages,
             "model.safetensors: tensor 'fc1.weight' is F32 [24, 24], but the model's parameter #2 "
             "'fc1.weight' is F32 [24, 25]: a checkpoint of another model");
}

TEST(Checkpoint, ARankKilledDuringASaveLeavesThePreviousCheckpoint) {
  EngineRun reference = job(2, 2);
  reference.steps = 4;
  const EngineRunResult uninterrupted = run_engine(reference);
  ASSERT_EQ(uninterrupted.failures, "");
  for (const char* fault : {"rank=1,at=write,step=4", "rank=0,at=commit,step=4", "rank=0,at=latest,step=4"}) {
    SCOPED_TRACE(fault);
    TempDir dir;
    EngineRun crash = job(2, 2);
    crash.steps = 4;
    crash.save_steps = {2, 4};
    crash.save_root = dir.path();
    crash.fault = fault;
    const EngineRunResult crashed = run_engine(crash);
    EXPECT_THAT(crashed.failures, HasSubstr("exit 86"));
    StatusOr<std::string> latest = find_latest_checkpoint(dir.path());
    ASSERT_TRUE(latest.ok()) << latest.status().to_string();
    EXPECT_EQ(*latest, dir.path() + "/step-2");
    EXPECT_EQ(std::filesystem::exists(dir.path() + "/step-4.tmp"),
              std::string(fault).find("latest") == std::string::npos);

    // Resume from the root (step 2), redo steps 2-3 and save step 4 over what was left.
    EngineRun resume = job(2, 2);
    resume.steps = 4;
    resume.load_from = dir.path();
    resume.save_steps = {4};
    resume.save_root = dir.path();
    resume.save.keep = 1;
    const EngineRunResult resumed = run_engine(resume);
    ASSERT_EQ(resumed.failures, "");
    EXPECT_EQ(max_difference(resumed, uninterrupted).value, 0.0);
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/step-4.tmp"));
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/step-2"));  // keep = 1
    EXPECT_EQ(find_latest_checkpoint(dir.path()).value(), dir.path() + "/step-4");
    EXPECT_TRUE(verify_checkpoint(dir.path()).ok());
  }
}

// A rank with a step counter of its own would write another checkpoint's directory.
TEST(Checkpoint, RanksSavingDifferentStepsAreRefused) {
  TempDir dir;
  const std::vector<std::string> messages = save_messages(dir.path(), 0, [](int rank) { return 5 + rank; });
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(messages[static_cast<size_t>(r)],
                HasSubstr("the ranks called save_checkpoint with different arguments (this rank: step " +
                          std::to_string(5 + r)));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // refused before anything was written
}

// A step below the optimizer's (a trainer numbering its checkpoints by epoch) wrote a
// checkpoint every reader refused ("engine.optimizer_steps 3 is not in [0, step 1]"): it
// is refused at save, before anything is written.
TEST(Checkpoint, AStepBelowTheOptimizersStepsIsRefusedBeforeWriting) {
  TempDir dir;
  for (const std::string& m : save_messages(dir.path(), 3, [](int) { return 1; })) {
    EXPECT_THAT(m, HasSubstr("save_checkpoint: step 1 is below the 3 optimizer steps taken"));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// A data position past 2^62, which every reader refuses, made `latest` a checkpoint no
// resume could load ("resume = auto" then failed at every start).
TEST(Checkpoint, ADataPositionNoReaderTakesIsRefusedBeforeWriting) {
  TempDir dir;
  for (const std::string& m : save_messages(dir.path(), 0, [](int) { return 0; }, kMaxDataPosition + 1)) {
    EXPECT_THAT(m, HasSubstr("save_checkpoint: data_position 4611686018427387905 is not in [0, 2^62]"));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  EXPECT_EQ(save_messages(dir.path(), 0, [](int) { return 0; }, kMaxDataPosition),
            (std::vector<std::string>{"saved", "saved"}))
      << "2^62 itself loads";
}

// A negative keep (a trainer's arithmetic) kept every checkpoint, silently, as 0 does.
TEST(Checkpoint, ANegativeKeepIsRefusedBeforeWriting) {
  TempDir dir;
  SaveOptions save;
  save.keep = -1;
  for (const std::string& m : save_messages(dir.path(), 0, [](int) { return 0; }, 0, save)) {
    EXPECT_THAT(m, HasSubstr("save_checkpoint: keep -1 is negative (0 keeps all)"));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Checkpoint, PerNodeStorageOnASharedDirectoryIsRefused) {
  TempDir dir;
  EngineRun run = job(2, 2);
  run.steps = 1;
  run.save_steps = {1};
  run.save_root = dir.path();  // local_world 1: two "nodes", one directory
  run.save.storage = CheckpointStorage::kPerNode;
  EXPECT_THAT(run_engine(run).failures, HasSubstr("exit 1"));
  EXPECT_FALSE(find_latest_checkpoint(dir.path()).ok());
}

// Per node at stages 1-3 the ranks gather each bucket together (4-5 buckets here). Rank 1
// cannot write past 256 bytes (RLIMIT_FSIZE: EFBIG, as a full quota or disk would fail):
// it left the gathers for the write's agreement while rank 0 gathered the next bucket, and
// dp-launch reported a desync ("all_gather #N ... but rank 1 issued all_reduce #N")
// without the cause; without dp-launch both waited out the collective timeout.
TEST(Checkpoint, AWriteThatFailsOnOneRankOfAPerNodeSaveIsNamedOnEveryRank) {
  TempDir dir, out;
  const std::string failures = testing::describe_failures(
      testing::fork_ranks(2, [&](int rank, int K, Store& store) -> Status {
        ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, K, store, /*local_world=*/2));
        Engine engine(ctx, options(2));
        ZDP_ASSIGN_OR_RETURN(testing::TinyMlp model, testing::TinyMlp::create(engine));
        ZDP_RETURN_IF_ERROR(engine.finalize());
        ZDP_RETURN_IF_ERROR(model.train_micro<float>(engine, 0, rank * 12, 12).status());
        ZDP_RETURN_IF_ERROR(engine.step().status());
        rlimit files{};
        ::getrlimit(RLIMIT_FSIZE, &files);
        if (rank == 1) {
          ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead
          rlimit small = files;
          small.rlim_cur = 256;
          ::setrlimit(RLIMIT_FSIZE, &small);
        }
        CheckpointState state;
        state.step = 1;
        SaveOptions save;
        save.storage = CheckpointStorage::kPerNode;
        StatusOr<std::string> saved = engine.save_checkpoint(dir.path(), state, save);
        ::setrlimit(RLIMIT_FSIZE, &files);
        std::ofstream(out.path() + "/" + std::to_string(rank)) << (saved.ok() ? "saved" : saved.status().message());
        return Status::Ok();
      }));
  ASSERT_EQ(failures, "");
  for (int r = 0; r < 2; ++r) {
    const std::string message = file_bytes(out.path() + "/" + std::to_string(r));
    EXPECT_THAT(message, HasSubstr("File too large")) << "rank " << r;
    if (r == 0) {
      EXPECT_THAT(message, HasSubstr("save_checkpoint: write: rank 1 failed"));
    }
  }
  EXPECT_FALSE(find_latest_checkpoint(dir.path()).ok());
}

// A checksum chunk whose size is not a multiple of 4 ends inside a value: the load's value
// check read the next chunk's values shifted by the split, and refused a sound checkpoint
// ("element 0 is -0.4359 (a second moment is never negative)").
TEST(Checkpoint, ChunksThatSplitAValueLoad) {
  TempDir dir;
  SaveOptions odd;
  odd.chunk_bytes = 1027;  // 256 values and 3 bytes of the next
  EXPECT_EQ(save_messages(dir.path(), 1, [](int) { return 1; }, 0, odd), (std::vector<std::string>{"saved", "saved"}));
  for (const std::string& m : load_messages(2, dir.path())) EXPECT_EQ(m, "loaded");
}

}  // namespace
}  // namespace zdp
