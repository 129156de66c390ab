// The checkpoint format without an engine: safetensors headers and files (byte layout,
// validation, truncation), state.json round trips and field errors, chunk checksums, the
// directory rules (latest, leftovers, keep) and the fault-hook syntax.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/internal/checkpoint_dirs.h"
#include "runtime/internal/checkpoint_fault.h"
#include "runtime/internal/checkpoint_hash.h"
#include "runtime/internal/checkpoint_state.h"
#include "testing/temp_dir.h"
#include "zdp/checkpoint.h"
#include "zdp/safetensors.h"

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

TEST(Safetensors, BadHeadersAreRefusedNamingTheTensor) {
  auto refused = [](const std::string& json) {
    StatusOr<safetensors::Header> h = safetensors::decode_header(json, "f.safetensors");
    return h.ok() ? std::string("accepted") : h.status().message();
  };
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}"),
              HasSubstr("f.safetensors: safetensors header: tensor 'a': data_offsets [0, 4) do not hold F32 [2]"));
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}"),
              HasSubstr("unknown dtype 'F33'"));
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}"),
              HasSubstr("tensor 'a' starts at byte 4 of the data, expected 0"));
  EXPECT_THAT(refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}"),
              HasSubstr("tensor 'a': a dimension is not a non-negative integer"));
  EXPECT_THAT(refused("[1]"), HasSubstr("not an object"));
  EXPECT_THAT(refused("{\"a\":"), HasSubstr("does not parse"));
  EXPECT_FALSE(safetensors::make_header({{"x", "F32", {1}}, {"x", "F32", {1}}}).ok());
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

  // Another header for the same file, a truncated file, a missing file.
  const safetensors::Header other = safetensors::make_header({{"a.weight", "F32", {3, 2}}, {"b", "BF16", {5}}}).value();
  EXPECT_FALSE(safetensors::Writer::open_existing(path, other).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 1);
  StatusOr<safetensors::Reader> cut = safetensors::Reader::open(path);
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(cut.status().message(), HasSubstr(path + ": truncated: "));
  EXPECT_EQ(safetensors::Reader::open(dir.path() + "/none").status().code(), StatusCode::kNotFound);
}

CheckpointInfo sample_info() {
  CheckpointInfo info;
  info.state.step = 12;
  info.state.data_position = 12 * 64;
  info.state.trainer_json = "{\"lr\": 0.1, \"name\": \"x\"}";
  info.state.world_size = 4;
  info.state.stage = 3;
  info.state.compute_dtype = "fp16";
  info.state.seed = 99;
  info.state.optimizer_steps = 11;
  info.state.loss_scale = 0.1 * 3;  // not a short decimal: must round-trip exactly
  info.state.loss_scale_good_steps = 5;
  info.state.storage = "shared";
  info.params = 2;
  info.elements = 11;
  CheckpointFileInfo f;
  f.name = kCheckpointModelFile;
  f.header_bytes = 16;
  f.bytes = 16 + 10;
  f.chunk_bytes = 4;
  f.header_hash = 0xfedcba9876543210ull;
  f.chunk_hashes = {1, 2, 0xffffffffffffffffull};
  info.files.push_back(f);
  return info;
}

