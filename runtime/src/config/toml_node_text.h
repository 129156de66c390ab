// A TOML node as config errors show it ("found string \"x\""): its type's name and its
// value as TOML text; private to src/config/.
#pragma once

#include <toml++/toml.h>

#include <string>

namespace zdp::config_internal {

// "table", "array", "string", "integer", "float", "boolean", "date", "time", "date-time".
const char* node_type_name(const toml::node& node);
// The value as TOML text, for "found ..." in messages.
std::string node_text(const toml::node& node);
// The type's name and the text, cut at 80 characters.
std::string describe_node(const toml::node& node);

}  // namespace zdp::config_internal
