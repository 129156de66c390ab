// Files a program writes where the user said (dp-data's --out, dp-ckpt export's): a device,
// FIFO or folder there is refused, not replaced by the rename (dp-data once turned
// /dev/null into a token file); a link to a regular file writes that file; a link planted
// at the temporary name never redirects the write.
#include "core/internal/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "trainer/data/token_file.h"

namespace zdp {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OutputFile, DevicesFifosAndFoldersAreRefusedNotReplaced) {
  TempDir dir;
  const std::string fifo = dir.file("fifo"), folder = dir.file("folder");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directory(folder);
  const std::vector<uint16_t> tokens(10, 3);
  for (const std::string& path : {fifo, folder, std::string("/dev/null")}) {
    SCOPED_TRACE(path);
    const Status s = trainer::write_token_file(path, tokens);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("token file " + path + " exists and is a"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_directory(folder));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // A link to one of them, or to nothing, is refused too; nothing is created.
  const std::string to_fifo = dir.file("to-fifo"), dangling = dir.file("dangling");
  fs::create_symlink(fifo, to_fifo);
  fs::create_symlink(dir.file("nothing"), dangling);
  EXPECT_NE(output_target(to_fifo, "output").status().message().find("which is a FIFO (named pipe): refused"),
            std::string::npos);
  EXPECT_NE(output_target(dangling, "output").status().message().find("a symbolic link to nothing that exists"),
            std::string::npos);
  EXPECT_FALSE(trainer::write_token_file(dangling, tokens).ok());
  EXPECT_FALSE(fs::exists(dir.file("nothing")));
}

TEST(OutputFile, ALinkToARegularFileWritesThatFileAndStaysALink) {
  TempDir dir;
  const std::string target = dir.file("real.bin"), link = dir.file("link.bin");
  std::ofstream(target) << "old";
  fs::create_symlink(target, link);
  ASSERT_TRUE(trainer::write_token_file(link, std::vector<uint16_t>{1, 2, 3}).ok());
  EXPECT_TRUE(fs::is_symlink(link));
  StatusOr<trainer::TokenFile> back = trainer::TokenFile::open(target);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->size(), 3);
  EXPECT_EQ(output_target(dir.file("new.bin"), "output").value(), dir.file("new.bin"));
}

TEST(OutputFile, ALinkPlantedAtTheTemporaryNameIsNotFollowed) {
  TempDir dir;
  const std::string victim = dir.file("victim.txt"), out = dir.file("out.bin");
  std::ofstream(victim) << "precious";
  // The old writer used out.tmp; the shared one uses out.tmp.<pid>: plant both.
  fs::create_symlink(victim, out + ".tmp");
  fs::create_symlink(victim, out + ".tmp." + std::to_string(::getpid()));
  ASSERT_TRUE(trainer::write_token_file(out, std::vector<uint16_t>(100, 9)).ok());
  EXPECT_EQ(read(victim), "precious");
  EXPECT_TRUE(fs::is_regular_file(out) && !fs::is_symlink(out));
  EXPECT_EQ(fs::file_size(out), 256 * 4 + 100 * 2);
  EXPECT_FALSE(fs::exists(out + ".tmp." + std::to_string(::getpid())));
}

TEST(OutputFile, PartsAreWrittenInOrder) {
  TempDir dir;
  ASSERT_TRUE(write_file_atomically(dir.file("f"), {"head", "", "-tail"}, "file").ok());
  EXPECT_EQ(read(dir.file("f")), "head-tail");
  const Status s = write_file_atomically(dir.file("no-such-dir/f"), "x", "report");
  ASSERT_FALSE(s.ok());
  // The file asked for is named, and what is missing; the temporary name in passing.
  EXPECT_NE(s.message().find("cannot create report '" + dir.file("no-such-dir/f") + "' (through its temporary file '" +
                             dir.file("no-such-dir/f") + ".tmp."),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("the folder '" + dir.file("no-such-dir") + "' does not exist"), std::string::npos)
      << s.message();
}

// Two files that must change together: both staged, then both committed; a staged file
// that is discarded leaves nothing, and the old file stays.
TEST(OutputFile, StagedFilesChangeOnlyWhenCommitted) {
  TempDir dir;
  ASSERT_TRUE(write_file_atomically(dir.file("a"), "old a", "file").ok());
  StatusOr<std::string> a = stage_file(dir.file("a"), {"new a"}, "file");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(read(dir.file("a")), "old a");
  discard_staged(*a);
  EXPECT_FALSE(std::filesystem::exists(*a));
  EXPECT_EQ(read(dir.file("a")), "old a");
  a = stage_file(dir.file("a"), {"new a"}, "file");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(commit_staged(*a, dir.file("a"), "file").ok());
  EXPECT_EQ(read(dir.file("a")), "new a");
  EXPECT_FALSE(std::filesystem::exists(*a));
}

}  // namespace
}  // namespace zdp
