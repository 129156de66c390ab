// Values of config keys as text: range/choice checks and their messages, type names for
// --help, TOML formatting (round-trip exact floats, escaped strings), "did you mean" hints.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/internal/utf8.h"
#include "runtime/src/config/config_keys.h"

namespace zdp::config_internal {
namespace {

std::string format_bound(double v, bool integer) {
  if (integer) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// "in [1, 65535]", ">= 1", "> 0", "in [0, 1)"; "" when unbounded.
std::string range_text(const Range& r, bool integer) {
  const bool has_lo = std::isfinite(r.lo);
  // An integer field's own limits (int's or int64's, where field() clipped the range) are
  // not worth printing: nobody means 2^31. A bound chosen that large is (2^62).
  const bool has_hi = std::isfinite(r.hi) && !(integer && (r.hi == 2147483647.0 || r.hi >= 9223372036854775807.0));
  const bool lo_shown = has_lo && !(integer && (r.lo == -2147483648.0 || r.lo <= -9223372036854775807.0));
  if (r.zero_off) {
    Range on = r;
    on.zero_off = false;
    return "0 (off) or " + range_text(on, integer);
  }
  if (lo_shown && has_hi) {
    return "in " + std::string(r.lo_open ? "(" : "[") + format_bound(r.lo, integer) + ", " +
           format_bound(r.hi, integer) + (r.hi_open ? ")" : "]");
  }
  if (lo_shown) return (r.lo_open ? "> " : ">= ") + format_bound(r.lo, integer);
  if (has_hi) return (r.hi_open ? "< " : "<= ") + format_bound(r.hi, integer);
  return "";
}

bool in_range(const Range& r, double v) {
  if (r.zero_off && v == 0) return true;
  // Written so that NaN is out of every range.
  const bool lo_ok = r.lo_open ? v > r.lo : v >= r.lo;
  const bool hi_ok = r.hi_open ? v < r.hi : v <= r.hi;
  return lo_ok && hi_ok;
}

// An integer key's range, exact: a double holds integers only up to 2^53, so
// 4611686018427387905 (2^62 + 1) converted to double is 2^62 and would pass a bound of
// 2^62. Conversion is monotonic, so the double decides unless it lands on a bound; there,
// the bound (an integer that large) is compared as an integer.
bool in_int_range(const Range& r, int64_t v) {
  if (r.zero_off && v == 0) return true;
  const double d = static_cast<double>(v);
  constexpr double kTwo63 = 9223372036854775808.0;
  auto compare = [&](double bound) {  // -1, 0 or 1: v against an integral bound equal to d
    if (bound >= kTwo63) return -1;
    if (bound < -kTwo63) return 1;
    const int64_t b = static_cast<int64_t>(bound);
    return v < b ? -1 : v > b ? 1 : 0;
  };
  const bool lo_ok = d != r.lo ? in_range(Range{r.lo, std::numeric_limits<double>::infinity(), r.lo_open, false}, d)
                               : (r.lo_open ? compare(r.lo) > 0 : compare(r.lo) >= 0);
  const bool hi_ok = d != r.hi ? in_range(Range{-std::numeric_limits<double>::infinity(), r.hi, false, r.hi_open}, d)
                               : (r.hi_open ? compare(r.hi) < 0 : compare(r.hi) <= 0);
  return lo_ok && hi_ok;
}

std::string words_text(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? ", " : "") + toml_quote(words[i]);
  return out;
}

// Optimal string alignment distance: a swapped pair of letters counts as one typo. Any
// distance above `limit` is returned as limit + 1, found as soon as a whole row exceeds it
// (a row's minimum never falls). Three rows rather than a matrix: a name in a config may
// be long (the file's limit is 1 MiB).
size_t edit_distance(const std::string& a, const std::string& b, size_t limit) {
  const size_t m = b.size();
  std::vector<size_t> before(m + 1), prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    size_t row_min = cur[0];
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], before[j - 2] + 1);
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min > limit) return limit + 1;
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return std::min(prev[m], limit + 1);
}

}  // namespace

