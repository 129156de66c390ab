// The tree keeps the architecture it shows (README "Layout"): every quoted #include
// resolves to a file of the tree, a library includes only its own and lower layers, no
// folder reaches into another folder's private src/, examples/ use only the public zdp/
// headers, bench/ no src/ header; and no source file is over 450 lines. Each check lists
// every violation as "file:line: includes X: why", and is itself tested on a fake tree.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "testing/temp_dir.h"

namespace zdp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The libraries, lowest layer first; libraries that share a layer (kernels and plot;
// launcher and tools) may not include each other.
const std::map<std::string, int> kLayers = {{"core", 0},    {"kernels", 1}, {"plot", 1},    {"optim", 2},
                                            {"runtime", 3}, {"engine", 4},  {"profile", 5}, {"trainer", 6},
                                            {"planner", 7}, {"launcher", 8}, {"tools", 8}};
const std::vector<std::string> kSourceFolders = {"core",     "kernels", "plot",    "optim",   "runtime",
                                                 "engine",   "profile", "trainer", "planner", "launcher",
                                                 "tools",    "testing", "bench",   "tests",   "examples"};
constexpr int kMaxLines = 450;

bool is_library(const std::string& folder) { return kLayers.count(folder) > 0; }

std::string layer_name(const std::string& library) {
  return library + " (layer " + std::to_string(kLayers.at(library)) + ")";
}

// Files under the source folders of `root` whose extension is one of `extensions`, as
// paths relative to `root` ("kernels/adamw.h"); build*/ and hidden folders are skipped.
std::vector<std::string> source_files(const fs::path& root, const std::vector<std::string>& extensions) {
  std::vector<std::string> files;
  for (const std::string& folder : kSourceFolders) {
    if (!fs::is_directory(root / folder)) continue;
    for (auto it = fs::recursive_directory_iterator(root / folder); it != fs::recursive_directory_iterator(); ++it) {
      const std::string name = it->path().filename().string();
      if (it->is_directory()) {
        if (name.rfind("build", 0) == 0 || name.rfind('.', 0) == 0) it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file()) continue;
      for (const std::string& ext : extensions) {
        if (it->path().extension() == ext) files.push_back(fs::relative(it->path(), root).generic_string());
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// `line` as `#include "x"` -> x; "" for anything else (system includes, comments, code).
std::string quoted_include(const std::string& line) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line[i] != '#') return "";
  i = line.find_first_not_of(" \t", i + 1);
  if (i == std::string::npos || line.compare(i, 7, "include") != 0) return "";
  i = line.find_first_not_of(" \t", i + 7);
  if (i == std::string::npos || line[i] != '"') return "";
  const size_t end = line.find('"', i + 1);
  return end == std::string::npos ? "" : line.substr(i + 1, end - i - 1);
}

// Where an include points: the folder it belongs to, whether it is a public zdp/ header,
// whether it is a private <folder>/src/ header; or `error` when it names no file of the tree.
struct Target {
  std::string folder;
  bool is_public = false;
  bool is_src = false;
  std::string error;
};

// "zdp/x.h" is the library whose <lib>/include/zdp/x.h exists (or x.h.in: generated, like
// build_config.h); anything else is written from the repository root.
Target resolve(const fs::path& root, const std::string& include) {
  Target t;
  if (include.rfind("zdp/", 0) == 0) {
    t.is_public = true;
    std::vector<std::string> owners;
    for (const auto& [library, layer] : kLayers) {
      const fs::path header = root / library / "include" / include;
      if (fs::is_regular_file(header) || fs::is_regular_file(header.string() + ".in")) owners.push_back(library);
    }
    if (owners.empty()) t.error = "no <library>/include/" + include + " in the tree";
    if (owners.size() > 1) t.error = "public header in both " + owners[0] + "/include and " + owners[1] + "/include";
    if (!owners.empty()) t.folder = owners[0];
    return t;
  }
  if (!fs::is_regular_file(root / include)) {
    t.error = "no such file in the tree (a non-public include is written from the repository root)";
    return t;
  }
  const size_t slash = include.find('/');
  t.folder = include.substr(0, slash);
  t.is_src = slash != std::string::npos && include.compare(slash, 5, "/src/") == 0;
  if (std::find(kSourceFolders.begin(), kSourceFolders.end(), t.folder) == kSourceFolders.end()) {
    t.error = t.folder + "/ is not a source folder";
  }
  return t;
}

// Why `folder` may not include `t` ("" when it may).
std::string rule_broken(const std::string& folder, const Target& t) {
  if (folder == "tests") return "";  // tests may include anything, src/ headers of the unit they test included
  if (t.is_src && t.folder != folder) return t.folder + "/src/ is private to " + t.folder + " (and its tests)";
  if (folder == "examples") return t.is_public ? "" : "examples/ may include only public zdp/ headers";
  if (folder == "bench") {
    if (t.is_src) return "bench/ may not include src/ headers";
    if (t.folder == "tests" || t.folder == "examples") return "bench/ may not include " + t.folder + "/";
    return "";
  }
  if (folder == "testing") {
    return is_library(t.folder) || t.folder == "testing" ? "" : "testing/ may not include " + t.folder + "/";
  }
  if (!is_library(folder) || t.folder == folder) return "";
  if (!is_library(t.folder)) return "library " + folder + " may not include " + t.folder + "/";
  if (kLayers.at(t.folder) > kLayers.at(folder)) {
    return layer_name(folder) + " may not include the higher layer " + layer_name(t.folder);
  }
  if (kLayers.at(t.folder) == kLayers.at(folder)) return folder + " and " + t.folder + " may not include each other";
  return "";
}

struct Scan {
  int files = 0;
  int includes = 0;
  std::vector<std::string> violations;
};

// Checks every quoted include of every C++/CUDA source file under `root`.
Scan check_includes(const fs::path& root) {
  Scan scan;
  for (const std::string& file : source_files(root, {".h", ".cc", ".cu", ".cuh"})) {
    ++scan.files;
    const std::string folder = file.substr(0, file.find('/'));
    std::ifstream in(root / file);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      const std::string include = quoted_include(line);
      if (include.empty()) continue;
      ++scan.includes;
      const Target t = resolve(root, include);
      const std::string why = t.error.empty() ? rule_broken(folder, t) : t.error;
      if (!why.empty()) {
        scan.violations.push_back(file + ":" + std::to_string(number) + ": includes \"" + include + "\": " + why);
      }
    }
  }
  return scan;
}

// "path: N lines" for every source file (C++, CUDA, Python, shell) over `max_lines`.
std::vector<std::string> check_line_counts(const fs::path& root, int max_lines) {
  std::vector<std::string> offenders;
  for (const std::string& file : source_files(root, {".h", ".cc", ".cu", ".cuh", ".py", ".sh"})) {
    std::ifstream in(root / file, std::ios::binary);
    const auto lines = std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n');
    if (lines > max_lines) offenders.push_back(file + ": " + std::to_string(lines) + " lines");
  }
  return offenders;
}

std::string listing(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += "  " + line + "\n";
  return text;
}

// ---- the source tree -------------------------------------------------------------------

TEST(Layering, EveryIncludeResolvesAndRespectsTheLayers) {
  const Scan scan = check_includes(ZDP_SOURCE_DIR);
  // Guards against passing on an empty or wrong tree.
  EXPECT_GT(scan.files, 200) << "scanned too few files under " << ZDP_SOURCE_DIR;
  EXPECT_GT(scan.includes, 500) << "scanned too few includes under " << ZDP_SOURCE_DIR;
  EXPECT_TRUE(scan.violations.empty()) << scan.violations.size() << " include(s) break the layering:\n"
                                       << listing(scan.violations);
}

TEST(Layering, NoSourceFileIsOverTheLineLimit) {
  const std::vector<std::string> offenders = check_line_counts(ZDP_SOURCE_DIR, kMaxLines);
  EXPECT_TRUE(offenders.empty()) << offenders.size() << " source file(s) over " << kMaxLines << " lines:\n"
                                 << listing(offenders);
}

// ---- the checks themselves, on a fake tree -------------------------------------------------

void write(const fs::path& root, const std::string& file, const std::string& text) {
  fs::create_directories((root / file).parent_path());
  std::ofstream(root / file) << text;
}

// A fake tree with one public header per layer that matters and a private runtime header.
class LayeringCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    write(root(), "core/include/zdp/status.h", "#pragma once\n");
    write(root(), "core/include/zdp/build_config.h.in", "#define ZDP_HAVE_CUDA @ZDP_HAVE_CUDA@\n");
    write(root(), "kernels/adamw.h", "#pragma once\n#include \"zdp/status.h\"\n");
    write(root(), "runtime/include/zdp/store.h", "#pragma once\n#include \"zdp/status.h\"\n");
    write(root(), "runtime/src/store/tcp_store_protocol.h", "#pragma once\n#include \"zdp/store.h\"\n");
    write(root(), "engine/include/zdp/engine.h", "#pragma once\n#include \"kernels/adamw.h\"\n");
    write(root(), "tools/dp_check.cc", "#include \"zdp/engine.h\"\n");
  }
  fs::path root() const { return dir_.path(); }
  std::vector<std::string> violations() const { return check_includes(root()).violations; }

 private:
  testing::TempDir dir_;
};

