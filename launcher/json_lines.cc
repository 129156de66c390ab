// write_json_lines (json_lines.h).
#include "launcher/json_lines.h"

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

}  // namespace zdp::launcher
