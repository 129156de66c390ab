// Parsing of $ZDP_TRAIN_FAULT.
#include "trainer/loop/train_fault.h"

#include <cstdlib>
#include <set>
#include <sstream>

namespace zdp::trainer {

StatusOr<TrainFault> parse_train_fault(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument,
                  "ZDP_TRAIN_FAULT=\"" + text + "\": " + why + " (expected \"rank=R,step=S[,attempt=A]\")");
  };
  TrainFault fault;
  std::set<std::string> seen;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return bad("'" + item + "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (!seen.insert(key).second) return bad("'" + key + "' is given twice");
    char* end = nullptr;
    const long long v = value.empty() ? -1 : std::strtoll(value.c_str(), &end, 10);
    if (v < 0 || (end && *end != '\0')) return bad(key + " = '" + value + "' is not a non-negative integer");
    if (key == "rank") {
      fault.rank = static_cast<int>(v);
    } else if (key == "step") {
      fault.step = v;
    } else if (key == "attempt") {
      fault.attempt = static_cast<int>(v);
    } else {
      return bad("unknown field '" + key + "'");
    }
  }
  if (!seen.count("rank") || !seen.count("step")) return bad("rank and step are required");
  return fault;
}

}  // namespace zdp::trainer
