// The files of dp-launch's reports: JSON lines (plan.jsonl, scale.jsonl) and their
// pictures (plan.svg, scale.svg).
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

// A picture of a report: its file name in the report's directory and the SVG text.
struct ReportPlot {
  std::string name;  // "plan.svg"
  std::string svg;
};

// What `dp-launch plan` and `dp-launch scale` end with: prints `table` on stdout, writes
// `lines` to dir/name and `plot` beside it, and says where, the plot last. Returns the
// command's exit code: 0, or 1 after printing the write error on stderr after `tool`
// ("dp-launch plan: ...").
int publish_report(const std::string& tool, const std::string& table, const std::string& dir,
                   const std::string& name, const std::vector<nlohmann::json>& lines, const ReportPlot& plot);

}  // namespace zdp::launcher
