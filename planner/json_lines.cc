// write_json_lines and publish_report (json_lines.h).
#include "planner/json_lines.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace zdp::launcher {

StatusOr<std::string> write_json_lines(const std::string& dir, const std::string& name,
                                       const std::vector<nlohmann::json>& lines) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string path = (fs::path(dir) / name).string(), tmp = path + ".tmp";
  {
    std::ofstream file(tmp, std::ios::trunc);
    for (const nlohmann::json& line : lines) file << line.dump() << "\n";
    file.close();
    if (!file) return Status(StatusCode::kIoError, "cannot write " + tmp + (ec ? " (" + ec.message() + ")" : ""));
  }
  fs::rename(tmp, path, ec);
  if (ec) return Status(StatusCode::kIoError, "cannot rename " + tmp + " to " + path + ": " + ec.message());
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
  const std::string svg_path = (std::filesystem::path(dir) / plot.name).string(), tmp = svg_path + ".tmp";
  {
    std::ofstream file(tmp, std::ios::trunc);
    file << plot.svg;
    file.close();
    if (!file) {
      std::fprintf(stderr, "%s: cannot write %s\n", tool.c_str(), tmp.c_str());
      return 1;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, svg_path, ec);
  if (ec) {
    std::fprintf(stderr, "%s: cannot rename %s to %s: %s\n", tool.c_str(), tmp.c_str(), svg_path.c_str(),
                 ec.message().c_str());
    return 1;
  }
  std::printf("plot: %s\n", svg_path.c_str());
  return 0;
}

}  // namespace zdp::launcher
