// The programs given hostile input files: a directory, /dev/zero or a FIFO as dp-launch's or
// dp-train's config, as dp-data's input, as a token file; a token count beyond the format.
// Each is refused at once with the path and what it is; none hangs (`timeout` would exit
// 124), aborts with std::bad_alloc or runs a default job.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "testing/run_command.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

using testing::CommandRun;
using testing::run_command;
using testing::TempDir;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Runs `command` under a 30 s timeout: a hang shows as exit code 124.
CommandRun bounded(const std::string& command) { return run_command("timeout 30 " + command); }

std::string make_fifo(const TempDir& dir) {
  const std::string path = dir.path() + "/fifo";
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
  return path;
}

TEST(HostileInput, DpLaunchRefusesADirectoryAsItsConfigEvenInDryRun) {
  TempDir dir;
  for (const char* flag : {"--dry-run", ""}) {
    const CommandRun r = bounded(std::string(ZDP_DP_LAUNCH) + " " + flag + " " + dir.path());
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(contains(r.output, "config file '" + dir.path() + "' is a directory, not a regular file")) << r.output;
    EXPECT_FALSE(contains(r.output, "# world:")) << r.output;  // no default job planned
  }
}

TEST(HostileInput, DpLaunchAndDpTrainRefuseDevZeroAndAFifoAsTheirConfig) {
  TempDir dir;
  const std::string fifo = make_fifo(dir);
  for (const std::string& bad : {std::string("/dev/zero"), fifo}) {
    const CommandRun l = bounded(std::string(ZDP_DP_LAUNCH) + " --dry-run " + bad);
    EXPECT_EQ(l.exit_code, 2) << l.output;
    EXPECT_TRUE(contains(l.output, "config file '" + bad + "' is a ")) << l.output;
    const CommandRun t = bounded(std::string(ZDP_DP_TRAIN) + " --config " + bad);
    EXPECT_NE(t.exit_code, 0) << t.output;
    EXPECT_NE(t.exit_code, 124) << "dp-train hung on " << bad;
    EXPECT_TRUE(contains(t.output, "config file '" + bad + "' is a ")) << t.output;
    EXPECT_FALSE(contains(t.output, "bad_alloc")) << t.output;
  }
}

TEST(HostileInput, DpTrainRefusesAFifoAsItsTokenFile) {
  TempDir dir;
  const std::string fifo = make_fifo(dir);
  const CommandRun r = bounded(std::string(ZDP_DP_TRAIN) + " --set model.kind=gpt --set data.kind=tokens --set data.path=" +
                               fifo + " --set train.steps=1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "dp-train hung on a FIFO token file";
  EXPECT_TRUE(contains(r.output, "token file '" + fifo + "' is a FIFO")) << r.output;
}

TEST(HostileInput, DpDataRefusesFifoDeviceAndDirectoryInputs) {
  TempDir dir;
  const std::string fifo = make_fifo(dir);
  const std::string data = std::string(ZDP_DP_DATA);
  struct Case {
    std::string command;
    std::string expected;
  };
  const Case cases[] = {
      {data + " text --out " + dir.path() + "/o " + fifo, "text file '" + fifo + "' is a FIFO"},
      {data + " text --out " + dir.path() + "/o /dev/zero", "text file '/dev/zero' is a character device"},
      {data + " info " + fifo, "token file '" + fifo + "' is a FIFO"},
      {data + " info /dev/zero", "token file '/dev/zero' is a character device"},
      {data + " info " + dir.path(), "token file '" + dir.path() + "' is a directory"},
  };
  for (const Case& c : cases) {
    const CommandRun r = bounded(c.command);
    EXPECT_EQ(r.exit_code, 1) << c.command << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.expected)) << c.command << "\n" << r.output;
  }
  // `info` of several files describes every good one and names every bad one (it stopped
  // at the first bad one); the exit code says that one failed.
  const std::string good = dir.path() + "/good.bin";
  ASSERT_EQ(bounded(data + " synthetic --out " + good + " --tokens 10").exit_code, 0);
  const CommandRun all = bounded(data + " info " + good + " " + fifo + " /dev/zero " + good);
  EXPECT_EQ(all.exit_code, 1) << all.output;
  size_t described = 0;
  for (size_t at = all.output.find(good + ": llm.c token file"); at != std::string::npos;
       at = all.output.find(good + ": llm.c token file", at + 1)) {
    ++described;
  }
  EXPECT_EQ(described, 2u) << all.output;
  EXPECT_TRUE(contains(all.output, "is a FIFO") && contains(all.output, "is a character device")) << all.output;
}

// A corpus of more files than the descriptor limit: dp-data held every file open until
// the end and stopped at "Too many open files" (ulimit -n is often 1024).
TEST(HostileInput, DpDataTextReadsMoreFilesThanItMayHoldOpen) {
  TempDir dir;
  std::string list;
  int64_t bytes = 0;
  for (int i = 0; i < 100; ++i) {
    const std::string path = dir.path() + "/" + std::to_string(i) + ".txt";
    const std::string text = "file " + std::to_string(i) + " of a corpus\n";
    std::ofstream(path) << text;
    bytes += static_cast<int64_t>(text.size());
    list += " " + path;
  }
  const CommandRun r = run_command("ulimit -n 32 && timeout 30 " + std::string(ZDP_DP_DATA) + " text --out " +
                                   dir.path() + "/o" + list);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "dp-data: 100 files")) << r.output;
  struct stat train {}, val {};
  ASSERT_EQ(::stat((dir.path() + "/o/train.bin").c_str(), &train), 0);
  ASSERT_EQ(::stat((dir.path() + "/o/val.bin").c_str(), &val), 0);
  EXPECT_EQ((train.st_size - 1024) / 2 + (val.st_size - 1024) / 2, bytes) << "every byte of every file, once";
}

