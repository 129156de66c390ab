// The token files a data path names (runtime/internal/token_paths.h).
#include "runtime/internal/token_paths.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace zdp {

namespace {

// glob()'s error callback has no context argument: the first folder it could not read.
thread_local std::string glob_failed_dir;
thread_local int glob_failed_errno = 0;

int note_glob_error(const char* dir, int err) {
  if (glob_failed_dir.empty()) glob_failed_dir = dir, glob_failed_errno = err;
  return 1;  // stop: a folder of the pattern that cannot be read is an error, not "no match"
}

}  // namespace

bool is_shard_pattern(const std::string& path) { return path.find_first_of("*?[") != std::string::npos; }

StatusOr<std::vector<std::string>> match_shards(const std::string& pattern) {
  glob_t found{};
  glob_failed_dir.clear();
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, note_glob_error, &found);
  std::vector<std::string> paths;
  if (rc == 0) {
    for (size_t i = 0; i < found.gl_pathc && paths.size() <= kMaxTokenShards; ++i) paths.emplace_back(found.gl_pathv[i]);
  }
  const size_t matched = rc == 0 ? found.gl_pathc : 0;
  ::globfree(&found);
  if (rc == GLOB_NOMATCH) {
    return Status(StatusCode::kNotFound, "token files '" + pattern +
                                             "': no file matches the pattern (* ? [ are pattern characters: "
                                             "write \\[ for a literal '[')");
  }
  if (rc == GLOB_NOSPACE) return Status(StatusCode::kOutOfMemory, "token files '" + pattern + "': out of memory matching the pattern");
  if (rc != 0) {
    return Status(glob_failed_errno == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                  "token files '" + pattern + "': cannot read the folder '" + glob_failed_dir +
                      "': " + std::strerror(glob_failed_errno));
  }
  if (matched > kMaxTokenShards) {
    return Status(StatusCode::kInvalidArgument, "token files '" + pattern + "': the pattern matches " +
                                                    std::to_string(matched) + " files, more than " +
                                                    std::to_string(kMaxTokenShards) + " shards");
  }
  std::sort(paths.begin(), paths.end());  // glob sorts by the locale's collation; the name's bytes decide here
  return paths;
}

StatusOr<std::vector<std::string>> shard_files(const std::string& path) {
  struct stat st {};
  if (!is_shard_pattern(path) || ::stat(path.c_str(), &st) == 0) return std::vector<std::string>{path};
  return match_shards(path);
}

Status check_disjoint_splits(const std::string& train, const std::string& val) {
  if (train.empty() || val.empty()) return Status::Ok();
  ZDP_ASSIGN_OR_RETURN(const std::vector<std::string> train_files, shard_files(train));
  ZDP_ASSIGN_OR_RETURN(const std::vector<std::string> val_files, shard_files(val));
  std::vector<std::pair<std::pair<dev_t, ino_t>, const std::string*>> ids;
  ids.reserve(train_files.size());
  for (const std::string& f : train_files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) == 0) ids.push_back({{st.st_dev, st.st_ino}, &f});
  }
  std::sort(ids.begin(), ids.end());
  for (const std::string& f : val_files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) continue;  // opening it names the error
    const auto it = std::lower_bound(ids.begin(), ids.end(), std::make_pair(std::make_pair(st.st_dev, st.st_ino),
                                                                            static_cast<const std::string*>(nullptr)));
    if (it != ids.end() && it->first == std::make_pair(st.st_dev, st.st_ino)) {
      return Status(StatusCode::kInvalidArgument,
                    "the held-out file '" + f + "' is also a training file ('" + *it->second + "' of '" + train +
                        "'): the held-out loss would measure data the model trains on");
    }
  }
  return Status::Ok();
}

}  // namespace zdp
