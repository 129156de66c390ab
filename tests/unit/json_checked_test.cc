// runtime/internal/json_checked.h: integers and numbers from outside are read in their
// bounds, and every refusal names the value; the readers of state.json, safetensors
// headers, profiles, run summaries and progress records rely on these edges.
#include "runtime/internal/json_checked.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace zdp {
namespace {

using nlohmann::json;

std::string integer_error(const std::string& text, int64_t lo, int64_t hi) {
  const json j = json::parse(text);
  StatusOr<int64_t> v = json_checked::integer(&j, "x", lo, hi);
  return v.ok() ? "ok " + std::to_string(*v) : v.status().message();
}

TEST(JsonChecked, IntegersAreReadInTheirBoundsOnly) {
  EXPECT_EQ(integer_error("7", 0, 10), "ok 7");
  EXPECT_EQ(integer_error("-3", -3, 0), "ok -3");
  EXPECT_EQ(integer_error("9223372036854775807", 0, INT64_MAX), "ok 9223372036854775807");
  EXPECT_EQ(integer_error("-9223372036854775808", INT64_MIN, 0), "ok -9223372036854775808");
  EXPECT_EQ(integer_error("11", 0, 10), "x = 11 is outside [0, 10]");
  EXPECT_EQ(integer_error("-1", 0, INT64_MAX), "x = -1 is below 0");
  // An unsigned above INT64_MAX is refused, not wrapped to -1 as get<int64_t>() would.
  EXPECT_EQ(integer_error("18446744073709551615", INT64_MIN, INT64_MAX),
            "x = 18446744073709551615 is outside [-9223372036854775808, 9223372036854775807]");
  EXPECT_EQ(integer_error("9223372036854775808", 0, INT64_MAX),
            "x = 9223372036854775808 is outside [0, 9223372036854775807]");
  // A float is not an integer whatever its value: converting 1e20 to int is undefined.
  EXPECT_EQ(integer_error("2.0", 0, 10), "x is not an integer");
  EXPECT_EQ(integer_error("1e20", 0, INT64_MAX), "x is not an integer");
  EXPECT_EQ(integer_error("\"7\"", 0, 10), "x is not an integer");
  EXPECT_EQ(integer_error("null", 0, 10), "x is not an integer");
  EXPECT_EQ(json_checked::integer<json>(nullptr, "x", 0, 10).status().message(), "x is missing");
}

std::string number_error(const json& j, double lo, double hi) {
  StatusOr<double> v = json_checked::number(&j, "t", lo, hi);
  return v.ok() ? "ok " + std::to_string(*v) : v.status().message();
}

TEST(JsonChecked, NumbersAreFiniteAndInTheirBounds) {
  const double max = std::numeric_limits<double>::max();
  EXPECT_EQ(number_error(json::parse("0.5"), 0, 1), "ok 0.500000");
  EXPECT_EQ(number_error(json::parse("3"), 0, 10), "ok 3.000000");  // an integer is a number
  EXPECT_EQ(number_error(json::parse("2.5"), 0, 1), "t = 2.5 is outside [0, 1]");
  EXPECT_EQ(number_error(json::parse("0.0005"), 0.001, 1e9), "t = 0.0005 is outside [0.001, 1e+09]");
  EXPECT_EQ(number_error(json::parse("-1"), 0, max), "t = -1 is below 0");
  EXPECT_EQ(number_error(json::parse("\"fast\""), 0, max), "t is not a number");
  // JSON text cannot hold them, a json built in code can.
  EXPECT_EQ(number_error(json(std::numeric_limits<double>::infinity()), -max, max), "t is not a finite number");
  EXPECT_EQ(number_error(json(std::nan("")), -max, max), "t is not a finite number");
  EXPECT_EQ(json_checked::number<json>(nullptr, "t", 0, 1).status().message(), "t is missing");
  EXPECT_EQ(number_error(json::parse("-1e300"), -max, max), "ok " + std::to_string(-1e300));
  const json negative(-2.5);
  EXPECT_EQ(*json_checked::finite_number(&negative, "t"), -2.5);
  EXPECT_EQ(json_checked::finite_number<json>(nullptr, "t").status().message(), "t is missing");
}

TEST(JsonChecked, MembersAndContext) {
  const json j = json::parse(R"({"a": 1})");
  ASSERT_NE(json_checked::member(j, "a"), nullptr);
  EXPECT_EQ(json_checked::member(j, "b"), nullptr);
  EXPECT_EQ(json_checked::member(json::parse("[1]"), "a"), nullptr);  // not an object: no member
  // ordered_json (the safetensors header's) reads the same.
  const nlohmann::ordered_json o = nlohmann::ordered_json::parse(R"({"n": 99})");
  EXPECT_EQ(json_checked::integer(json_checked::member(o, "n"), "n", 0, 10).status().message(), "n = 99 is outside [0, 10]");
  const StatusOr<int64_t> in_file =
      json_checked::with_context(json_checked::integer(json_checked::member(j, "b"), "b", 0, 1), "f.json");
  EXPECT_EQ(in_file.status().message(), "f.json: b is missing");
  EXPECT_EQ(in_file.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*json_checked::with_context(json_checked::integer(json_checked::member(j, "a"), "a", 0, 1), "f.json"), 1);
}

TEST(JsonChecked, NestingIsCountedOutsideStrings) {
  EXPECT_FALSE(json_checked::nests_deeper_than(R"({"a": [[1], {"b": [2]}]})", 4));
  EXPECT_TRUE(json_checked::nests_deeper_than(R"({"a": [[1], {"b": [2]}]})", 3));
  // Brackets inside strings, escaped quotes included, do not count.
  EXPECT_FALSE(json_checked::nests_deeper_than(R"({"a": "[[[[\"[[[["})", 1));
  EXPECT_TRUE(json_checked::parse(std::string(129, '[') + std::string(129, ']')).is_discarded());
  EXPECT_EQ(json_checked::parse(std::string(128, '[') + std::string(128, ']')).dump().size(), 256u);
  EXPECT_TRUE(json_checked::parse("{not json").is_discarded());
}

}  // namespace
}  // namespace zdp
