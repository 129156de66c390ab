// The checkpoint directory rules (runtime/internal/checkpoint_dirs.h, zdp/checkpoint.h):
// which step is the latest, leftovers of interrupted saves, atomic commits and keep.
#include "runtime/internal/checkpoint_dirs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/internal/checkpoint_state.h"
#include "testing/temp_dir.h"
#include "zdp/checkpoint.h"

namespace zdp {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

void make_checkpoint_dir(const std::string& root, int64_t step) {
  const std::string dir = root + "/" + checkpoint_dir_name(step);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/state.json") << "{}";
}

TEST(CheckpointDirs, LatestLeftoversAndKeep) {
  TempDir dir;
  const std::string& root = dir.path();
  EXPECT_EQ(find_latest_checkpoint(root + "/none").status().code(), StatusCode::kNotFound);
  EXPECT_THAT(find_latest_checkpoint(root).status().message(), HasSubstr("no complete checkpoint"));
  make_checkpoint_dir(root, 5);
  make_checkpoint_dir(root, 20);
  std::filesystem::create_directories(root + "/step-30.tmp");  // an interrupted save
  std::filesystem::create_directories(root + "/step-40");      // no state.json: incomplete
  std::filesystem::create_directories(root + "/step-007");     // not our spelling
  EXPECT_EQ(checkpoint::complete_steps(root), (std::vector<int64_t>{5, 20}));
  EXPECT_EQ(find_latest_checkpoint(root).value(), root + "/step-20");  // no latest: the highest
  ASSERT_TRUE(checkpoint::write_file_atomic(root, "latest", "step-5\n").ok());
  EXPECT_EQ(find_latest_checkpoint(root).value(), root + "/step-5");  // latest wins when complete
  ASSERT_TRUE(checkpoint::write_file_atomic(root, "latest", "step-40\n").ok());
  EXPECT_EQ(find_latest_checkpoint(root).value(), root + "/step-20");
  EXPECT_EQ(resolve_checkpoint(root + "/step-5/").value(), root + "/step-5");
  EXPECT_EQ(resolve_checkpoint(root).value(), root + "/step-20");

  std::ofstream(root + "/latest.tmp.4242") << "step-2\n";  // a write of latest that stopped
  ASSERT_TRUE(checkpoint::remove_leftovers(root).ok());
  EXPECT_FALSE(std::filesystem::exists(root + "/step-30.tmp"));
  EXPECT_FALSE(std::filesystem::exists(root + "/latest.tmp.4242"));
  // Replacing an existing step keeps exactly one complete copy.
  std::filesystem::create_directories(root + "/step-20.tmp");
  std::ofstream(root + "/step-20.tmp/state.json") << "{\"new\": 1}";
  ASSERT_TRUE(checkpoint::commit_dir(root, "step-20.tmp", 20).ok());
  EXPECT_EQ(checkpoint::read_small_file(root + "/step-20/state.json").value(), "{\"new\": 1}");
  EXPECT_FALSE(std::filesystem::exists(root + "/step-20.old"));
  // keep = 1 with a protected lower step (a new run in a directory of an older one).
  make_checkpoint_dir(root, 7);
  ASSERT_TRUE(checkpoint::prune(root, 1, 7).ok());
  EXPECT_EQ(checkpoint::complete_steps(root), (std::vector<int64_t>{7, 20}));
  ASSERT_TRUE(checkpoint::prune(root, 1, 20).ok());
  EXPECT_EQ(checkpoint::complete_steps(root), (std::vector<int64_t>{20}));
  EXPECT_FALSE(std::filesystem::exists(root + "/step-7.pruned"));
}

// A prune renames the step first: a crash while removing it left step-K with its
// state.json and without some tensors, counted as complete. What such a crash leaves now
// (step-K.pruned, whatever is left in it) is not a checkpoint and the next save clears it.
TEST(CheckpointDirs, AnInterruptedPruneLeavesNoCheckpointBehind) {
  TempDir dir;
  const std::string& root = dir.path();
  make_checkpoint_dir(root, 20);
  std::filesystem::create_directories(root + "/step-10.pruned");
  std::ofstream(root + "/step-10.pruned/state.json") << "{}";
  EXPECT_EQ(checkpoint::complete_steps(root), (std::vector<int64_t>{20}));
  ASSERT_TRUE(checkpoint::remove_leftovers(root).ok());
  EXPECT_FALSE(std::filesystem::exists(root + "/step-10.pruned"));
  EXPECT_EQ(checkpoint::complete_steps(root), (std::vector<int64_t>{20}));
}

// A step that cannot be removed (NFS keeps a folder whose file another process holds open;
// here an immutable file): the prune removes the others and says which failed, and the next
// save's cleanup leaves it with a warning. Its failure stopped the save after the prune's.
TEST(CheckpointDirs, AStepThatCannotBeRemovedStopsNoSave) {
  TempDir dir;
  const std::string& root = dir.path();
  for (int64_t step : {10, 20, 30}) make_checkpoint_dir(root, step);
  const std::string stuck = root + "/step-10/model.safetensors";
  std::ofstream(stuck) << "x";
  if (std::system(("chattr +i '" + stuck + "' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "chattr +i does not work here (not root, or the file system has no such attribute)";
  }
  const Status pruned = checkpoint::prune(root, 1, 30);
  EXPECT_FALSE(pruned.ok());
  EXPECT_NE(pruned.message().find("step-10.pruned"), std::string::npos) << pruned.message();
  EXPECT_EQ(checkpoint::complete_steps(root), (std::vector<int64_t>{30})) << "step 20 went, and step 10 is no checkpoint";
  EXPECT_TRUE(checkpoint::remove_leftovers(root).ok());
  EXPECT_TRUE(std::filesystem::exists(root + "/step-10.pruned"));
  ASSERT_EQ(std::system(("chattr -i '" + root + "/step-10.pruned/model.safetensors'").c_str()), 0);
  EXPECT_TRUE(checkpoint::remove_leftovers(root).ok());
  EXPECT_FALSE(std::filesystem::exists(root + "/step-10.pruned"));
}

// A `latest` that is there but cannot be read (here a folder; EACCES or EIO alike) fell
// back to the newest complete step without a word: it is now said, as a wrong name is.
TEST(CheckpointDirs, AnUnreadableLatestIsSaidWhenTheNewestIsUsed) {
  TempDir dir;
  const std::string& root = dir.path();
  make_checkpoint_dir(root, 5);
  make_checkpoint_dir(root, 20);
  std::filesystem::create_directories(root + "/latest");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(find_latest_checkpoint(root).value(), root + "/step-20");
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr(root + "/latest"));
  EXPECT_THAT(said, HasSubstr("using the newest complete checkpoint, step-20"));
}

// keep_last in a folder that holds another run's higher steps (resume = "never", or a run
// resumed from an older checkpoint): they counted, so the run's own checkpoints were
// removed (keep 2 left step-20 alone beside step-50 and step-60). Now the run keeps its
// own newest `keep`, and the higher steps are left as they are.
TEST(CheckpointDirs, KeepLastCountsTheStepsUpToTheOneJustWritten) {
  TempDir dir;
  const std::string& root = dir.path();
  make_checkpoint_dir(root, 50);
  make_checkpoint_dir(root, 60);
  for (int64_t step : {10, 20, 30}) {
    make_checkpoint_dir(root, step);
    ASSERT_TRUE(checkpoint::prune(root, 2, step).ok());
  }
  EXPECT_EQ(checkpoint::complete_steps(root), (std::vector<int64_t>{20, 30, 50, 60}));
}

// Where the file system cannot exchange two directories, replacing step-N takes two
// renames; a crash between them left step-N.old (complete) and no step-N, and the next
// save's cleanup deleted both copies. The cleanup now puts step-N.old back.
TEST(CheckpointDirs, AnInterruptedReplacementIsRestoredNotDeleted) {
  TempDir dir;
  const std::string& root = dir.path();
  make_checkpoint_dir(root, 10);
  std::filesystem::create_directories(root + "/step-20.old");
  std::ofstream(root + "/step-20.old/state.json") << "{\"old\": 1}";
  std::filesystem::create_directories(root + "/step-20.tmp");
  std::ofstream(root + "/step-20.tmp/state.json") << "{\"new\": 1}";
  EXPECT_EQ(checkpoint::complete_steps(root), (std::vector<int64_t>{10}));
  ASSERT_TRUE(checkpoint::remove_leftovers(root).ok());
  EXPECT_EQ(checkpoint::complete_steps(root), (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(checkpoint::read_small_file(root + "/step-20/state.json").value(), "{\"old\": 1}");
  EXPECT_FALSE(std::filesystem::exists(root + "/step-20.old"));
  EXPECT_FALSE(std::filesystem::exists(root + "/step-20.tmp"));
  // Beside its step-N (the crash came after both renames), a step-N.old is a leftover.
  std::filesystem::create_directories(root + "/step-10.old");
  std::ofstream(root + "/step-10.old/state.json") << "{}";
  ASSERT_TRUE(checkpoint::remove_leftovers(root).ok());
  EXPECT_FALSE(std::filesystem::exists(root + "/step-10.old"));
  EXPECT_TRUE(std::filesystem::exists(root + "/step-10/state.json"));
}

}  // namespace
}  // namespace zdp

namespace zdp {
namespace {

// A state.json that is a folder or a FIFO is named as what it is ("no state.json" said
// there was none, beside one the user could see).
TEST(CheckpointDirs, AStateFileThatIsNotAFileIsNamedAsWhatItIs) {
  zdp::testing::TempDir dir;
  std::filesystem::create_directories(dir.file("step-3/state.json"));
  StatusOr<std::string> r = resolve_checkpoint(dir.file("step-3"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("step-3/state.json is a directory, not a checkpoint's state file"),
            std::string::npos)
      << r.status().message();
  std::filesystem::create_directories(dir.file("step-4"));
  ASSERT_EQ(::mkfifo(dir.file("step-4/state.json").c_str(), 0600), 0);
  r = resolve_checkpoint(dir.file("step-4"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("step-4/state.json is a FIFO"), std::string::npos) << r.status().message();
}

// A link planted in the checkpoint folder is never written through: not at the old fixed
// temporary name of `latest` (it was, and then became `latest`), nor at a synced file.
TEST(CheckpointDirs, PlantedLinksAreNotWrittenThrough) {
  TempDir dir;
  const std::string& root = dir.path();
  const std::string victim = root + "/victim.txt";
  std::ofstream(victim) << "precious data";
  std::filesystem::create_symlink(victim, root + "/.latest.tmp");  // the old fixed name
  ASSERT_TRUE(checkpoint::write_file_atomic(root, "latest", "step-2\n").ok());
  EXPECT_EQ(checkpoint::read_small_file(victim).value(), "precious data");
  // And at the temporary name this process uses: the link is removed, not followed.
  std::filesystem::create_symlink(victim, root + "/latest.tmp." + std::to_string(::getpid()));
  ASSERT_TRUE(checkpoint::write_file_atomic(root, "latest", "step-3\n").ok());
  EXPECT_EQ(checkpoint::read_small_file(root + "/latest").value(), "step-3\n");
  EXPECT_EQ(checkpoint::read_small_file(victim).value(), "precious data");
  EXPECT_FALSE(std::filesystem::is_symlink(root + "/latest"));
  std::filesystem::create_symlink(victim, root + "/node-0");
  const Status refused = checkpoint::write_file_synced(root + "/node-0", "rank 0\n");
  EXPECT_EQ(refused.code(), StatusCode::kIoError);
  EXPECT_THAT(refused.message(), HasSubstr("a symbolic link is there"));
  EXPECT_EQ(checkpoint::read_small_file(victim).value(), "precious data");
}

}  // namespace
}  // namespace zdp
