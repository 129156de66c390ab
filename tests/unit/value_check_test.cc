// The load's value check (runtime/internal/checkpoint_values.h) over a real safetensors
// file: parts of any size (a checksum chunk may end inside a value), the refused values
// named by tensor and element, -0 and subnormals accepted.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/internal/checkpoint_values.h"
#include "testing/temp_dir.h"
#include "zdp/safetensors.h"

namespace zdp::checkpoint {
namespace {

// Two tensors back to back: "w" (3 values), "w.exp_avg_sq" (5 values).
struct File {
  testing::TempDir dir;
  std::string path = dir.path() + "/f.safetensors";
  std::vector<float> values;
  safetensors::Reader reader() const { return safetensors::Reader::open(path).value(); }
  std::string bytes() const {
    std::string b(values.size() * 4, '\0');
    std::memcpy(b.data(), values.data(), b.size());
    return b;
  }
  explicit File(std::vector<float> v) : values(std::move(v)) {
    const safetensors::Header h =
        safetensors::make_header({{"w", "F32", {3}}, {"w.exp_avg_sq", "F32", {5}}}).value();
    safetensors::Writer w = safetensors::Writer::create(path, h).value();
    EXPECT_TRUE(w.write(0, values.data(), static_cast<int64_t>(values.size() * 4)).ok());
    EXPECT_TRUE(w.close().ok());
  }
};

// Feeds the bytes from `from` in parts of `part` bytes (the last one shorter).
Status feed_in_parts(const File& f, int64_t from, int64_t part, ValueRule rule) {
  const safetensors::Reader r = f.reader();
  const std::string b = f.bytes();
  ValueCheck check(r, from, rule);
  for (int64_t at = from; at < static_cast<int64_t>(b.size()); at += part) {
    ZDP_RETURN_IF_ERROR(check.feed(b.data() + at, std::min<int64_t>(part, static_cast<int64_t>(b.size()) - at)));
  }
  return Status::Ok();
}

TEST(ValueCheck, PartsOfAnySizeSeeTheSameValues) {
  const float subnormal = std::numeric_limits<float>::denorm_min();
  const File good({1.0f, -2.0f, 3e38f, 0.5f, -0.0f, subnormal, 0.0f, 7.0f});
  for (int64_t part : {1, 2, 3, 4, 5, 6, 7, 13, 32}) {
    EXPECT_TRUE(feed_in_parts(good, 0, part, ValueRule::kFinite).ok()) << part;
    // The second moments from their own offset (a piece of that tensor set): -0 is no
    // negative value.
    EXPECT_TRUE(feed_in_parts(good, 12, part, ValueRule::kFiniteNonNegative).ok()) << part;
  }
}

TEST(ValueCheck, ARefusedValueIsNamedWhereverThePartsEnd) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const File bad({1.0f, 2.0f, 3.0f, 0.5f, 0.25f, nan, 1.0f, 2.0f});
  // Split across parts of 3, 5 and 7 bytes the NaN (data bytes 20..23) was read shifted
  // by a part boundary: every size finds it at element 2 of the second moments.
  for (int64_t part : {1, 3, 4, 5, 7, 32}) {
    const Status s = feed_in_parts(bad, 0, part, ValueRule::kFinite);
    ASSERT_FALSE(s.ok()) << part;
    EXPECT_NE(s.message().find("f.safetensors: tensor 'w.exp_avg_sq' element 2 is nan: a checkpoint of a diverged "
                               "run; resume from an earlier one"),
              std::string::npos)
        << part << ": " << s.message();
  }
  const File negative({1.0f, 2.0f, 3.0f, 0.5f, 0.25f, 1.0f, -0.125f, 2.0f});
  EXPECT_TRUE(feed_in_parts(negative, 12, 3, ValueRule::kFinite).ok()) << "a negative first moment is fine";
  const Status s = feed_in_parts(negative, 12, 3, ValueRule::kFiniteNonNegative);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor 'w.exp_avg_sq' element 3 is -0.125 (a second moment is never negative)"),
            std::string::npos)
      << s.message();
  const File infinite({1.0f, -std::numeric_limits<float>::infinity(), 3.0f, 0, 0, 0, 0, 0});
  EXPECT_NE(feed_in_parts(infinite, 0, 6, ValueRule::kFinite).message().find("tensor 'w' element 1 is -inf"),
            std::string::npos);
}

}  // namespace
}  // namespace zdp::checkpoint
