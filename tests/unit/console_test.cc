// dp-train's console on a pseudo-terminal: the progress bar is drawn on a live terminal
// only (not TERM=dumb, where its escapes show as text), and erased before a phase whose
// log lines would otherwise be written on the bar's line, and when the console goes.
#include "trainer/loop/console.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace zdp::trainer {
namespace {

// A pseudo-terminal: what the console writes to `out` is read back from the master side.
class Pty {
 public:
  Pty() {
    master_ = ::posix_openpt(O_RDWR | O_NOCTTY);
    if (master_ < 0 || ::grantpt(master_) != 0 || ::unlockpt(master_) != 0) return;
    const int slave = ::open(::ptsname(master_), O_RDWR | O_NOCTTY);
    if (slave >= 0) out_ = ::fdopen(slave, "w");
    ::fcntl(master_, F_SETFL, O_NONBLOCK);
  }
  ~Pty() {
    if (out_ != nullptr) std::fclose(out_);
    if (master_ >= 0) ::close(master_);
  }
  std::FILE* out() const { return out_; }
  // What arrived until nothing more came for 100 ms (a pty delivers asynchronously).
  std::string read_all() {
    std::string text;
    char buf[4096];
    for (;;) {
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) return text;
      const ssize_t n = ::read(master_, buf, sizeof(buf));
      if (n <= 0) return text;
      text.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  int master_ = -1;
  std::FILE* out_ = nullptr;
};

class ConsoleOnATerminal : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* term = std::getenv("TERM");
    had_term_ = term != nullptr;
    if (had_term_) term_ = term;
  }
  void TearDown() override {
    if (had_term_) {
      ::setenv("TERM", term_.c_str(), 1);
    } else {
      ::unsetenv("TERM");
    }
  }
  bool had_term_ = false;
  std::string term_;
};

TEST_F(ConsoleOnATerminal, TheBarIsDrawnOnALiveTerminalAndErasedBeforeOtherOutput) {
  Pty pty;
  ASSERT_NE(pty.out(), nullptr);
  ::setenv("TERM", "xterm", 1);
  {
    Console console(pty.out(), true);
    ASSERT_TRUE(console.interactive());
    console.progress(3, 10, 5.0, 1.25);
    console.clear();  // before a checkpoint, whose log lines go to stderr
    const std::string drawn = pty.read_all();
    EXPECT_NE(drawn.find("[#########.....................] 3/10 loss 1.2500"), std::string::npos) << drawn;
    ASSERT_GE(drawn.size(), 4u);
    EXPECT_EQ(drawn.substr(drawn.size() - 4), "\r\033[K") << "the bar is erased";
    console.progress(4, 10, 4.0, 1.0);
  }
  // The console went (a run that failed) with its bar shown: erased, so the error's line
  // does not follow the bar on its line.
  const std::string last = pty.read_all();
  ASSERT_GE(last.size(), 4u);
  EXPECT_EQ(last.substr(last.size() - 4), "\r\033[K") << last;
}

// Emacs' shell and some CI pseudo-terminals say TERM=dumb: the escapes showed as text.
TEST_F(ConsoleOnATerminal, NoBarWhereTermIsDumb) {
  Pty pty;
  ASSERT_NE(pty.out(), nullptr);
  ::setenv("TERM", "dumb", 1);
  Console console(pty.out(), true);
  EXPECT_FALSE(console.interactive());
  console.progress(3, 10, 5.0, 1.25);
  console.line("step 3/10");
  std::fflush(pty.out());
  const std::string text = pty.read_all();
  EXPECT_EQ(text.find('\033'), std::string::npos) << text;
  EXPECT_NE(text.find("step 3/10"), std::string::npos) << text;
}

}  // namespace
}  // namespace zdp::trainer
