// "rank=1,seq=4,action=kill": the grammar of zdp's fault and test hooks (ZDP_TEST_COMM,
// ZDP_TRAIN_FAULT, ZDP_CKPT_FAULT, ZDP_PROFILE_TEST_DELAY). Each hook reads its own keys;
// the splitting, and the refusals every hook shares, live here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zdp/status.h"

namespace zdp {

struct KeyValue {
  std::string key;
  std::string value;  // may be empty: the hook decides whether that is allowed
};

// Splits `text` at commas into key=value items, in their order. kInvalidArgument, with a
// message for the caller to put after its variable's name, for an item without '=' ("'x'
// is not key=value"), an empty key, or a key given twice ("'rank' is given twice").
StatusOr<std::vector<KeyValue>> split_key_values(const std::string& text);

// An item's value as a whole decimal integer in [lo, hi] (parse_decimal.h), or
// kInvalidArgument "rank = 'x' is not an integer in [0, 2147483647]".
StatusOr<int64_t> integer_value(const KeyValue& item, int64_t lo, int64_t hi);

// The longest pause a hook's "ms" may ask for: a day. Longer ones would overflow the
// nanoseconds of std::this_thread::sleep_for.
constexpr int64_t kMaxHookPauseMs = 24ll * 3600 * 1000;

}  // namespace zdp