TEST_F(LayeringCheck, ACleanTreeHasNoViolations) {
  write(root(), "runtime/src/store/tcp_store.cc",
        "#include \"runtime/src/store/tcp_store_protocol.h\"\n#include \"zdp/build_config.h\"\n");
  write(root(), "tests/unit/tcp_store_protocol_test.cc", "#include \"runtime/src/store/tcp_store_protocol.h\"\n");
  write(root(), "examples/embed/main.cc", "#include <vector>\n#include \"zdp/engine.h\"\n");
  write(root(), "examples/embed/build/gen.cc", "#include \"engine/src/missing.h\"\n");  // build*/ is skipped
  const Scan scan = check_includes(root());
  EXPECT_EQ(scan.files, 9);
  EXPECT_EQ(scan.includes, 9);
  EXPECT_TRUE(scan.violations.empty()) << listing(scan.violations);
}

TEST_F(LayeringCheck, AHigherLayerAndAnotherFoldersSrcAreReportedWithFileAndLine) {
  write(root(), "kernels/fold.cc", "// fold\n#include \"kernels/adamw.h\"\n#include \"zdp/engine.h\"\n");
  write(root(), "engine/src/grads.cc", "#include \"runtime/src/store/tcp_store_protocol.h\"\n");
  // In file order.
  EXPECT_EQ(violations(),
            (std::vector<std::string>{"engine/src/grads.cc:1: includes \"runtime/src/store/tcp_store_protocol.h\": "
                                      "runtime/src/ is private to runtime (and its tests)",
                                      "kernels/fold.cc:3: includes \"zdp/engine.h\": kernels (layer 1) may not "
                                      "include the higher layer engine (layer 4)"}));
}

