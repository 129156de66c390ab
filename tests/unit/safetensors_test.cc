// safetensors headers and files without an engine (zdp/safetensors.h): the byte layout,
// validation naming the tensor, writers filling one file in any order, truncation.
#include "zdp/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "testing/temp_dir.h"

namespace zdp {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

safetensors::Header two_tensors() {
  return safetensors::make_header({{"a.weight", "F32", {2, 3}}, {"b", "BF16", {5}}}, {{"format", "pt"}}).value();
}

TEST(Safetensors, HeaderBytesFollowTheFormat) {
  const safetensors::Header h = two_tensors();
  EXPECT_EQ(h.tensors[1].begin, 24);
  EXPECT_EQ(h.tensors[1].end, 34);
  EXPECT_EQ(h.data_bytes(), 34);
  const std::string bytes = safetensors::encode_header(h);
  ASSERT_GE(bytes.size(), 8u);
  EXPECT_EQ(bytes.size() % 8, 0u);  // the data region starts 8-byte aligned
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);  // little endian (x86, as the format)
  EXPECT_EQ(n, bytes.size() - 8);
  const std::string json = bytes.substr(8);
  EXPECT_EQ(json.rfind("{\"__metadata__\":{\"format\":\"pt\"},\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                       "\"data_offsets\":[0,24]},",
                       0),
            0u)
      << json;
  StatusOr<safetensors::Header> back = safetensors::decode_header(json, "x");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(safetensors::encode_header(*back), bytes);
}

// decode_header's error for `json` (named f.safetensors), or "accepted".
std::string refused(const std::string& json) {
  StatusOr<safetensors::Header> h = safetensors::decode_header(json, "f.safetensors");
  return h.ok() ? std::string("accepted") : h.status().message();
}

TEST(Safetensors, BadHeadersAreRefusedNamingTheTensor) {
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}"),
              HasSubstr("f.safetensors: safetensors header: tensor 'a': data_offsets [0, 4) do not hold F32 [2]"));
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}"),
              HasSubstr("unknown dtype 'F33'"));
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}"),
              HasSubstr("tensor 'a' starts at byte 4 of the data, expected 0"));
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}"),
              HasSubstr("tensor 'a': a dimension = -1 is outside [0, 4611686018427387904]"));
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}"),
              HasSubstr("tensor 'a': a dimension is not an integer"));
  EXPECT_THAT(refused("[1]"), HasSubstr("not an object"));
  EXPECT_THAT(refused("{\"a\":"), HasSubstr("does not parse"));
  EXPECT_FALSE(safetensors::make_header({{"x", "F32", {1}}, {"x", "F32", {1}}}).ok());
  // What the safetensors package refuses too: a byte-order mark, NUL padding (nlohmann
  // took the NUL as the end), a name given twice (the last one was kept, the first one's
  // bytes then read as a hole or "too long"); and an empty name, which no writer makes.
  const std::string one = "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}";
  EXPECT_EQ(refused("{" + one + "}   "), "accepted");
  EXPECT_THAT(refused("\xef\xbb\xbf{" + one + "}"), HasSubstr("f.safetensors: safetensors header: "));
  EXPECT_THAT(refused("{" + one + "}" + std::string(3, '\0')),
              HasSubstr("bytes other than spaces after the JSON object"));
  EXPECT_THAT(refused("{" + one + "," + one + "}"), HasSubstr("'a' appears twice"));
  EXPECT_THAT(refused("{\"x\":{\"y\":1,\"y\":2}," + one + "}"), HasSubstr("tensor 'x'"))
      << "a name repeated inside a tensor is that tensor's problem, not a repeated tensor";
  EXPECT_THAT(refused("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"),
              HasSubstr("a tensor with an empty name"));
}

