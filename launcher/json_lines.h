// The JSON lines files of dp-launch's reports (plan.jsonl, scale.jsonl).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zdp/status.h"

namespace zdp::launcher {

// Writes one line per element to dir/name (creating dir), through a temporary file and a
// rename so that a reader never sees half a file. Returns the path; kIoError names it.
StatusOr<std::string> write_json_lines(const std::string& dir, const std::string& name,
                                       const std::vector<nlohmann::json>& lines);

}  // namespace zdp::launcher