TEST(CheckpointState, RoundTripsEveryField) {
  const CheckpointInfo info = sample_info();
  StatusOr<std::string> text = checkpoint::encode_state(info);
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  StatusOr<CheckpointInfo> back = checkpoint::decode_state(*text, "s.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  const CheckpointState& a = info.state;
  const CheckpointState& b = back->state;
  EXPECT_EQ(b.step, a.step);
  EXPECT_EQ(b.data_position, a.data_position);
  EXPECT_EQ(b.trainer_json, "{\"lr\":0.1,\"name\":\"x\"}");
  EXPECT_EQ(b.world_size, a.world_size);
  EXPECT_EQ(b.stage, a.stage);
  EXPECT_EQ(b.compute_dtype, a.compute_dtype);
  EXPECT_EQ(b.seed, a.seed);
  EXPECT_EQ(b.optimizer_steps, a.optimizer_steps);
  EXPECT_EQ(b.loss_scale, a.loss_scale);
  EXPECT_EQ(b.loss_scale_good_steps, a.loss_scale_good_steps);
  EXPECT_EQ(b.storage, a.storage);
  EXPECT_FALSE(b.library_version.empty());
  ASSERT_EQ(back->files.size(), 1u);
  EXPECT_EQ(back->files[0].chunk_hashes, info.files[0].chunk_hashes);
  EXPECT_EQ(back->files[0].header_hash, info.files[0].header_hash);
}

TEST(CheckpointState, ErrorsNameTheField) {
  std::string text = checkpoint::encode_state(sample_info()).value();
  auto decode_error = [](const std::string& t) {
    StatusOr<CheckpointInfo> r = checkpoint::decode_state(t, "s.json");
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? t : t.replace(at, from.size(), to);
  };
  EXPECT_THAT(decode_error(replaced("\"stage\": 3", "\"stage\": \"3\"")),
              HasSubstr("s.json: field 'engine.stage' is missing or not an integer"));
  EXPECT_THAT(decode_error(replaced("\"format_version\": 1", "\"format_version\": 7")),
              HasSubstr("format_version 7 (this build reads version 1)"));
  EXPECT_THAT(decode_error(replaced("\"0000000000000002\"", "\"2\"")),
              HasSubstr("files[0].chunks[1]: '2' is not a 16-digit hex checksum"));
  EXPECT_THAT(decode_error(replaced("\"bytes\": 26", "\"bytes\": 40")),
              HasSubstr("'files[0].chunks' lists 3 checksums, the sizes need 6"));
  CheckpointInfo bad = sample_info();
  bad.state.trainer_json = "{oops";
  EXPECT_THAT(checkpoint::encode_state(bad).status().message(), HasSubstr("trainer_json does not parse"));
}

TEST(CheckpointHash, ChunksCoverTheDataAndTheLastOneIsShort) {
  EXPECT_EQ(checkpoint::chunk_count(0, 4), 0);
  EXPECT_EQ(checkpoint::chunk_count(8, 4), 2);
  EXPECT_EQ(checkpoint::chunk_count(9, 4), 3);
  EXPECT_EQ(checkpoint::chunk_range(2, 9, 4).begin, 8);
  EXPECT_EQ(checkpoint::chunk_range(2, 9, 4).end, 9);
  // XXH3-64 of the empty input, the library's published test vector.
  EXPECT_EQ(checkpoint::hash_hex(checkpoint::hash_bytes("", 0)), "2d06800538d394c2");
  EXPECT_EQ(checkpoint::parse_hash_hex("2d06800538d394c2", "x").value(), 0x2d06800538d394c2ull);
}

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

  ASSERT_TRUE(checkpoint::remove_leftovers(root).ok());
  EXPECT_FALSE(std::filesystem::exists(root + "/step-30.tmp"));
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
}

TEST(CheckpointFault, SyntaxAndErrors) {
  StatusOr<checkpoint::FaultSpec> spec = checkpoint::parse_fault("rank=3,at=commit,step=20,attempt=0");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->rank, 3);
  EXPECT_EQ(spec->at, "commit");
  EXPECT_EQ(spec->step, 20);
  EXPECT_EQ(spec->attempt, 0);
  EXPECT_THAT(checkpoint::parse_fault("rank=1,at=flush").status().message(), HasSubstr("unknown point 'flush'"));
  EXPECT_THAT(checkpoint::parse_fault("at=write").status().message(), HasSubstr("rank and at are required"));
  EXPECT_THAT(checkpoint::parse_fault("rank=x,at=write").status().message(), HasSubstr("rank 'x' is not an integer"));
  ::setenv("ZDP_CKPT_FAULT", "rank=0,at=write,step=3", 1);
  EXPECT_TRUE(checkpoint::fault_point("write", 0, 2).ok());   // another step: no fault
  EXPECT_TRUE(checkpoint::fault_point("commit", 0, 3).ok());  // another point
  EXPECT_TRUE(checkpoint::fault_point("write", 1, 3).ok());   // another rank
  ::setenv("ZDP_CKPT_FAULT", "rank=0,at=nowhere", 1);
  EXPECT_FALSE(checkpoint::fault_point("write", 0, 3).ok());  // a typo is an error, not silence
  ::unsetenv("ZDP_CKPT_FAULT");
  EXPECT_EXIT((::setenv("ZDP_CKPT_FAULT", "rank=0,at=write", 1), (void)checkpoint::fault_point("write", 0, 1)),
              ::testing::ExitedWithCode(checkpoint::kFaultExitCode), "exiting with code 86 at 'write'");
}

}  // namespace
}  // namespace zdp
