// The key table behind zdp/config.h: one descriptor per config key (type, range, doc,
// accessors) that parsing, range checks, to_toml, describe_resolved and key_reference all
// walk, so adding a key is one line in config_keys.cc and nothing else.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "zdp/config.h"

namespace zdp::config_internal {

enum class KeyType : int {
  kInt = 0,
  kIntOrAuto,   // an integer, or the string "auto" (the Value is then that string; the field holds 0)
  kFloat,       // a TOML float or integer
  kBool,
  kString,
  kEnum,        // a string from KeyInfo::words
  kStringList,  // array of strings
  kStringMap,   // table of strings
};

using StringList = std::vector<std::string>;
using StringMap = std::map<std::string, std::string>;
// A key's value between TOML and the struct field. Enums travel as their word.
using Value = std::variant<int64_t, double, bool, std::string, StringList, StringMap>;

// Allowed interval of a numeric key. Integers compare exactly as doubles (below 2^53).
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  bool hi_open = false;
  bool zero_off = false;  // 0 is allowed too, outside [lo, hi]: "0 = off" keys
};

struct KeyInfo {
  std::string name;     // "section.key"
  std::string section;
  std::string key;
  KeyType type = KeyType::kInt;
  std::vector<std::string> words;  // kEnum: the allowed values
  Range range;                     // kInt, kIntOrAuto, kFloat
  bool non_empty = false;          // kString: "" is refused
  std::string doc;                 // one line for --help
  std::function<Value(const Config&)> get;
  std::function<void(Config&, const Value&)> set;
};

// Every key, grouped by section in kSections order.
const std::vector<KeyInfo>& key_table();
// The sections, in the order they are printed.
const std::vector<std::string>& section_names();
// nullptr when `name` ("section.key") is not a key.
const KeyInfo* find_key(const std::string& name);

// "" when `value` is allowed for `info`, else the whole complaint, e.g.
// "launch.master_port = 70000 is out of range: must be in [1, 65535]".
std::string check_value(const KeyInfo& info, const Value& value);
// "integer in [1, 65535]", "one of \"auto\", \"nccl\", \"gloo\"", ...: for messages and --help.
std::string describe_type(const KeyInfo& info);
// `value` as TOML text.
std::string format_value(const KeyInfo& info, const Value& value);

// Appends every cross-field problem of `config` ("where: message"), skipping checks that
// involve a key in `failed` (its value was refused, so the field holds a stale default).
// world_size 0: checks that need it are skipped. Non-null `prefixes`: only checks whose
// keys all start with one of them (validate_keys).
void cross_checks(const Config& config, int world_size, const std::set<std::string>& failed,
                  const std::vector<std::string>* prefixes, std::vector<std::string>* out);

// TOML basic string, quoted and escaped.
std::string toml_quote(const std::string& text);
// Shortest text that reads back as exactly `value`, always with a '.' or exponent (TOML float).
std::string format_float(double value);
// "; did you mean 'x'?" for the candidate nearest to `name` by edit distance, or "" when
// none is close enough to be a plausible typo.
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates);

// A resolved config's header line that vouches for its values' comments (describe_resolved
// writes it; the reader trusts the comments' places only while the text below matches),
// and that line for `body`: "# values digest <16 hex digits of SHA-256>".
inline constexpr char kValuesDigestLine[] = "# values digest ";
std::string values_digest_line(std::string_view body);

}  // namespace zdp::config_internal