namespace {

// Why `text` cannot be a config string: a NUL byte (a path or argument ends there, and
// the rest is silently dropped), or bytes that are not UTF-8 (TOML allows none: the
// resolved config dp-launch writes for its ranks would not parse). "" when it can.
std::string text_problem(const std::string& name, const std::string& text) {
  if (text.find('\0') != std::string::npos) return name + " contains a NUL byte";
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) return name + " is not valid UTF-8 (byte " + std::to_string(i) + ")";
    i += n;
  }
  return "";
}

}  // namespace

std::string check_value(const KeyInfo& info, const Value& value) {
  switch (info.type) {
    case KeyType::kInt:
    case KeyType::kIntOrAuto: {
      if (const auto* word = std::get_if<std::string>(&value)) {
        if (*word == "auto") return "";
        return info.name + " = " + toml_quote(*word) + " is not allowed: must be " + describe_type(info);
      }
      const int64_t v = std::get<int64_t>(value);
      if (in_int_range(info.range, v)) return "";
      // range_text leaves out the type's own limit; a value past it must see it ("must be
      // >= 1" for 2147483648 read as a contradiction).
      std::string must = range_text(info.range, true);
      if (std::isfinite(info.range.hi) && static_cast<double>(v) > info.range.hi &&
          must.find(format_bound(info.range.hi, true)) == std::string::npos) {
        must += (must.empty() ? "" : ", ") + std::string("at most ") + format_bound(info.range.hi, true);
      }
      return info.name + " = " + std::to_string(v) + " is out of range: must be " + must +
             (info.type == KeyType::kIntOrAuto ? " or \"auto\"" : "");
    }
    case KeyType::kFloat: {
      const double v = std::get<double>(value);
      // inf would pass an unbounded range and then overflow a conversion later (a timeout
      // in milliseconds, an fp32 learning rate): no key means anything by it.
      if (!std::isfinite(v)) {
        const std::string r = range_text(info.range, false);
        return info.name + " = " + format_float(v) + " is not a finite number" + (r.empty() ? "" : ": must be " + r);
      }
      if (in_range(info.range, v)) return "";
      return info.name + " = " + format_float(v) + " is out of range: must be " + range_text(info.range, false);
    }
    case KeyType::kEnum: {
      const std::string& v = std::get<std::string>(value);
      for (const std::string& w : info.words) {
        if (w == v) return "";
      }
      return info.name + " = " + toml_quote(v) + " is not allowed: must be one of " + words_text(info.words);
    }
    case KeyType::kString: {
      const std::string& v = std::get<std::string>(value);
      if (info.non_empty && v.empty()) return info.name + " must not be empty";
      return text_problem(info.name, v);
    }
    case KeyType::kStringList: {
      const StringList& list = std::get<StringList>(value);
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string problem = text_problem(info.name + "[" + std::to_string(i) + "]", list[i]);
        if (!problem.empty()) return problem;
      }
      return "";
    }
    case KeyType::kStringMap:
      for (const auto& [name, v] : std::get<StringMap>(value)) {
        // launch.env is the only map: its names become environment variables.
        // A shell's variable name: a name with '=' would set another variable, one with
        // quotes, dots or spaces no program reads by the name meant.
        const bool word = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                          name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
                              std::string::npos;
        if (!word) {
          return info.name + ": the name " + toml_quote(name) +
                 " is not a variable name (letters, digits and '_', not starting with a digit)";
        }
        // What dp-launch sets for each rank after launch.env: a value here was dropped silently.
        static const char* const kSetByTheLauncher[] = {
            "RANK",       "LOCAL_RANK",     "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",  "MASTER_ADDR",
            "MASTER_PORT", "ZDP_CONFIG",    "ZDP_JOB_SECRET", "ZDP_ATTEMPT",   "ZDP_BACKEND", "ZDP_LAUNCHER",
            "ZDP_LIFELINE_FD", "ZDP_RUN_ID"};
        for (const char* reserved : kSetByTheLauncher) {
          if (name == reserved) {
            return info.name + "." + name + ": dp-launch sets " + name +
                   " for each rank itself (the launch section's keys, or dp-launch's environment for "
                   "ZDP_JOB_SECRET, decide it)";
          }
        }
        std::string problem = text_problem(info.name + " name " + toml_quote(name), name);
        if (problem.empty()) problem = text_problem(info.name + "." + name, v);
        if (!problem.empty()) return problem;
      }
      return "";
    case KeyType::kBool:
      return "";
  }
  return "";
}

