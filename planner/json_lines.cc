// write_json_lines and publish_report (json_lines.h).
#include "planner/json_lines.h"

#include <cstdio>
#include <filesystem>

#include "core/internal/output_file.h"

namespace zdp::launcher {

StatusOr<std::string> write_json_lines(const std::string& dir, const std::string& name,
                                       const std::vector<nlohmann::json>& lines) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status(StatusCode::kIoError, "cannot create " + dir + ": " + ec.message());
  const std::string path = (fs::path(dir) / name).string();
  std::string text;
  // Paths and names from outside may hold bytes that are not UTF-8 (a Latin-1 file name):
  // replaced (U+FFFD), as dump() threw on them and the plan ended in abort().
  for (const nlohmann::json& line : lines) text += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  ZDP_RETURN_IF_ERROR(write_file_atomically(path, text, "report"));
  return path;
}

int publish_report(const std::string& tool, const std::string& table, const std::string& dir,
                   const std::string& name, const std::vector<nlohmann::json>& lines, const ReportPlot& plot) {
  std::fputs(table.c_str(), stdout);
  StatusOr<std::string> path = write_json_lines(dir, name, lines);
  if (!path.ok()) {
    std::fprintf(stderr, "%s: %s\n", tool.c_str(), path.status().message().c_str());
    return 1;
  }
  std::printf("JSON lines: %s\n", path->c_str());
  const std::string svg_path = (std::filesystem::path(dir) / plot.name).string();
  const Status drawn = write_file_atomically(svg_path, plot.svg, "plot");
  if (!drawn.ok()) {
    std::fprintf(stderr, "%s: %s\n", tool.c_str(), drawn.message().c_str());
    return 1;
  }
  std::printf("plot: %s\n", svg_path.c_str());
  return 0;
}

}  // namespace zdp::launcher
