// A --set value read as TOML, for config.cc's parser; private to src/config/.
#pragma once

#include <toml++/toml.h>

#include <string>

namespace zdp::config_internal {

struct OverrideValue {
  toml::table doc;    // holds the value as "v"
  std::string after;  // text after a TOML value ("# 20" of "10 # 20"), "" when none
};

// The value is TOML ("3", "[\"--x\"]", "\"gloo\""); anything that is not (a bare word, an
// address, a path) is taken as a string, as is any value given to a string key. TOML++
// parses "10 # 20" as 10 and drops the comment, so what follows a value is returned in
// `after` for the caller to refuse.
OverrideValue parse_override_value(const std::string& value_text, bool wants_string);

}  // namespace zdp::config_internal
