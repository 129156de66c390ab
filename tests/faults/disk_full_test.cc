// The fault suite's full disk: a 2-rank job checkpoints every step into a tmpfs sized for
// two and a half checkpoints, so its third save runs out of space. The job must stop with
// the reason ("No space left on device"), the second checkpoint must stay the latest and
// verify, and resuming from it must end byte-identical to a run that had room. The tmpfs
// lives in a private mount namespace (unshare -m) that ends with the job; where one cannot
// be made (no root, no CAP_SYS_ADMIN, no unshare) the test skips and says why.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "testing/temp_dir.h"
#include "tests/faults/fault_jobs.h"

namespace zdp::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

constexpr int kSteps = 6;
constexpr int64_t kPage = 4096;

// Bytes a tmpfs charges for the files of `dir`: whole pages.
int64_t tmpfs_bytes(const fs::path& dir) {
  int64_t total = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += (static_cast<int64_t>(e.file_size()) + kPage - 1) / kPage * kPage;
  }
  return total;
}

// Runs `script` with sh in a private mount namespace.
JobRun in_namespace(const std::string& script, std::chrono::seconds limit) {
  return run_job({"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script}, {}, limit);
}

TEST(DiskFull, ASaveThatRunsOutOfSpaceFailsClearlyAndThePreviousCheckpointStaysLatest) {
  TempDir probe;
  const JobRun can = in_namespace("mount -t tmpfs -o size=64k zdp-probe " + probe.path(), seconds(20));
  if (can.exit_code != 0) {
    GTEST_SKIP() << "cannot make a size-limited tmpfs here (needs root with CAP_SYS_ADMIN and unshare): "
                 << can.output();
  }
  const std::string extra = "heartbeat_timeout_s = 2\n";
  TempDir reference;
  const JobRun ref = run_job({ZDP_DP_LAUNCH, write_job_config(reference.path(), free_port(), kSteps, extra)});
  ASSERT_EQ(ref.exit_code, 0) << ref.output();
  const int64_t one = tmpfs_bytes(fs::path(reference.path()) / "ckpt" / "step-1");
  ASSERT_GT(one, 0);
  // Two checkpoints, the `latest` file and half a checkpoint: the third save cannot fit.
  const int64_t size = 2 * one + kPage + one / 2;

  TempDir dir;
  const std::string config = write_job_config(dir.path(), free_port(), kSteps, extra);
  const std::string ckpt = dir.path() + "/ckpt";
  fs::create_directories(ckpt);
  // The tmpfs ends with the namespace: its checkpoints are copied out to kept/ first.
  const JobRun full = in_namespace("mount -t tmpfs -o size=" + std::to_string(size / 1024) + "k zdp-full " + ckpt +
                                       " || exit 90; " + ZDP_DP_LAUNCH + " " + config + "; rc=$?; cp -a " + ckpt +
                                       " " + dir.path() + "/kept; exit $rc",
                                   seconds(120));
  const std::string out = full.output();
  ASSERT_NE(full.exit_code, 90) << out;
  EXPECT_EQ(full.exit_code, 1) << out;
  EXPECT_TRUE(full.has("No space left on device")) << out;
  EXPECT_TRUE(full.has("step 3")) << out;  // the failed save is named by its step
  // Rank 0 ran out of space (it sizes the files); rank 1 stopped because rank 0 failed
  // (the save's agreement), and exiting a moment sooner it was blamed half the time.
  EXPECT_TRUE(full.has("dp-launch: rank 0 (node 0")) << out;

  fs::remove_all(ckpt);
  fs::rename(dir.path() + "/kept", ckpt);
  EXPECT_EQ(file_bytes(fs::path(ckpt) / "latest").substr(0, 6), "step-2") << "latest: " << file_bytes(fs::path(ckpt) / "latest");
  const JobRun verify = run_job({ZDP_DP_CKPT, "verify", ckpt});
  EXPECT_EQ(verify.exit_code, 0) << verify.output();
  EXPECT_TRUE(verify.has("step-2")) << verify.output();

  const JobRun resumed = run_job({ZDP_DP_LAUNCH, config});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output();
  EXPECT_TRUE(resumed.has("resumed from")) << resumed.output();
  EXPECT_TRUE(same_checkpoint(fs::path(reference.path()) / "ckpt" / ("step-" + std::to_string(kSteps)),
                              fs::path(ckpt) / ("step-" + std::to_string(kSteps))));
}

}  // namespace
}  // namespace zdp::testing
