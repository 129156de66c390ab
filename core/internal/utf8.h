// UTF-8 as TOML (and JSON) require it: the length of the valid sequence that starts at a
// byte, or 0 where none does (a stray continuation byte, a truncated sequence, an overlong
// form, a UTF-16 surrogate, a code point past U+10FFFF).
#pragma once

#include <cstddef>
#include <string>

namespace zdp {

inline size_t utf8_sequence_length(const std::string& text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  bool ok = n > 0 && i + n <= text.size() && !(n == 2 && c < 0xc2) && !(n == 4 && c > 0xf4);
  for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
  if (ok && n == 3) {  // no overlong forms, no UTF-16 surrogates
    const auto c1 = static_cast<unsigned char>(text[i + 1]);
    ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
  }
  if (ok && n == 4) {  // no overlong forms, nothing past U+10FFFF
    const auto c1 = static_cast<unsigned char>(text[i + 1]);
    ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
  }
  return ok ? n : 0;
}

}  // namespace zdp
