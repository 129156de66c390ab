#include "launcher/settings_check.h"

#include <sstream>

#include "core/internal/printable.h"

namespace zdp::launcher {
namespace {

// job_wide_settings' lines, "section.key = value", as key -> value; other lines are skipped.
std::map<std::string, std::string> settings_by_key(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t eq = line.find(" = ");
    if (eq != std::string::npos && eq > 0) out.emplace(line.substr(0, eq), line.substr(eq + 3));
  }
  return out;
}

}  // namespace

std::string settings_difference(const std::string& mine, const std::string& theirs,
                                const std::map<std::string, std::string>& where) {
  constexpr int kShown = 6;
  const std::map<std::string, std::string> here = settings_by_key(mine);
  const std::map<std::string, std::string> there = settings_by_key(theirs);
  std::string out;
  int differing = 0;
  const auto differs = [&](const std::string& key, const std::string& text) {
    if (++differing <= kShown) out += (out.empty() ? "" : "; ") + text;
  };
  for (const auto& [key, value] : here) {
    const auto it = there.find(key);
    if (it != there.end() && it->second == value) continue;
    const auto origin = where.find(key);
    const std::string set_at = origin == where.end() ? "the default" : origin->second;
    differs(key, key + " = " + printable(value, 120) + " here (" + set_at + "), " +
                     (it == there.end() ? std::string("not one of node 0's keys")
                                        : printable(it->second, 120) + " on node 0"));
  }
  for (const auto& [key, value] : there) {
    if (!here.count(key)) differs(key, printable(key, 80) + " = " + printable(value, 120) + " on node 0, not a key here");
  }
  if (differing > kShown) out += "; and " + std::to_string(differing - kShown) + " more";
  return out;
}

}  // namespace zdp::launcher
