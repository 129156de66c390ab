// The two parsers of short untrusted text (core/internal/parse_decimal.h,
// core/internal/key_value_list.h): what they take, and everything they must refuse.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>

#include "core/internal/key_value_list.h"
#include "core/internal/parse_decimal.h"

namespace zdp {
namespace {

using ::testing::HasSubstr;

TEST(ParseDecimal, TakesWholeNumbersInRange) {
  int64_t v = 0;
  EXPECT_TRUE(parse_decimal("0", 0, 10, &v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(parse_decimal("10", 0, 10, &v));
  EXPECT_EQ(v, 10);
  EXPECT_TRUE(parse_decimal("-1", -1, 10, &v));
  EXPECT_EQ(v, -1);
  EXPECT_TRUE(parse_decimal("9223372036854775807", 0, INT64_MAX, &v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_TRUE(parse_decimal("-9223372036854775808", INT64_MIN, 0, &v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_TRUE(parse_decimal("007", 0, 10, &v));  // leading zeros are still the number
  EXPECT_EQ(v, 7);
}

TEST(ParseDecimal, RefusesAndLeavesTheOutputAlone) {
  // Each of these strtoll takes in whole or in part: a space or a plus in front, a tail,
  // overflow (which it saturates); or the range refuses it.
  for (const char* bad : {"", " 1", "1 ", "+1", "1x", "0x10", "1.0", "1e3", "-", "--1", "9223372036854775808",
                          "-9223372036854775809", "99999999999999999999", "11", "-2"}) {
    int64_t v = 42;
    EXPECT_FALSE(parse_decimal(bad, -1, 10, &v)) << "'" << bad << "'";
    EXPECT_EQ(v, 42) << bad;
  }
  int64_t v = 42;
  EXPECT_FALSE(parse_decimal(std::string_view("12\0" "3", 4), 0, 10000, &v)) << "an embedded NUL is not a digit";
}

TEST(ParseInt, TakesAnIntFromAnEnvironmentValue) {
  int v = 5;
  EXPECT_TRUE(parse_int("-2147483648", &v));
  EXPECT_EQ(v, INT_MIN);
  EXPECT_TRUE(parse_int("2147483647", &v));
  EXPECT_EQ(v, INT_MAX);
  for (const char* bad : {"2147483648", "-2147483649", "4294967297", "", "3 ", "abc"}) {
    int w = 5;
    EXPECT_FALSE(parse_int(bad, &w)) << "'" << bad << "'";
    EXPECT_EQ(w, 5);
  }
  EXPECT_FALSE(parse_int(nullptr, &v)) << "an unset variable";
}

TEST(SplitKeyValues, KeepsTheOrderAndEmptyValues) {
  StatusOr<std::vector<KeyValue>> items = split_key_values("rank=1,seq=40,action=,ms=a=b");
  ASSERT_TRUE(items.ok()) << items.status().to_string();
  ASSERT_EQ(items->size(), 4u);
  EXPECT_EQ((*items)[0].key, "rank");
  EXPECT_EQ((*items)[0].value, "1");
  EXPECT_EQ((*items)[1].key, "seq");
  EXPECT_EQ((*items)[2].value, "");
  EXPECT_EQ((*items)[3].key, "ms");
  EXPECT_EQ((*items)[3].value, "a=b") << "only the first '=' splits";
  EXPECT_TRUE(split_key_values("")->empty());
}

TEST(SplitKeyValues, RefusesWhatNoHookMeans) {
  EXPECT_THAT(split_key_values("rank=1,seq").status().message(), HasSubstr("'seq' is not key=value"));
  EXPECT_THAT(split_key_values("=3").status().message(), HasSubstr("'=3' is not key=value"));
  EXPECT_THAT(split_key_values("rank=1,,seq=2").status().message(), HasSubstr("'' is not key=value"));
  EXPECT_THAT(split_key_values("rank=1,seq=2,rank=1").status().message(), HasSubstr("'rank' is given twice"));
  EXPECT_EQ(split_key_values("rank=1;seq=2").status().code(), StatusCode::kOk) << "one key 'rank', value '1;seq=2'";
}

TEST(IntegerValue, NamesTheKeyTheValueAndTheRange) {
  EXPECT_EQ(*integer_value({"ms", "250"}, 0, kMaxHookPauseMs), 250);
  EXPECT_EQ(*integer_value({"ms", "86400000"}, 0, kMaxHookPauseMs), 86400000);
  const Status s = integer_value({"ms", "86400001"}, 0, kMaxHookPauseMs).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "ms = '86400001' is not an integer in [0, 86400000]");
}

}  // namespace
}  // namespace zdp
