// verify_checkpoint (dp-ckpt verify) refuses what a load refuses: a checkpoint's tensors
// are fp32. A model file re-typed as I32 (same bytes, its state.json checksums made to
// match) passed verify and was refused at load as "a checkpoint of another model".
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/internal/checkpoint_hash.h"
#include "runtime/internal/checkpoint_state.h"
#include "testing/single_rank.h"
#include "testing/temp_dir.h"
#include "testing/tiny_mlp.h"
#include "zdp/checkpoint.h"
#include "zdp/context.h"
#include "zdp/engine.h"
#include "zdp/safetensors.h"

namespace zdp {
namespace {

// Re-types tensor 0 of `file` in checkpoint `dir` as I32 (4 bytes too: the header keeps
// its length) and writes a state.json whose checksums match the altered header.
void retype_first_tensor(const std::string& dir, const std::string& file) {
  const std::string path = dir + "/" + file;
  safetensors::Header h = safetensors::Reader::open(path).value().header();
  h.tensors[0].dtype = "I32";
  const std::string head = safetensors::encode_header(h);
  ASSERT_EQ(static_cast<int64_t>(head.size()), safetensors::Reader::open(path).value().data_start());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.write(head.data(), static_cast<std::streamsize>(head.size()));
  }
  CheckpointInfo info = read_checkpoint_info(dir).value();
  for (CheckpointFileInfo& entry : info.files) {
    if (entry.name == file) entry.header_hash = checkpoint::hash_bytes(head.data(), head.size());
  }
  std::ofstream(dir + "/" + kCheckpointStateFile) << checkpoint::encode_state(info).value();
}

// A TinyMlp registered on `engine`, finalized, and saved under `root`: its checkpoint.
std::string saved_tiny_mlp(Engine& engine, const std::string& root) {
  EXPECT_TRUE(testing::TinyMlp::create(engine).ok());
  EXPECT_TRUE(engine.finalize().ok());
  return engine.save_checkpoint(root, CheckpointState{}).value();
}

TEST(VerifyCheckpoint, TensorsThatAreNotFp32AreRefusedAsALoadRefusesThem) {
  testing::TempDir root;
  Context ctx = testing::single_rank_context();
  Engine engine(ctx, EngineOptions{});
  const std::string dir = saved_tiny_mlp(engine, root.path());
  ASSERT_TRUE(verify_checkpoint(dir).ok());

  for (const char* file : {kCheckpointModelFile, kCheckpointOptimizerFile}) {
    const std::string copy = root.path() + "/retyped-" + file;
    std::filesystem::copy(dir, copy);
    retype_first_tensor(copy, file);
    ASSERT_TRUE(read_checkpoint_info(copy).ok()) << "the forged state.json reads";
    const StatusOr<VerifyReport> verified = verify_checkpoint(copy);
    ASSERT_FALSE(verified.ok()) << file;
    EXPECT_NE(verified.status().message().find(copy + "/" + file + ": tensor '"), std::string::npos)
        << verified.status().message();
    EXPECT_NE(verified.status().message().find("' is I32, a checkpoint holds F32"), std::string::npos)
        << verified.status().message();
    EXPECT_FALSE(engine.load_checkpoint(copy).ok()) << "and a load refuses it too";
  }
}

// A load that fails part way (a damaged chunk found as it streams) leaves the engine
// partly loaded and failed: gather_master() returns that failure, not the half-loaded
// masters (it checked everything but the failure).
TEST(VerifyCheckpoint, ALoadThatFailedPartWayLeavesNoMastersToGather) {
  testing::TempDir root;
  Context ctx = testing::single_rank_context();
  Engine engine(ctx, EngineOptions{});
  const std::string dir = saved_tiny_mlp(engine, root.path());
  const std::string damaged = root.path() + "/damaged";
  std::filesystem::copy(dir, damaged);
  {
    std::fstream f(damaged + "/" + kCheckpointModelFile, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  const Status loaded = engine.load_checkpoint(damaged).status();
  ASSERT_FALSE(loaded.ok());
  const StatusOr<std::vector<float>> master = engine.gather_master(Param{0});
  ASSERT_FALSE(master.ok()) << "the half-loaded masters were handed out";
  EXPECT_EQ(master.status().code(), loaded.code()) << master.status().to_string();
}

// A run that diverged without a skipped step (a finite gradient whose square overflows
// fp32 while the exact norm of deterministic mode holds it: exp_avg_sq is inf, and that
// element's update 0 for good) is not saved: its save
// was committed, pruned the last good checkpoint, and no load could take it. The earlier
// checkpoint stays `latest`; verify refuses such a file as a load does.
TEST(VerifyCheckpoint, ADivergedStateIsNotSavedAndNotVerified) {
  testing::TempDir root;
  Context ctx = testing::single_rank_context();
  EngineOptions options;
  options.optim.grad_clip = 0;
  options.deterministic = true;  // the exact norm: 3e19 squared does not overflow it
  Engine engine(ctx, options);
  const Param w = *engine.add_param("w", {4}, Init::constant(1.0f));
  ASSERT_TRUE(engine.finalize().ok());
  const std::string good = engine.save_checkpoint(root.path(), CheckpointState{}).value();
  float* g = engine.grad_as<float>(w);
  for (int i = 0; i < 4; ++i) g[i] = 3e19f;  // finite; its square is not
  ASSERT_TRUE(engine.grad_ready(w).ok());
  const StatusOr<StepStats> stepped = engine.step();
  ASSERT_TRUE(stepped.ok());
  ASSERT_FALSE(stepped->skipped) << stepped->grad_norm;
  CheckpointState next;
  next.step = 1;
  const StatusOr<std::string> diverged = engine.save_checkpoint(root.path(), next);
  ASSERT_FALSE(diverged.ok());
  EXPECT_NE(diverged.status().message().find("optimizer.safetensors: tensor 'w.exp_avg_sq' element 0 is inf: the run "
                                             "has diverged, and no load could take this checkpoint: it is not saved"),
            std::string::npos)
      << diverged.status().message();
  EXPECT_EQ(find_latest_checkpoint(root.path()).value(), good);
  // The same state written as a checkpoint (its checksums match): verify refuses it.
  const std::string copy = root.path() + "/diverged";
  std::filesystem::copy(good, copy);
  {
    std::fstream f(copy + "/" + kCheckpointOptimizerFile, std::ios::in | std::ios::out | std::ios::binary);
    const int64_t v_at = safetensors::Reader::open(copy + "/" + kCheckpointOptimizerFile).value().data_start() + 16 + 4;
    f.seekp(v_at);
    const float inf = std::numeric_limits<float>::infinity();
    f.write(reinterpret_cast<const char*>(&inf), 4);
  }
  CheckpointInfo info = read_checkpoint_info(copy).value();
  for (CheckpointFileInfo& entry : info.files) {
    if (entry.name != kCheckpointOptimizerFile) continue;
    const safetensors::Reader file = safetensors::Reader::open(copy + "/" + entry.name).value();
    std::vector<char> buffer;
    for (size_t c = 0; c < entry.chunk_hashes.size(); ++c) {
      entry.chunk_hashes[c] = checkpoint::hash_chunk(file, static_cast<int64_t>(c), entry.chunk_bytes, buffer).value();
    }
  }
  std::ofstream(copy + "/" + kCheckpointStateFile) << checkpoint::encode_state(info).value();
  const StatusOr<VerifyReport> verified = verify_checkpoint(copy);
  ASSERT_FALSE(verified.ok());
  EXPECT_NE(verified.status().message().find("tensor 'w.exp_avg_sq' element 1 is inf: a checkpoint of a diverged run"),
            std::string::npos)
      << verified.status().message();
}

}  // namespace
}  // namespace zdp
