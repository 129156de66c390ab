// dp-launch's rank output pump. A full log disk: the failure is said once, with errno's
// reason, and the rank's lines keep reaching the console (before, writes to the log failed
// silently and the log ended mid-run with no word why). And the pump never closes a pipe it
// reads: the RankProcess owns it, and a second close hit a socket that had reused the number.
#include "launcher/output_pump.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "launcher/terminal.h"
#include "testing/temp_dir.h"

namespace zdp::launcher {
namespace {

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::string read_small(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
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

// A rank whose log cannot be opened (here a directory of that name; a file left by
// another user's run) is still read: its output went unread, the rank blocked on its full
// pipe after 64 KiB, and the job hung.
TEST(OutputPump, ARankWhoseLogCannotBeOpenedIsStillRead) {
  testing::TempDir dir;
  ASSERT_EQ(::mkdir((dir.path() + "/rank-1.log").c_str(), 0755), 0);
  int console[2], rank[2];
  ASSERT_EQ(::pipe2(console, O_NONBLOCK), 0);
  ASSERT_EQ(::pipe2(rank, O_NONBLOCK), 0);
  {
    Terminal terminal(console[1], false);
    OutputPump pump(terminal, dir.path());
    const Status added = pump.add(1, rank[0], "=== attempt 0 ===");
    EXPECT_FALSE(added.ok());
    EXPECT_NE(added.message().find("rank 1's output goes to this console only"), std::string::npos) << added.message();
    const std::string lines = "step 1\nstep 2\n";
    ASSERT_EQ(::write(rank[1], lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
    ::close(rank[1]);
    for (int i = 0; i < 50 && !pump.drained(); ++i) pump.pump(std::chrono::milliseconds(100));
    EXPECT_TRUE(pump.drained());
  }
  ::close(rank[0]);
  ::close(console[1]);
  const std::string out = drain(console[0]);
  ::close(console[0]);
  EXPECT_NE(out.find("[rank 1] step 1\n[rank 1] step 2\n"), std::string::npos) << out;
}

// Output without a newline is passed on in pieces of kMaxLine bytes: it used to grow the
// launcher's memory without bound (and rescan it all at every read).
TEST(OutputPump, OutputWithoutNewlinesComesInBoundedPieces) {
  testing::TempDir dir;
  int console[2], rank[2];
  ASSERT_EQ(::pipe2(console, O_NONBLOCK), 0);
  ASSERT_EQ(::pipe2(rank, O_NONBLOCK), 0);
  const size_t total = 3 * OutputPump::kMaxLine + 100;
  std::string out;
  {
    Terminal terminal(console[1], false);
    OutputPump pump(terminal, dir.path());
    ASSERT_TRUE(pump.add(0, rank[0], "").ok());
    const std::string text(total, 'x');
    size_t written = 0;
    while (written < total || !pump.drained()) {
      if (written < total) {
        const ssize_t n = ::write(rank[1], text.data() + written, total - written);
        if (n > 0) written += static_cast<size_t>(n);
        if (written == total) ::close(rank[1]);
      }
      pump.pump(std::chrono::milliseconds(10));
      EXPECT_LE(pump.tail(0).back().size(), OutputPump::kMaxLine);
      out += drain(console[0]);
    }
  }
  ::close(rank[0]);
  ::close(console[1]);
  out += drain(console[0]);
  ::close(console[0]);
  // The log holds every byte, as four lines (the console, a non-blocking pipe here, may
  // have dropped part of a piece larger than its buffer).
  const std::string piece = std::string(OutputPump::kMaxLine, 'x') + "\n";
  const bool pieces = read_small(dir.path() + "/rank-0.log") == piece + piece + piece + std::string(100, 'x') + "\n";
  EXPECT_TRUE(pieces) << "the log is not three lines of kMaxLine bytes and one of 100";
  EXPECT_NE(out.find("[rank 0] xxx"), std::string::npos);
}

// A rank printing as fast as it can keeps its pipe full: pump() returns after
// kMaxReadPerPump bytes, not when the pipe is empty (which a flood never lets happen: the
// supervisor never saw Ctrl-C, other ranks' exits or its deadlines).
TEST(OutputPump, AFloodingRankDoesNotHoldThePump) {
  testing::TempDir dir;
  int console[2], rank[2];
  ASSERT_EQ(::pipe2(console, O_NONBLOCK), 0);
  ASSERT_EQ(::pipe2(rank, O_NONBLOCK), 0);
  std::atomic<bool> stop{false};
  std::thread flood([&] {  // "y\n" as fast as the pipe takes it, for at most 20 s
    const std::string lines = [] {
      std::string s;
      for (int i = 0; i < 4096; ++i) s += "y\n";
      return s;
    }();
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!stop && std::chrono::steady_clock::now() < end) (void)!::write(rank[1], lines.data(), lines.size());
  });
  {
    Terminal terminal(console[1], false);
    OutputPump pump(terminal, dir.path());
    ASSERT_TRUE(pump.add(0, rank[0], "").ok());
    for (int i = 0; i < 5; ++i) {
      const auto start = std::chrono::steady_clock::now();
      pump.pump(std::chrono::milliseconds(100));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_LT(seconds, 2.0) << "pump() did not return while the rank kept printing";
      (void)drain(console[0]);
    }
  }
  stop = true;
  flood.join();
  for (int fd : {rank[0], rank[1], console[0], console[1]}) ::close(fd);
}

}  // namespace
}  // namespace zdp::launcher
