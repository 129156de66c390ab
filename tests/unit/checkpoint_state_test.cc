// state.json (runtime/internal/checkpoint_state.h): every field round-trips, and a bad
// field is refused by name.
#include "runtime/internal/checkpoint_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "zdp/checkpoint.h"

namespace zdp {
namespace {

using ::testing::HasSubstr;

// A version-2 state.json as a version-1 file: no state_checksum line.
std::string as_version_1(std::string text) {
  const size_t v = text.find("\"format_version\": 2");
  EXPECT_NE(v, std::string::npos);
  text.replace(v, 19, "\"format_version\": 1");
  const size_t c = text.find(",\n \"state_checksum\"");
  EXPECT_NE(c, std::string::npos);
  return text.substr(0, c) + "\n}\n";
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

// A state.json larger than a load reads (read_small_file's 64 MiB) is refused at save:
// it was written, and every resume of it failed.
TEST(CheckpointState, OneLargerThanALoadReadsIsRefusedAtSave) {
  CheckpointInfo info = sample_info();
  info.files[0].chunk_hashes.assign(static_cast<size_t>(checkpoint::kMaxSmallFileBytes / 16), 7);
  StatusOr<std::string> text = checkpoint::encode_state(info);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("more than the 67108864 a load reads"), std::string::npos)
      << text.status().message();
  info.files[0].chunk_hashes.resize(1000);
  EXPECT_TRUE(checkpoint::encode_state(info).ok());
}

TEST(CheckpointState, ErrorsNameTheField) {
  std::string text = checkpoint::encode_state(sample_info()).value();
  auto decode_error = [](const std::string& t) {
    StatusOr<CheckpointInfo> r = checkpoint::decode_state(t, "s.json");
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  // Field checks on a version-1 file (no state_checksum, which would refuse any edit
  // first: OneEditAnywhereIsFoundByTheStateChecksum).
  text = as_version_1(text);
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? t : t.replace(at, from.size(), to);
  };
  EXPECT_THAT(decode_error(replaced("\"stage\": 3", "\"stage\": \"3\"")),
              HasSubstr("s.json: field 'engine.stage' is not an integer"));
  // Bounded before it is narrowed to int: 2^32 + 3 would otherwise pass as stage 3.
  EXPECT_THAT(decode_error(replaced("\"stage\": 3", "\"stage\": 4294967299")),
              HasSubstr("s.json: field 'engine.stage' = 4294967299 is outside [-2147483648, 2147483647]"));
  EXPECT_THAT(decode_error(replaced("\"step\": 12", "\"step\": 18446744073709551615")),
              HasSubstr("s.json: field 'step' = 18446744073709551615 is outside"));
  // Bounded so that chunk_count's (data + chunk - 1) cannot overflow.
  EXPECT_THAT(decode_error(replaced("\"chunk_bytes\": 4", "\"chunk_bytes\": 9223372036854775807")),
              HasSubstr("s.json: field 'files[0].chunk_bytes' = 9223372036854775807 is outside "
                        "[-9223372036854775808, 4611686018427387904]"));
  EXPECT_THAT(decode_error(replaced("\"format_version\": 1", "\"format_version\": 7")),
              HasSubstr("format_version 7 (this build reads versions 1 to 2)"));
  EXPECT_THAT(decode_error(replaced("\"0000000000000002\"", "\"2\"")),
              HasSubstr("files[0].chunks[1]: '2' is not a 16-digit hex checksum"));
  EXPECT_THAT(decode_error(replaced("\"bytes\": 26", "\"bytes\": 40")),
              HasSubstr("'files[0].chunks' lists 3 checksums, the sizes need 6"));
  CheckpointInfo bad = sample_info();
  bad.state.trainer_json = "{oops";
  EXPECT_THAT(checkpoint::encode_state(bad).status().message(), HasSubstr("trainer_json does not parse"));
}

// Version 2 checksums state.json itself: a one-character edit of the step or the data
// position (which would resume at another step with this step's weights) is refused,
// naming the file; a version-1 file without the checksum still reads.
TEST(CheckpointState, OneEditAnywhereIsFoundByTheStateChecksum) {
  const std::string text = checkpoint::encode_state(sample_info()).value();
  ASSERT_TRUE(checkpoint::decode_state(text, "s.json").ok());
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"step\": 12", "\"step\": 13"}, {"\"data_position\": 768", "\"data_position\": 769"}}) {
    std::string edited = text;
    edited.replace(edited.find(from), from.size(), to);
    StatusOr<CheckpointInfo> r = checkpoint::decode_state(edited, "s.json");
    ASSERT_FALSE(r.ok()) << from;
    EXPECT_THAT(r.status().message(), HasSubstr("s.json: the content has checksum"));
    EXPECT_THAT(r.status().message(), HasSubstr("altered or damaged"));
  }
  StatusOr<CheckpointInfo> old = checkpoint::decode_state(as_version_1(text), "s.json");
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_EQ(old->state.step, 12);
  // The version digit edited to 1 with the checksum kept: it turned the check off, and a
  // changed data_position then read as the truth.
  std::string downgraded = text;
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"format_version\": 2", "\"format_version\": 1"}, {"\"data_position\": 768", "\"data_position\": 769"}}) {
    downgraded.replace(downgraded.find(from), from.size(), to);
  }
  StatusOr<CheckpointInfo> r = checkpoint::decode_state(downgraded, "s.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("altered or damaged"));
}