// Sizes that would overflow int64 once multiplied or subtracted are refused before they
// are: found by hand while bounding the JSON readers (UBSan: "signed integer overflow:
// 4294967296 * 4294967296" in the element count, "9223372036854775807 - -9223372036854775808"
// in end - begin, from offsets above INT64_MAX that get<int64_t>() wrapped).
TEST(Safetensors, SizesThatWouldOverflowAreRefused) {
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,0]}}"),
              HasSubstr("tensor 'a': data_offsets [0, 0) do not hold F32 [4294967296, 4294967296, 4]"));
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F64\",\"shape\":[1152921504606846976],\"data_offsets\":[0,0]}}"),
              HasSubstr("do not hold F64 [1152921504606846976]"));  // 2^60 elements of 8 bytes: 2^63
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
                      "\"data_offsets\":[9223372036854775808,9223372036854775807]}}"),
              HasSubstr("tensor 'a': an offset = 9223372036854775808 is outside [0, 4611686018427387904]"));
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551615]}}"),
              HasSubstr("an offset = 18446744073709551615 is outside"));
  std::string many = "[1";
  for (int i = 0; i < 64; ++i) many += ",1";
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":" + many + "],\"data_offsets\":[0,4]}}"),
              HasSubstr("tensor 'a': a shape of more than 64 dimensions"));
  // A zero dimension holds nothing, but the product is taken in order, in 64-bit unsigned
  // arithmetic, as the safetensors package does: one that overflows before the 0 is refused
  // (Python's safe_open: "overflow computing buffer size from shape"), others are valid.
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4611686018427387904,0],"
                      "\"data_offsets\":[0,0]}}"),
              HasSubstr("do not hold F32 [4611686018427387904, 4611686018427387904, 0]"));
  EXPECT_EQ(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,4611686018427387904],"
                    "\"data_offsets\":[0,0]}}"),
            "accepted");
  EXPECT_EQ(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2305843009213693952,4,0],\"data_offsets\":[0,0]}}"),
            "accepted");  // 2^63 on the way: fits 64 unsigned bits (it overflowed int64 in numel())
}

TEST(Safetensors, WritersFillAFileInAnyOrderAndReadersCheckItsSize) {
  TempDir dir;
  const std::string path = dir.path() + "/t.safetensors";
  const safetensors::Header h = two_tensors();
  {
    StatusOr<safetensors::Writer> creator = safetensors::Writer::create(path, h);
    ASSERT_TRUE(creator.ok()) << creator.status().to_string();
    ASSERT_TRUE(creator->close().ok());
  }
  // Two writers, as two ranks: each its own range, the second one first.
  StatusOr<safetensors::Writer> w1 = safetensors::Writer::open_existing(path, h);
  StatusOr<safetensors::Writer> w2 = safetensors::Writer::open_existing(path, h);
  ASSERT_TRUE(w1.ok() && w2.ok());
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const char b[10] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  ASSERT_TRUE(w2->write(24, b, 10).ok());
  ASSERT_TRUE(w1->write(12, a + 3, 12).ok());
  ASSERT_TRUE(w1->write(0, a, 12).ok());
  EXPECT_THAT(w1->write(30, a, 8).message(), HasSubstr("outside the data region of 34 bytes"));
  ASSERT_TRUE(w1->sync().ok() && w1->close().ok() && w2->close().ok());

  StatusOr<safetensors::Reader> r = safetensors::Reader::open(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  float back[6];
  ASSERT_TRUE(r->read(0, back, 24).ok());
  EXPECT_EQ(std::memcmp(a, back, 24), 0);
  EXPECT_EQ(r->file_bytes(), static_cast<int64_t>(std::filesystem::file_size(path)));
  for (const safetensors::TensorInfo& t : h.tensors) EXPECT_EQ(r->find(t.name), h.find(t.name)) << t.name;
  EXPECT_EQ(r->find("none"), -1);

  // Another header for the same file, a truncated file, a missing file.
  const safetensors::Header other = safetensors::make_header({{"a.weight", "F32", {3, 2}}, {"b", "BF16", {5}}}).value();
  EXPECT_FALSE(safetensors::Writer::open_existing(path, other).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 1);
  StatusOr<safetensors::Reader> cut = safetensors::Reader::open(path);
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(cut.status().message(), HasSubstr(path + ": truncated: "));
  EXPECT_EQ(safetensors::Reader::open(dir.path() + "/none").status().code(), StatusCode::kNotFound);
}

// Where the filesystem refuses fallocate(2) (NFSv3, some network filesystems: EOPNOTSUPP),
// the file is extended sparse, not written a byte per 4 KiB block (glibc's posix_fallocate
// fallback, used before, which stopped only because the writer's descriptor cannot read).
// A child whose fallocate syscall fails so (seccomp) creates a 64 MiB file.
TEST(Safetensors, AFilesystemWithoutFallocateGetsASparseFile) {
  TempDir dir;
  const std::string path = dir.path() + "/big.safetensors";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fallocate, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EOPNOTSUPP & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) _exit(3);
    StatusOr<safetensors::Writer> w =
        safetensors::Writer::create(path, safetensors::make_header({{"w", "F32", {16, 1024, 1024}}}).value());
    _exit(w.ok() && w->close().ok() ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0) << "3: no seccomp here; 4: create failed";
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_GE(st.st_size, int64_t{64} << 20);
  EXPECT_LT(static_cast<int64_t>(st.st_blocks) * 512, int64_t{1} << 20) << "the blocks were written one by one";
}

