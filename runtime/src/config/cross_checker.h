// The cross checks' machinery (config_checks.cc, config_model_checks.cc,
// config_launch_checks.cc): CrossChecker, which reports a problem at the keys the user
// set, and the number formatting every message shares.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "zdp/config.h"

namespace zdp::config_internal {

inline std::string str(int64_t v) { return std::to_string(v); }

// a x b, or nullopt-like -1 when it does not fit in int64 (then nothing divides by it).
inline int64_t checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? -1 : out;
}

inline std::string product_text(int64_t p) {
  return p < 0 ? "more than " + str(std::numeric_limits<int64_t>::max()) : str(p);
}

// Whether `key` is selected: every key when `prefixes` is null, else the keys that start
// with one of them ("zero." selects a section, "model.dtype" one key).
inline bool selected(const std::string& key, const std::vector<std::string>* prefixes) {
  if (prefixes == nullptr) return true;
  for (const std::string& p : *prefixes) {
    if (key.compare(0, p.size(), p) == 0) return true;
  }
  return false;
}

// Collects the problems of cross_checks, each at the key that was set.
class CrossChecker {
 public:
  CrossChecker(const Config& config, const std::set<std::string>& failed, const std::vector<std::string>* prefixes,
               std::vector<std::string>* out)
      : config_(config), failed_(failed), prefixes_(prefixes), out_(out) {}

  // Reports message() at the first of `keys` that was set (file or --set), naming the
  // others a --set gave, or at the config's source when all are defaults; skipped when
  // one of `keys` failed to parse or is not among the selected keys.
  void require(bool ok, std::initializer_list<const char*> keys, const std::function<std::string()>& message) {
    if (ok) return;
    for (const char* k : keys) {
      if (failed_.count(k) || !selected(k, prefixes_)) return;
    }
    std::string where = config_.source;
    const char* at = nullptr;
    for (const char* k : keys) {
      if (config_.origins.count(k)) {
        where = config_.where(k);
        at = k;
        break;
      }
    }
    // The other keys a --set gave are named too: the file's d_model line alone was named
    // for `--set model.n_heads=3`, a line with nothing wrong.
    std::string also;
    for (const char* k : keys) {
      auto it = config_.origins.find(k);
      if (k == at || it == config_.origins.end() || it->second.source != ValueSource::kOverride) continue;
      also += (also.empty() ? " (with " : ", ") + config_.where(k);
    }
    if (!also.empty()) also += ")";
    out_->push_back(where + ": " + message() + also);
  }

 private:
  const Config& config_;
  const std::set<std::string>& failed_;
  const std::vector<std::string>* prefixes_;
  std::vector<std::string>* out_;
};

inline std::string approx(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

// The model's keys against each other, the data, the optimizer's rounding and the model's
// size (config_model_checks.cc).
void model_checks(const Config& c, CrossChecker& check);
// The launch keys against each other and the limits of a process's environment and
// arguments (config_launch_checks.cc).
void launch_checks(const Config& c, CrossChecker& check);

}  // namespace zdp::config_internal