// Before: the option allowed 2^31, 4.2 GB of tokens were made over 38 s, then the writer
// refused the count. Now the option's range is the format's.
TEST(HostileInput, DpDataRefusesATokenCountBeyondTheFormatBeforeAllocating) {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  const CommandRun r = bounded(std::string(ZDP_DP_DATA) + " synthetic --out " + dir.path() +
                               "/s.bin --tokens 2147483648");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "2147483647")) << r.output;
  EXPECT_LT(seconds, 5.0) << r.output;
  struct stat st {};
  EXPECT_NE(::stat((dir.path() + "/s.bin").c_str(), &st), 0);
}

// --val-fraction 0 wrote a val.bin of 0 tokens, which llm.c's loader asserts on and
// dp-train refuses, and `dp-data info` reported it as a good file.
TEST(HostileInput, DpDataWritesNoEmptyTokenFileAndInfoRefusesOne) {
  TempDir dir;
  std::ofstream(dir.path() + "/a.txt") << "some text to train on\n";
  const CommandRun r = bounded(std::string(ZDP_DP_DATA) + " text --out " + dir.path() + "/o --val-fraction 0 " +
                               dir.path() + "/a.txt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "no val.bin written")) << r.output;
  struct stat st {};
  EXPECT_EQ(::stat((dir.path() + "/o/train.bin").c_str(), &st), 0);
  EXPECT_NE(::stat((dir.path() + "/o/val.bin").c_str(), &st), 0);
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520, header[1] = 1;
  std::ofstream(dir.path() + "/empty.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(header.data()), 1024);
  const CommandRun info = bounded(std::string(ZDP_DP_DATA) + " info " + dir.path() + "/empty.bin");
  EXPECT_NE(info.exit_code, 0) << info.output;
  EXPECT_TRUE(contains(info.output, "0 tokens (llm.c's loader and dp-train refuse an empty file)")) << info.output;
}

// dp-data text writes its two files as a pair: an older corpus's val.bin was left beside a
// new train.bin, by --val-fraction 0 (now removed) or when val.bin could not be written
// (a folder there: now refused before train.bin is written).
TEST(HostileInput, DpDataTextLeavesNoOtherCorpussHalfBesideTrainBin) {
  TempDir dir;
  std::ofstream(dir.path() + "/a.txt") << "some text to train on, long enough for a held-out tail\n";
  const std::string text = std::string(ZDP_DP_DATA) + " text --out " + dir.path() + "/o ";
  ASSERT_EQ(bounded(text + dir.path() + "/a.txt").exit_code, 0);
  struct stat before {};
  ASSERT_EQ(::stat((dir.path() + "/o/val.bin").c_str(), &before), 0);
  const CommandRun none = bounded(text + "--val-fraction 0 " + dir.path() + "/a.txt");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_TRUE(contains(none.output, "(the old one removed)")) << none.output;
  struct stat st {};
  EXPECT_NE(::stat((dir.path() + "/o/val.bin").c_str(), &st), 0) << "the old val.bin is still there";

  ASSERT_EQ(::stat((dir.path() + "/o/train.bin").c_str(), &before), 0);
  ASSERT_EQ(::mkdir((dir.path() + "/o/val.bin").c_str(), 0755), 0);
  std::ofstream(dir.path() + "/b.txt") << "another corpus, of another length than the first one was\n";
  const CommandRun refused = bounded(text + dir.path() + "/b.txt");
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_TRUE(contains(refused.output, "val.bin")) << refused.output;
  ASSERT_EQ(::stat((dir.path() + "/o/train.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, before.st_size) << "train.bin was rewritten beside a val.bin that could not be";

  // val.bin that cannot be written for a reason no check foresees (here the file size limit,
  // as a full disk): train.bin stays the old corpus's too, and no temporary file is left.
  ASSERT_EQ(::rmdir((dir.path() + "/o/val.bin").c_str()), 0);
  std::ofstream(dir.path() + "/big.txt") << std::string(20000, 'x');
  const CommandRun full = bounded("bash -c \"trap '' XFSZ; ulimit -f 16; " + text + "--val-fraction 0.9 " + dir.path() +
                                  "/big.txt\"");
  EXPECT_NE(full.exit_code, 0) << full.output;
  EXPECT_TRUE(contains(full.output, "cannot write token file '" + dir.path() + "/o/val.bin'")) << full.output;
  ASSERT_EQ(::stat((dir.path() + "/o/train.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, before.st_size) << "train.bin was replaced though val.bin was not";
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path() + "/o"), {}), 1) << "a temporary file left";
}

// train.bin and val.bin are dp-data's own names in --out: a link planted there (in a shared
// data folder) made it replace whatever file the link named.
TEST(HostileInput, DpDataTextWritesNoFileThroughALinkInItsOutputFolder) {
  TempDir dir;
  std::ofstream(dir.path() + "/a.txt") << "some text to train on, long enough for a held-out tail\n";
  std::ofstream(dir.path() + "/precious") << "keep";
  ASSERT_EQ(::mkdir((dir.path() + "/o").c_str(), 0755), 0);
  for (const char* name : {"train.bin", "val.bin"}) {
    const std::string link = dir.path() + "/o/" + name;
    ASSERT_EQ(::symlink((dir.path() + "/precious").c_str(), link.c_str()), 0);
    const CommandRun r = bounded(std::string(ZDP_DP_DATA) + " text --out " + dir.path() + "/o " + dir.path() + "/a.txt");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, link + " is a symbolic link")) << r.output;
    std::ifstream in(dir.path() + "/precious");
    std::string kept((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(kept, "keep") << name;
    ASSERT_EQ(::unlink(link.c_str()), 0);
  }
}

}  // namespace
}  // namespace zdp
