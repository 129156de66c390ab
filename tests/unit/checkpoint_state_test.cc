// state.json (runtime/internal/checkpoint_state.h): every field round-trips, and a bad
// field is refused by name.
#include "runtime/internal/checkpoint_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "zdp/checkpoint.h"

namespace zdp {
namespace {

using ::testing::HasSubstr;

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

}  // namespace
}  // namespace zdp
