// check_input_paths (zdp/config.h): the files a dp-train run reads, checked before any rank
// starts. Every rank used to find a missing token file or resume checkpoint by itself,
// after the launch, each printing the same error.
#include <string>
#include <vector>

#include "runtime/internal/token_header.h"
#include "runtime/internal/token_paths.h"
#include "zdp/checkpoint.h"
#include "zdp/config.h"

namespace zdp {
namespace {

// "" when every file `path` names is a token file (its header read, as the ranks read it)
// of at least one sample, model.seq_len + 1 tokens, else why not. A file too short for
// one sample stopped every rank after the launch, each saying it.
std::string why_unusable(const std::string& path, int seq_len) {
  StatusOr<std::vector<std::string>> files = shard_files(path);
  if (!files.ok()) return files.status().message();
  for (const std::string& f : *files) {
    // The open refuses a missing, unreadable or non-regular file (a folder, a FIFO) by name.
    const StatusOr<int64_t> tokens = read_token_count(f);
    if (!tokens.ok()) return tokens.status().message();
    if (const Status one = check_holds_a_sample(f, *tokens, seq_len); !one.ok()) return one.message();
  }
  return "";
}

}  // namespace

Status check_input_paths(const Config& config) {
  std::vector<std::string> problems;
  const DataConfig& d = config.data;
  bool both_resolve = true;
  if (config.model.kind == ModelKind::kGpt && d.kind == DataKind::kTokens) {
    for (const char* key : {"data.path", "data.val_path"}) {
      const std::string& path = std::string(key) == "data.path" ? d.path : d.val_path;
      if (path.empty()) continue;
      const std::string why = why_unusable(path, config.model.seq_len);
      if (why.empty()) continue;
      both_resolve = false;
      problems.push_back(config.where(key) + ": " + key + " (\"" + path + "\"): " + why);
    }
    if (both_resolve) {
      const Status disjoint = check_disjoint_splits(d.path, d.val_path);
      if (!disjoint.ok()) problems.push_back(config.where("data.val_path") + ": data.val_path: " + disjoint.message());
    }
  }
  const CheckpointConfig& c = config.checkpoint;
  if (c.resume == ResumeMode::kPath) {
    const StatusOr<std::string> checkpoint = resolve_checkpoint(c.resume_path);
    if (!checkpoint.ok()) {
      problems.push_back(config.where("checkpoint.resume") + ": checkpoint.resume = \"" + c.resume_path +
                         "\": " + checkpoint.status().message());
    }
  }
  if (problems.empty()) return Status::Ok();
  std::string text;
  for (const std::string& p : problems) text += (text.empty() ? "" : "\n") + p;
  return Status(StatusCode::kNotFound, text);
}

}  // namespace zdp
