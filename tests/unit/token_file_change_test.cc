// TokenFile::check_unchanged: a token file written to in place after it was mapped is
// named (size or modification time), one replaced by a rename or removed is not (the
// mapping keeps the file the run opened).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "trainer/data/token_file.h"

namespace zdp::trainer {
namespace {

// A token file whose modification time is an hour old, as a prepared corpus's is.
std::string old_token_file(const testing::TempDir& dir, const std::string& name) {
  const std::string path = dir.file(name);
  EXPECT_TRUE(write_token_file(path, std::vector<uint16_t>(4096, 7)).ok());
  std::filesystem::last_write_time(path, std::filesystem::last_write_time(path) - std::chrono::hours(1));
  return path;
}

TEST(TokenFileChange, AWriteInPlaceIsNamedWithTheFile) {
  testing::TempDir dir;
  const std::string path = old_token_file(dir, "same-length.bin");
  StatusOr<TokenFile> f = TokenFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_TRUE(f->check_unchanged().ok());
  {
    std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(kTokenFileHeaderBytes);
    const uint16_t zero = 0;
    out.write(reinterpret_cast<const char*>(&zero), sizeof(zero));
  }
  const Status s = f->check_unchanged();
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("token file '" + path + "' was changed in place"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("bytes"), std::string::npos) << "the same length: no size in the message\n" << s.message();
}

TEST(TokenFileChange, AFileThatGrewSaysBothSizes) {
  testing::TempDir dir;
  const std::string path = old_token_file(dir, "appended.bin");
  StatusOr<TokenFile> f = TokenFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::ofstream(path, std::ios::app | std::ios::binary) << "more";
  const Status s = f->check_unchanged();
  const std::string sizes = std::to_string(kTokenFileHeaderBytes + 2 * 4096) + " -> " +
                            std::to_string(kTokenFileHeaderBytes + 2 * 4096 + 4) + " bytes";
  EXPECT_NE(s.message().find(sizes), std::string::npos) << s.message();
}

TEST(TokenFileChange, AFileReplacedByARenameOrRemovedIsNoChange) {
  testing::TempDir dir;
  const std::string path = old_token_file(dir, "replaced.bin");
  StatusOr<TokenFile> f = TokenFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_TRUE(write_token_file(path, std::vector<uint16_t>(4096, 9)).ok());  // a temporary file renamed over it
  EXPECT_TRUE(f->check_unchanged().ok());
  EXPECT_EQ(f->tokens()[0], 7) << "the mapping keeps the file it opened";
  std::filesystem::remove(path);
  EXPECT_TRUE(f->check_unchanged().ok());
  EXPECT_EQ(f->tokens()[4095], 7);
}

}  // namespace
}  // namespace zdp::trainer