TEST_F(LayeringCheck, EveryRuleIsReported) {
  write(root(), "launcher/spawn.cc", "#include \"tools/dp_check.cc\"\n");
  write(root(), "optim/adamw.cc", "#include \"testing/temp_dir.h\"\n");
  write(root(), "testing/temp_dir.h", "#pragma once\n");
  write(root(), "examples/embed/main.cc", "#include \"kernels/adamw.h\"\n");
  write(root(), "bench/store_bench.cc", "#include \"runtime/src/store/tcp_store_protocol.h\"\n");
  write(root(), "core/src/log.cc", "#include \"core/src/gone.h\"\n#include \"zdp/gone.h\"\n#include \"log.h\"\n");
  const std::vector<std::string> found = violations();
  EXPECT_EQ(found.size(), 7u) << listing(found);
  const std::string text = listing(found);
  EXPECT_THAT(text, HasSubstr("launcher/spawn.cc:1: includes \"tools/dp_check.cc\": launcher and tools may not"));
  EXPECT_THAT(text, HasSubstr("optim/adamw.cc:1: includes \"testing/temp_dir.h\": library optim may not include"));
  EXPECT_THAT(text, HasSubstr("examples/embed/main.cc:1: includes \"kernels/adamw.h\": examples/ may include only"));
  EXPECT_THAT(text, HasSubstr("bench/store_bench.cc:1: includes \"runtime/src/store/tcp_store_protocol.h\": "
                              "runtime/src/ is private"));
  EXPECT_THAT(text, HasSubstr("core/src/log.cc:1: includes \"core/src/gone.h\": no such file in the tree"));
  EXPECT_THAT(text, HasSubstr("core/src/log.cc:2: includes \"zdp/gone.h\": no <library>/include/zdp/gone.h"));
  EXPECT_THAT(text, HasSubstr("core/src/log.cc:3: includes \"log.h\": no such file in the tree"));
}

TEST_F(LayeringCheck, EveryFileOverTheLimitIsNamedWithItsLineCount) {
  const auto lines = [](int n) { return std::string(static_cast<size_t>(n), '\n'); };
  write(root(), "runtime/src/comm/comm.cc", lines(kMaxLines));
  write(root(), "runtime/src/comm/comm_gloo.cc", lines(kMaxLines + 1));
  write(root(), "scripts/long.sh", lines(kMaxLines + 5));  // not a source folder
  write(root(), "tests/unit/store_test.cc", lines(686));
  write(root(), "tools/plot.py", lines(500));
  write(root(), "tools/notes.md", lines(500));  // not source
  EXPECT_EQ(check_line_counts(root(), kMaxLines),
            (std::vector<std::string>{"runtime/src/comm/comm_gloo.cc: 451 lines", "tests/unit/store_test.cc: 686 lines",
                                      "tools/plot.py: 500 lines"}));
}

}  // namespace
}  // namespace zdp