std::string describe_type(const KeyInfo& info) {
  switch (info.type) {
    case KeyType::kInt: {
      const std::string r = range_text(info.range, true);
      return r.empty() ? "integer" : "integer " + r;
    }
    case KeyType::kIntOrAuto: return "integer " + range_text(info.range, true) + ", or \"auto\"";
    case KeyType::kFloat: {
      const std::string r = range_text(info.range, false);
      return r.empty() ? "number" : "number " + r;
    }
    case KeyType::kBool: return "boolean";
    case KeyType::kString: return info.non_empty ? "non-empty string" : "string";
    case KeyType::kEnum: return "one of " + words_text(info.words);
    case KeyType::kStringList: return "array of strings";
    case KeyType::kStringMap: return "table of strings";
  }
  return "?";
}

std::string format_value(const KeyInfo& info, const Value& value) {
  switch (info.type) {
    case KeyType::kIntOrAuto:
      if (const auto* word = std::get_if<std::string>(&value)) return toml_quote(*word);
      return std::to_string(std::get<int64_t>(value));
    case KeyType::kInt: return std::to_string(std::get<int64_t>(value));
    case KeyType::kFloat: return format_float(std::get<double>(value));
    case KeyType::kBool: return std::get<bool>(value) ? "true" : "false";
    case KeyType::kString:
    case KeyType::kEnum: return toml_quote(std::get<std::string>(value));
    case KeyType::kStringList: {
      const StringList& list = std::get<StringList>(value);
      std::string out = "[";
      for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + toml_quote(list[i]);
      return out + "]";
    }
    case KeyType::kStringMap: {
      const StringMap& map = std::get<StringMap>(value);
      if (map.empty()) return "{}";
      // An inline table: TOML 1.0 keeps it on one line. Keys are quoted so any name works.
      std::string out = "{ ";
      bool first = true;
      for (const auto& [k, v] : map) {
        out += (first ? "" : ", ") + toml_quote(k) + " = " + toml_quote(v);
        first = false;
      }
      return out + " }";
    }
  }
  return "?";
}

std::string toml_quote(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;  // UTF-8 passes through unchanged
        }
    }
  }
  return out + "\"";
}

std::string format_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The fewest significant digits that read back bit-exact, so to_toml round-trips.
  char buf[48];
  int digits = 1;
  for (; digits < 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  // %g would write 300 as "3e+02": give it enough digits to stay positional below 1e16.
  const int exponent = value == 0 ? 0 : static_cast<int>(std::floor(std::log10(std::fabs(value))));
  if (exponent >= digits && exponent < 16) digits = exponent + 1;
  std::snprintf(buf, sizeof(buf), "%.*g", digits, value);
  std::string out = buf;
  const size_t e = out.find('e');
  if (e != std::string::npos) {
    // "1e-08" -> "1e-8"; "1e+20" -> "1e20".
    size_t digit = e + 1;
    if (out[digit] == '+') out.erase(digit, 1);
    else if (out[digit] == '-') ++digit;
    while (digit + 1 < out.size() && out[digit] == '0') out.erase(digit, 1);
  } else if (out.find('.') == std::string::npos) {
    out += ".0";  // TOML needs it to be a float
  }
  return out;
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates) {
  // About one typo per three letters; beyond that the hint is noise.
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  const std::string* best = nullptr;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    // The distance is at least the difference in length: a candidate that cannot be within
    // the limit is not measured (a long unknown name costs nothing then, not its length
    // times every key's).
    const size_t gap = name.size() > c.size() ? name.size() - c.size() : c.size() - name.size();
    if (gap > limit) continue;
    const size_t d = edit_distance(name, c, limit);
    if (!best || d < best_distance) {
      best = &c;
      best_distance = d;
    }
  }
  if (!best || best_distance > limit) return "";
  return "; did you mean '" + *best + "'?";
}

}  // namespace zdp::config_internal
