// Files a user names, given hostile things: a directory, a FIFO, /dev/zero, a file over the
// limit. Every reader (the shared InputFile, the config loader, token files, safetensors,
// state.json) refuses them at once, naming the path and what it is, and never blocks.
#include "core/internal/input_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <string>

#include "runtime/internal/checkpoint_state.h"
#include "testing/temp_dir.h"
#include "trainer/data/token_file.h"
#include "zdp/config.h"
#include "zdp/safetensors.h"

namespace zdp {
namespace {

using testing::TempDir;

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A FIFO nobody writes to: opening it for reading the ordinary way would block forever.
std::string make_fifo(const TempDir& dir) {
  const std::string path = dir.path() + "/fifo";
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
  return path;
}

TEST(InputFile, RefusesADirectoryNamingIt) {
  TempDir dir;
  const Status s = read_input_file(dir.path(), "config file", 1 << 20).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "config file '" + dir.path() + "' is a directory, not a regular file");
}

TEST(InputFile, RefusesAFifoWithoutBlocking) {
  TempDir dir;
  const std::string fifo = make_fifo(dir);
  const auto start = std::chrono::steady_clock::now();
  const Status s = read_input_file(fifo, "token file", 1 << 20).status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(s.message(), "'" + fifo + "' is a FIFO (named pipe), not a regular file")) << s.message();
}

TEST(InputFile, RefusesACharacterDevice) {
  const Status s = read_input_file("/dev/zero", "text file", 1 << 20).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "text file '/dev/zero' is a character device, not a regular file");
}

TEST(InputFile, StatesTheLimitOfAFileTooLarge) {
  TempDir dir;
  const std::string path = dir.path() + "/big";
  write(path, std::string(2049, 'x'));
  const Status s = read_input_file(path, "config file", 2048).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "config file '" + path + "' is 2049 bytes, more than the 2 KiB a config file may have");
  write(path, std::string(2048, 'y'));
  EXPECT_EQ(read_input_file(path, "config file", 2048).value(), std::string(2048, 'y'));
}

TEST(InputFile, MissingFileIsNotFoundAndEmptyFileIsEmpty) {
  TempDir dir;
  const Status s = read_input_file(dir.path() + "/nope", "config file", 100).status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(s.message(), "No such file or directory")) << s.message();
  write(dir.path() + "/empty", "");
  EXPECT_EQ(read_input_file(dir.path() + "/empty", "config file", 100).value(), "");
}

TEST(InputFile, FollowsASymlinkToARegularFile) {
  TempDir dir;
  write(dir.path() + "/real", "abc");
  ASSERT_EQ(::symlink((dir.path() + "/real").c_str(), (dir.path() + "/link").c_str()), 0);
  EXPECT_EQ(read_input_file(dir.path() + "/link", "config file", 100).value(), "abc");
}

TEST(InputFile, ByteSizeTextUsesTheLargestExactUnit) {
  EXPECT_EQ(byte_size_text(1 << 20), "1 MiB");
  EXPECT_EQ(byte_size_text(int64_t{1} << 30), "1 GiB");
  EXPECT_EQ(byte_size_text(1000), "1000 bytes");
  EXPECT_EQ(byte_size_text(3 << 10), "3 KiB");
}

// Before: a directory parsed as an empty file (the default job), /dev/zero threw
// std::bad_alloc, a FIFO blocked forever.
TEST(LoadConfig, RefusesDirectoryDeviceAndFifo) {
  TempDir dir;
  const StatusOr<Config> d = load_config(dir.path());
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(contains(d.status().message(), "is a directory")) << d.status().message();
  const StatusOr<Config> z = load_config("/dev/zero");
  ASSERT_FALSE(z.ok());
  EXPECT_TRUE(contains(z.status().message(), "'/dev/zero' is a character device")) << z.status().message();
  const StatusOr<Config> f = load_config(make_fifo(dir));
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(contains(f.status().message(), "FIFO")) << f.status().message();
}

TEST(LoadConfig, RefusesAConfigOverOneMebibyte) {
  TempDir dir;
  const std::string path = dir.path() + "/huge.toml";
  write(path, "# " + std::string((1 << 20) + 10, 'x') + "\n");
  const StatusOr<Config> c = load_config(path);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(contains(c.status().message(), "more than the 1 MiB a config file may have")) << c.status().message();
}

TEST(TokenFileInput, RefusesFifoAndDirectoryWithoutBlocking) {
  TempDir dir;
  const StatusOr<trainer::TokenFile> f = trainer::TokenFile::open(make_fifo(dir));
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(contains(f.status().message(), "token file '" + dir.path() + "/fifo' is a FIFO")) << f.status().message();
  const StatusOr<trainer::TokenFile> d = trainer::TokenFile::open(dir.path());
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(contains(d.status().message(), "is a directory")) << d.status().message();
}

TEST(TokenFileInput, HeaderDecodingChecksEveryField) {
  int32_t header[kTokenFileHeaderInts] = {kTokenFileMagic, kTokenFileVersion, 5};
  const int64_t good = kTokenFileHeaderBytes + 10;
  EXPECT_EQ(decode_token_header(header, good, "f").value(), 5);
  EXPECT_TRUE(contains(decode_token_header(header, good + 1, "f").status().message(), "the header says 5"));
  EXPECT_TRUE(contains(decode_token_header(nullptr, 12, "f").status().message(), "shorter than"));
  header[2] = -1;
  EXPECT_FALSE(decode_token_header(header, kTokenFileHeaderBytes - 2, "f").ok());
  EXPECT_FALSE(decode_token_header(header, kTokenFileHeaderBytes, "f").ok());
  header[1] = 2;
  EXPECT_TRUE(contains(decode_token_header(header, good, "f").status().message(), "version 2"));
  header[0] = 7;
  EXPECT_TRUE(contains(decode_token_header(header, good, "f").status().message(), "magic number 7"));
}

TEST(SafetensorsInput, RefusesAFifoWithoutBlocking) {
  TempDir dir;
  const StatusOr<safetensors::Reader> r = safetensors::Reader::open(make_fifo(dir));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.status().message(), "safetensors file '" + dir.path() + "/fifo' is a FIFO"))
      << r.status().message();
}

TEST(StateFileInput, RefusesAFifoStateJson) {
  TempDir dir;
  const std::string state = dir.path() + "/state.json";
  ASSERT_EQ(::mkfifo(state.c_str(), 0600), 0);
  const StatusOr<std::string> text = checkpoint::read_small_file(state);
  ASSERT_FALSE(text.ok());
  EXPECT_TRUE(contains(text.status().message(), "is a FIFO")) << text.status().message();
}

}  // namespace
}  // namespace zdp
