// Bounded reads of JSON values that came from outside the process: a file a user may have
// copied or edited (a checkpoint's state.json and safetensors header, a profile, a run
// summary) or a record another rank put in the store. Each read says what is wrong with
// the value, naming it, so that the reader can add its file or record and refuse it.
//
// Why not json's get<T>(): get<int>() of a float past int's range (1e20) is undefined
// behaviour, get<int64_t>() of an unsigned above INT64_MAX (JSON has them:
// 18446744073709551615) wraps to a negative number, an int64 narrowed to int wraps, and a
// product of two unchecked sizes overflows. Every integer read here is in [lo, hi] before
// it is converted, so the caller can narrow it or multiply within the bounds it chose.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "zdp/status.h"

namespace zdp::json_checked {

// Documents nested deeper than this are refused before they are parsed. nlohmann's parser
// is iterative, but dump(), copies and comparisons recurse: a state.json of 400 KB of
// '[' overflowed the stack of dp-ckpt and of a resume. zdp's own files nest a few levels.
constexpr int kMaxNesting = 128;

// Whether the arrays and objects of `text` (a JSON document, or not) nest deeper than
// `max_depth`, counted outside strings.
inline bool nests_deeper_than(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// json::parse without exceptions, and discarded (as for text that does not parse) when
// the document nests deeper than kMaxNesting: every parse of text from outside goes here.
template <typename Json = nlohmann::json>
Json parse(std::string_view text) {
  if (nests_deeper_than(text, kMaxNesting)) return Json(Json::value_t::discarded);
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// Each below takes nlohmann::json or nlohmann::ordered_json (the safetensors header keeps
// its order).

// j[key], or nullptr when `j` is not an object or has no such key.
template <typename Json>
const Json* member(const Json& j, const std::string& key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

namespace detail {
inline std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);  // bounds are round numbers: 0.001, 1e+09
  return buf;
}
template <typename Json>
Status outside(const Json& v, const std::string& name, const std::string& lo, const std::string& hi,
               bool unbounded_above) {
  return Status(StatusCode::kInvalidArgument,
                name + " = " + v.dump() + (unbounded_above ? " is below " + lo : " is outside [" + lo + ", " + hi + "]"));
}

inline Status missing(const std::string& name) { return Status(StatusCode::kInvalidArgument, name + " is missing"); }
}  // namespace detail

// `*v` as an integer in [lo, hi]. Refused, naming `name`: a missing value (nullptr,
// "<name> is missing"), a float (1e20, 2.0) or anything else that is not an integer
// ("<name> is not an integer"), and an integer out of range ("<name> = 70000 is outside
// [1, 65535]"; "... is below 0" when hi is INT64_MAX).
template <typename Json>
StatusOr<int64_t> integer(const Json* v, const std::string& name, int64_t lo, int64_t hi) {
  if (v == nullptr) return detail::missing(name);
  if (!v->is_number_integer()) return Status(StatusCode::kInvalidArgument, name + " is not an integer");
  const bool above_int64 = v->is_number_unsigned() && v->template get<uint64_t>() > uint64_t{INT64_MAX};
  const int64_t x = above_int64 ? INT64_MAX : v->template get<int64_t>();
  if (above_int64 || x < lo || x > hi) {
    return detail::outside(*v, name, std::to_string(lo), std::to_string(hi), hi == INT64_MAX && !above_int64);
  }
  return x;
}

// `*v` as a finite number in [lo, hi]: an integer or a float. JSON text has no NaN and
// the parser refuses 1e999, but a json built in code can hold either: refused too.
template <typename Json>
StatusOr<double> number(const Json* v, const std::string& name, double lo, double hi) {
  if (v == nullptr) return detail::missing(name);
  if (!v->is_number()) return Status(StatusCode::kInvalidArgument, name + " is not a number");
  const double x = v->template get<double>();
  if (!std::isfinite(x)) return Status(StatusCode::kInvalidArgument, name + " is not a finite number");
  if (x < lo || x > hi) {
    return detail::outside(*v, name, detail::number_text(lo), detail::number_text(hi),
                           hi == std::numeric_limits<double>::max());
  }
  return x;
}

// `*v` as any finite number (a time, a loss: negative ones included).
template <typename Json>
StatusOr<double> finite_number(const Json* v, const std::string& name) {
  return number(v, name, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max());
}

// `v`, or its error with `context` before it: "<context>: <name> is not an integer", so a
// reader names its file or record.
template <typename T>
StatusOr<T> with_context(StatusOr<T> v, const std::string& context) {
  if (!v.ok()) return v.status().with_context(context);
  return v;
}

}  // namespace zdp::json_checked
