// dp-launch's rank output pump. A full log disk: the failure is said once, with errno's
// reason, and the rank's lines keep reaching the console (before, writes to the log failed
// silently and the log ended mid-run with no word why). And the pump never closes a pipe it
// reads: the RankProcess owns it, and a second close hit a socket that had reused the number.
#include "launcher/output_pump.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "launcher/terminal.h"
#include "testing/temp_dir.h"

namespace zdp::launcher {
namespace {

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::string drain(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(OutputPump, AFullLogDiskIsReportedWithItsReasonAndTheConsoleKeepsTheLines) {
  testing::TempDir dir;
  // /dev/full answers every write with ENOSPC, as a full file system does.
  ASSERT_EQ(::symlink("/dev/full", (dir.path() + "/rank-0.log").c_str()), 0);
  int console[2], rank[2];
  ASSERT_EQ(::pipe2(console, O_NONBLOCK), 0);
  ASSERT_EQ(::pipe2(rank, O_NONBLOCK), 0);
  {
    Terminal terminal(console[1], false);
    OutputPump pump(terminal, dir.path());
    ASSERT_TRUE(pump.add(0, rank[0], "=== attempt 1 ===").ok());
    const std::string lines = "step 1\nstep 2\nstep 3\n";
    ASSERT_EQ(::write(rank[1], lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
    ::close(rank[1]);
    while (!pump.drained()) pump.pump(std::chrono::milliseconds(100));
  }
  ::close(rank[0]);
  ::close(console[1]);
  const std::string out = drain(console[0]);
  ::close(console[0]);
  EXPECT_EQ(count(out, "cannot write " + dir.path() + "/rank-0.log: No space left on device"), 1u) << out;
  EXPECT_NE(out.find("rank 0's log ends here"), std::string::npos) << out;
  for (const char* line : {"[rank 0] step 1", "[rank 0] step 2", "[rank 0] step 3"}) {
    EXPECT_NE(out.find(line), std::string::npos) << out;
  }
}

// The pump stops reading a pipe at end of file but leaves it open for its owner to close:
// before, it closed it and the RankProcess closed the same number again, by then the store
// server's socket of a rank of the next attempt, which the server saw hang up.
TEST(OutputPump, APipeAtEndOfFileStaysOpenForItsOwner) {
  testing::TempDir dir;
  int console[2], rank[2];
  ASSERT_EQ(::pipe2(console, O_NONBLOCK), 0);
  ASSERT_EQ(::pipe2(rank, O_NONBLOCK), 0);
  {
    Terminal terminal(console[1], false);
    OutputPump pump(terminal, dir.path());
    ASSERT_TRUE(pump.add(0, rank[0], "").ok());
    const std::string line = "last words\n";
    ASSERT_EQ(::write(rank[1], line.data(), line.size()), static_cast<ssize_t>(line.size()));
    ::close(rank[1]);
    while (!pump.drained()) pump.pump(std::chrono::milliseconds(100));
    EXPECT_NE(::fcntl(rank[0], F_GETFD), -1) << "the pump closed the pipe it was given";
  }
  EXPECT_NE(::fcntl(rank[0], F_GETFD), -1) << "the pump's destructor closed the pipe it was given";
  EXPECT_EQ(::close(rank[0]), 0);
  ::close(console[1]);
  const std::string out = drain(console[0]);
  ::close(console[0]);
  EXPECT_NE(out.find("[rank 0] last words"), std::string::npos) << out;
}

}  // namespace
}  // namespace zdp::launcher