// A state no save can produce is refused by field, whatever its checksum says.
TEST(CheckpointState, FieldsOutOfRangeAreRefused) {
  auto refused = [](CheckpointInfo info) {
    StatusOr<CheckpointInfo> r = checkpoint::decode_state(checkpoint::encode_state(info).value(), "s.json");
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  CheckpointInfo info = sample_info();
  info.state.data_position = std::numeric_limits<int64_t>::max();
  EXPECT_THAT(refused(info), HasSubstr("data_position 9223372036854775807 is not in [0, 2^62]"));
  info = sample_info();
  info.state.step = -1;
  EXPECT_THAT(refused(info), HasSubstr("step -1 is not in [0, 10^18)"));
  info.state.step = 1000000000000000000;  // 19 digits: a directory name find_latest would not read
  info.state.optimizer_steps = 0;
  EXPECT_THAT(refused(info), HasSubstr("step 1000000000000000000 is not in [0, 10^18)"));
  info = sample_info();
  info.state.world_size = 0;
  info.state.stage = 7;
  info.state.loss_scale = -1;
  const std::string several = refused(info);
  EXPECT_THAT(several, HasSubstr("engine.world_size 0"));
  EXPECT_THAT(several, HasSubstr("engine.stage 7"));
  EXPECT_THAT(several, HasSubstr("engine.loss_scale.scale"));
}

// A state.json whose "trainer" nests 200,000 arrays deep (400 KB, far below the size
// limit) is refused by its depth; dump() of it overflowed the stack (a segfault).
TEST(CheckpointState, DeeplyNestedJsonIsRefusedNotACrash) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  for (const int version : {1, 2}) {
    const std::string text = "{\"format\":\"zdp-checkpoint\",\"format_version\":" + std::to_string(version) +
                             ",\"state_checksum\":\"0000000000000000\",\"trainer\":" + deep + "}";
    StatusOr<CheckpointInfo> r = checkpoint::decode_state(text, "s.json");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().message(), HasSubstr("nested deeper than 128 levels")) << version;
  }
}

// A file name is joined to the checkpoint's folder and opened: only a checkpoint's own
// files, each once; and a checksum chunk is read into one buffer: at most 1 GiB.
TEST(CheckpointState, FileNamesAndChunkSizesFromTheFileAreBounded) {
  auto refused = [](const CheckpointInfo& info) {
    StatusOr<CheckpointInfo> r = checkpoint::decode_state(checkpoint::encode_state(info).value(), "s.json");
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  CheckpointInfo info = sample_info();
  info.files[0].name = "../../../../etc/passwd";
  EXPECT_THAT(refused(info), HasSubstr("'files[0].name' = '../../../../etc/passwd' is not model.safetensors or optimizer.safetensors"));
  info = sample_info();
  info.files.push_back(info.files[0]);
  EXPECT_THAT(refused(info), HasSubstr("'files' lists model.safetensors twice"));
  info = sample_info();
  info.files[0].chunk_bytes = kMaxChecksumChunkBytes * 2;
  info.files[0].chunk_hashes = {7};  // the 10 data bytes in one chunk
  EXPECT_THAT(refused(info), HasSubstr("inconsistent sizes"));
  info.files[0].chunk_bytes = kMaxChecksumChunkBytes;
  EXPECT_EQ(refused(info), "accepted");
}

}  // namespace
}  // namespace zdp
