// A --set value read as TOML, and the text after it (override_value.h).
#include "runtime/src/config/override_value.h"

#include <cstddef>

namespace zdp::config_internal {
namespace {

// The text after a value that ends at end_line:end_column of `text` (TOML++'s source().end:
// one past the value, line from 1, column in code points from 1), less white space.
std::string text_after_value(const std::string& text, size_t end_line, size_t end_column) {
  size_t line = 1, column = 1, at = 0;
  while (at < text.size() && (line < end_line || (line == end_line && column < end_column))) {
    const unsigned char c = static_cast<unsigned char>(text[at++]);
    if (c == '\n') {
      ++line;
      column = 1;
    } else if ((c & 0xC0) != 0x80) {  // a code point's first byte
      ++column;
    }
  }
  while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
  const size_t first = text.find_first_not_of(" \t\r\n", at);
  return first == std::string::npos ? "" : text.substr(first);
}

}  // namespace

OverrideValue parse_override_value(const std::string& value_text, bool wants_string) {
  OverrideValue value;
  bool parsed = false;
  try {
    const std::string text = "v = " + value_text;
    value.doc = toml::parse(text);
    parsed = value.doc.size() == 1 && value.doc.contains("v");
    if (parsed && (!wants_string || value.doc.get("v")->is_string())) {
      const toml::source_region& where = value.doc.get("v")->source();
      value.after = text_after_value(text, where.end.line, where.end.column);
    }
  } catch (const toml::parse_error&) {
  }
  if (!parsed || (wants_string && !value.doc.get("v")->is_string())) {
    value.doc = toml::table{};
    value.doc.insert("v", value_text);
  }
  return value;
}

}  // namespace zdp::config_internal