// Writing, reading and looking up every tensor of a header is linear in their number
// (checkpoint verification looks each parameter's state up): 50,000 tensors take about
// 0.3 s here. ordered_json's member-by-member search made the header's encoding and
// parsing quadratic (a minute at this size, hours at the header's size limit), and so was
// Header::find over every tensor.
TEST(Safetensors, ALargeHeaderIsWrittenReadAndSearchedInLinearTime) {
  TempDir dir;
  const std::string path = dir.path() + "/many.safetensors";
  std::vector<safetensors::TensorSpec> specs;
  const int n = 50000;
  for (int i = 0; i < n; ++i) specs.push_back({"t" + std::to_string(i), "F32", {1}});
  const auto start = std::chrono::steady_clock::now();
  {
    StatusOr<safetensors::Writer> w = safetensors::Writer::create(path, safetensors::make_header(specs).value());
    ASSERT_TRUE(w.ok() && w->close().ok());
  }
  StatusOr<safetensors::Reader> r = safetensors::Reader::open(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (int i = n - 1; i >= 0; --i) ASSERT_EQ(r->find("t" + std::to_string(i)), i);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Empty tensors sit at the offset of the tensor after them; they come first in the
// decoded data order, so the header reads back as contiguous.
TEST(Safetensors, EmptyTensorsBetweenOthersDecode) {
  const safetensors::Header h =
      safetensors::make_header({{"a", "F32", {2}}, {"z", "F32", {0}}, {"b", "F32", {3}}, {"e", "BF16", {0, 4}}}).value();
  const std::string bytes = safetensors::encode_header(h);
  StatusOr<safetensors::Header> back = safetensors::decode_header(bytes.substr(8), "h");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  std::vector<std::string> names;
  for (const safetensors::TensorInfo& t : back->tensors) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "z", "b", "e"}));
  EXPECT_EQ(back->tensors[1].begin, 8);
}

// A name from the file reaches error messages with its control characters escaped: a
// name with ESC sequences or a line break cannot repaint the terminal or forge a line.
TEST(Safetensors, NamesInMessagesAreEscaped) {
  const std::string text = "{\"" + std::string("w\\u001b]0;TITLE\\u0007\\r\\nFAKE") +
                           "\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}";
  StatusOr<safetensors::Header> h = safetensors::decode_header(text, "f");
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.status().message(), HasSubstr("tensor 'w\\x1b]0;TITLE\\x07\\x0d\\x0aFAKE'"));
  EXPECT_EQ(h.status().message().find('\x1b'), std::string::npos);
  EXPECT_EQ(h.status().message().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace zdp
