// dp-ckpt export's temporary file (tools/export_temp_file.h): a signal that ends the
// export removes it (an ignored one stays ignored), the next export removes what a killed
// one left (only a dead process's), and it is created exclusively with the mode given.
#include "tools/export_temp_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/temp_dir.h"

namespace zdp::ckpt_tool {
namespace {

namespace fs = std::filesystem;

// A pid that ran and is gone (reaped): what a killed export leaves in its file's name.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) _exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

// Runs `body` in a forked child; its wait status.
template <typename F>
int in_child(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(ExportTempFile, ASignalThatEndsTheExportRemovesTheFile) {
  testing::TempDir tmp;
  const std::string target = tmp.path() + "/model.safetensors";
  std::string made;
  for (const int sig : {SIGTERM, SIGINT, SIGHUP}) {
    const int status = in_child([&] {
      std::vector<std::string> removed;
      StatusOr<std::unique_ptr<ExportTempFile>> f = ExportTempFile::create(target, 0, false, &removed);
      if (!f.ok() || !fs::exists((*f)->path())) _exit(3);
      ::raise(sig);
      _exit(4);  // not reached: the signal ends the process
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << sig << ": status " << status;
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_TRUE(fs::is_empty(tmp.path())) << "signal " << sig << " left the temporary file";
  }
  // nohup's SIGHUP stays ignored: the export goes on (and its file stays until it ends).
  const int status = in_child([&] {
    ::signal(SIGHUP, SIG_IGN);
    std::vector<std::string> removed;
    StatusOr<std::unique_ptr<ExportTempFile>> f = ExportTempFile::create(target, 0, false, &removed);
    if (!f.ok()) _exit(3);
    ::raise(SIGHUP);
    _exit(fs::exists((*f)->path()) ? 0 : 5);
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ExportTempFile, TheNextExportRemovesWhatAKilledOneLeft) {
  testing::TempDir tmp;
  const std::string target = tmp.path() + "/model.safetensors";
  const std::string dead = target + ".tmp-" + std::to_string(dead_pid());
  const std::string alive = target + ".tmp-" + std::to_string(::getppid());  // a running export's
  const std::string other = tmp.path() + "/other.safetensors.tmp-" + std::to_string(dead_pid());
  const std::string not_a_pid = target + ".tmp-notes";
  for (const std::string& p : {dead, alive, other, not_a_pid}) std::ofstream(p) << "x";
  std::vector<std::string> removed;
  {
    StatusOr<std::unique_ptr<ExportTempFile>> f = ExportTempFile::create(target, 0, false, &removed);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ((*f)->path(), target + ".tmp-" + std::to_string(::getpid()));
  }
  EXPECT_EQ(removed, std::vector<std::string>{dead});
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(not_a_pid));
  EXPECT_FALSE(fs::exists(target + ".tmp-" + std::to_string(::getpid()))) << "removed when not renamed";
}

// A file at this process's own temporary name is a killed run's that had this pid (every
// run in a container is PID 1): removed. A link there is refused, not followed.
TEST(ExportTempFile, ALeftoverOfThisPidIsRemovedAndALinkThereRefused) {
  testing::TempDir tmp;
  const std::string target = tmp.path() + "/model.safetensors";
  const std::string mine = target + ".tmp-" + std::to_string(::getpid());
  std::ofstream(mine) << "a killed run's";
  std::vector<std::string> removed;
  {
    StatusOr<std::unique_ptr<ExportTempFile>> f = ExportTempFile::create(target, 0, false, &removed);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(fs::file_size((*f)->path()), 0u);
  }
  EXPECT_EQ(removed, std::vector<std::string>{mine});
  const std::string elsewhere = tmp.path() + "/elsewhere";
  fs::create_symlink(elsewhere, mine);
  StatusOr<std::unique_ptr<ExportTempFile>> refused = ExportTempFile::create(target, 0, false, &removed);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("File exists (remove it first)"), std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(fs::exists(elsewhere));
}

TEST(ExportTempFile, CreatedExclusivelyWithTheReplacedFilesMode) {
  testing::TempDir tmp;
  const std::string target = tmp.path() + "/model.safetensors";
  std::ofstream(target) << "old";
  std::vector<std::string> removed;
  StatusOr<std::unique_ptr<ExportTempFile>> f = ExportTempFile::create(target, 0600, true, &removed);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  struct stat st {};
  ASSERT_EQ(::stat((*f)->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_TRUE((*f)->rename_to(target).ok());
  EXPECT_FALSE(fs::exists((*f)->path()));
  f->reset();  // renamed: the destructor leaves the target alone
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace zdp::ckpt_tool
