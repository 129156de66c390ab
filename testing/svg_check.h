// Runs testing/check_svg.py on an SVG a test wrote: XML parse, series point counts, bar
// counts, reference lines, and a PNG rendered by rsvg-convert beside it. The checker's
// output comes back for the test's failure message.
#pragma once

#include <string>
#include <vector>

#include "testing/run_command.h"

namespace zdp::testing {

// `checks` are check_svg.py's options ("--series", "train loss=40", "--bars", "8"); the
// PNG goes to svg_path + ".png". Needs ZDP_SOURCE_DIR (the checker's location).
inline CommandRun check_svg(const std::string& source_dir, const std::string& svg_path,
                            const std::vector<std::string>& checks) {
  std::string cmd = "python3 " + source_dir + "/testing/check_svg.py '" + svg_path + "' --png '" + svg_path + ".png'";
  for (const std::string& c : checks) cmd += " '" + c + "'";
  return run_command(cmd);
}

}  // namespace zdp::testing
