// split_key_values (key_value_list.h).
#include "core/internal/key_value_list.h"

#include <set>
#include <sstream>

#include "core/internal/parse_decimal.h"

namespace zdp {

StatusOr<std::vector<KeyValue>> split_key_values(const std::string& text) {
  std::vector<KeyValue> items;
  std::set<std::string> seen;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) return Status(StatusCode::kInvalidArgument, "'" + item + "' is not key=value");
    KeyValue kv{item.substr(0, eq), item.substr(eq + 1)};
    if (!seen.insert(kv.key).second) return Status(StatusCode::kInvalidArgument, "'" + kv.key + "' is given twice");
    items.push_back(std::move(kv));
  }
  return items;
}

StatusOr<int64_t> integer_value(const KeyValue& item, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (parse_decimal(item.value, lo, hi, &v)) return v;
  return Status(StatusCode::kInvalidArgument, item.key + " = '" + item.value + "' is not an integer in [" +
                                                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

}  // namespace zdp
