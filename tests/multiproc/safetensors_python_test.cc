// The checkpoint is plain safetensors: 2 ranks (stage 3, so no rank holds the whole model)
// train the engine's TinyMlp for 3 steps and save; dp-ckpt exports fp16 and bf16; then the
// real `safetensors` Python package opens model.safetensors, optimizer.safetensors and
// both exports, and testing/check_safetensors.py compares them with the masters
// the engine gathered (fp32 bit for bit, fp16/bf16 = round to nearest even of them).
// Skips, saying why, when python3 cannot import safetensors and numpy (scripts/test.sh
// installs them with pip).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "testing/engine_runs.h"
#include "testing/run_command.h"

namespace zdp {
namespace {

namespace fs = std::filesystem;
using testing::CommandRun;
using testing::run_command;

TEST(SafetensorsPython, CheckpointAndExportsOpenWithTheRealPackageAndEqualTheMasters) {
  const CommandRun probe = run_command("python3 -c 'import safetensors, numpy'");
  if (probe.exit_code != 0) {
    GTEST_SKIP() << "python3 cannot import safetensors and numpy (install them: python3 -m pip install "
                    "safetensors numpy): "
                 << probe.output;
  }
  const fs::path dir = fs::temp_directory_path() / ("zdp_safetensors_py_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "expected");
  const std::string root = (dir / "ckpt").string();
  const std::string failures = testing::describe_failures(
      testing::fork_ranks(2, [&](int rank, int world, Store& store) -> Status {
        ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, world, store));
        EngineOptions o;
        o.zero.stage = 3;
        o.zero.bucket_mb = 200.0 * 4 / (1 << 20);  // parameters straddle buckets and so slices
        o.optim.lr = 1e-2;
        Engine engine(ctx, o);
        ZDP_ASSIGN_OR_RETURN(testing::TinyMlp model, testing::TinyMlp::create(engine));
        ZDP_RETURN_IF_ERROR(engine.finalize());
        for (int step = 0; step < 3; ++step) {
          ZDP_RETURN_IF_ERROR(model.train_micro<float>(engine, step, rank * 4, 4).status());
          ZDP_RETURN_IF_ERROR(engine.step().status());
        }
        CheckpointState state;
        state.step = 3;
        ZDP_RETURN_IF_ERROR(engine.save_checkpoint(root, state).status());
        const std::vector<std::string> names = engine.param_names();
        for (size_t i = 0; i < names.size(); ++i) {
          ZDP_ASSIGN_OR_RETURN(std::vector<float> master, engine.gather_master(Param{static_cast<int>(i)}));
          if (rank == 0) {
            std::ofstream((dir / "expected" / (names[i] + ".f32")).string(), std::ios::binary)
                .write(reinterpret_cast<const char*>(master.data()), static_cast<std::streamsize>(master.size() * 4));
          }
        }
        return Status::Ok();
      }));
  ASSERT_EQ(failures, "");
  const std::string step = root + "/step-3";
  for (const char* dtype : {"fp16", "bf16"}) {
    const CommandRun ex = run_command(std::string(ZDP_DP_CKPT) + " export " + root + " --dtype " + dtype +
                                      " --out " + (dir / (std::string(dtype) + ".safetensors")).string());
    ASSERT_EQ(ex.exit_code, 0) << ex.output;
  }
  const CommandRun check = run_command("python3 " + std::string(ZDP_SOURCE_DIR) + "/testing/check_safetensors.py " +
                                       step + " " + (dir / "expected").string() + " " +
                                       (dir / "fp16.safetensors").string() + " " + (dir / "bf16.safetensors").string());
  EXPECT_EQ(check.exit_code, 0) << check.output;
  std::printf("%s", check.output.c_str());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zdp
