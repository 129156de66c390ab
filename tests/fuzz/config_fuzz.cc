// Fuzz target: the TOML config loader with --set overrides (zdp/config.h). Input: TOML
// text, then optionally a line "%%" followed by one --set string per line. Properties:
// no crash or sanitizer report; a config that parses writes back (to_toml) to text that
// parses to the same config; validate_for_world never crashes at any world size.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "zdp/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string text = input;
  std::vector<std::string> overrides;
  const size_t split = input.find("\n%%\n");
  if (split != std::string::npos) {
    text = input.substr(0, split);
    size_t start = split + 4;
    while (start <= input.size() && overrides.size() < 16) {
      size_t end = input.find('\n', start);
      if (end == std::string::npos) end = input.size();
      overrides.push_back(input.substr(start, end - start));
      start = end + 1;
    }
  }
  zdp::StatusOr<zdp::Config> config = zdp::parse_config(text, "fuzz.toml", overrides);
  if (!config.ok()) return 0;
  const std::string written = zdp::to_toml(*config);
  zdp::StatusOr<zdp::Config> again = zdp::parse_config(written, "fuzz.toml");
  if (!again.ok() || !(*again == *config)) std::abort();  // to_toml must round-trip
  for (int world : {1, 2, 3, 8, 1 << 20}) (void)zdp::validate_for_world(*config, world);
  (void)zdp::describe_resolved(*config);
  return 0;
}
