// Text from a file or the network, made safe to print on a terminal or into a log line.
// A tensor name, a version string or a field's value in an error message is printed as it
// came; a control character in it (ESC, CR, BEL) could move the cursor, clear the screen,
// set the window title or end the line and forge the next one. Here every C0 control
// character and DEL is written \xNN, and a C1 control (UTF-8 C2 80 to C2 9F) \u00NN; other
// bytes (UTF-8 text) stay as they are, and text
// longer than `max_bytes` is cut, saying how long it was.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zdp {

inline std::string printable(std::string_view text, size_t max_bytes = 256) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  const std::string_view shown = text.substr(0, max_bytes);
  out.reserve(shown.size());
  for (size_t i = 0; i < shown.size(); ++i) {
    const char ch = shown[i];
    const auto c = static_cast<unsigned char>(ch);
    const auto next = i + 1 < shown.size() ? static_cast<unsigned char>(shown[i + 1]) : 0;
    if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // a C1 control in UTF-8 (U+009B is CSI)
      out += "\\u00";
      out += kHex[next >> 4];
      out += kHex[next & 0xf];
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  if (text.size() > max_bytes) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace zdp
