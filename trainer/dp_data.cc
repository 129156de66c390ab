// dp-data: makes and inspects token files (llm.c's .bin format, trainer/data/token_file.h).
//   dp-data text --out DIR [--val-fraction 0.1] FILE...   byte-level shards DIR/train.bin, DIR/val.bin
//   dp-data synthetic --out FILE --tokens N [--vocab 256] [--seed 1]   a Markov-chain shard
//   dp-data info FILE...                                   header, token count, largest token
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/internal/cli_parse.h"
#include "core/internal/cli_range.h"
#include "core/internal/input_file.h"
#include "core/internal/output_file.h"
#include "trainer/data/mapped_file_faults.h"
#include "trainer/data/source.h"
#include "trainer/data/token_file.h"

namespace {

using zdp::Status;
using zdp::StatusCode;
namespace trainer = zdp::trainer;

// A file dp-data names itself inside --out (train.bin, val.bin): written there, never
// through a link planted at its name (which would replace any file the user can write).
Status own_output(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_symlink(std::filesystem::symlink_status(path, ec))) {
    return Status(StatusCode::kInvalidArgument, "dp-data: " + path +
                                                    " is a symbolic link: dp-data writes its own files in --out, "
                                                    "never through a link (remove it)");
  }
  return zdp::output_target(path, "token file").status();  // a folder, device or FIFO there: refused
}

// Each text file is split at (1 - val_fraction) of its bytes, so the held-out tokens come
// from every file (every topic of a corpus of many files), not from the last file alone.
Status make_text_shards(const std::vector<std::string>& files, const std::string& out_dir, double val_fraction) {
  // Every file is opened (and refused if it is a directory, a FIFO, a device or too large)
  // before anything is read, and the total is checked against the format's int32 count
  // before a byte is allocated. Each is closed again at once: a corpus of more files than
  // the descriptor limit (ulimit -n, often 1024) must not fail with "Too many open files".
  constexpr int64_t kMaxTextBytes = int64_t{1} << 30;
  int64_t total = 0;
  for (const std::string& path : files) {
    zdp::StatusOr<zdp::InputFile> in = zdp::InputFile::open(path, "text file", kMaxTextBytes);
    if (!in.ok()) return in.status();
    total += in->size();
  }
  auto too_many = [&](int64_t bytes) {
    return Status(StatusCode::kInvalidArgument,
                  std::to_string(files.size()) + " text files hold " + std::to_string(bytes) +
                      " bytes, more than the " + std::to_string(INT32_MAX) +
                      " tokens one token file can count; split them over several dp-data runs");
  };
  if (total > INT32_MAX) return too_many(total);
  std::vector<uint16_t> train, val;
  int64_t read = 0;
  for (const std::string& path : files) {
    // Opened again (each is checked again; one that grew since is counted as it is now).
    zdp::StatusOr<std::string> text = zdp::read_input_file(path, "text file", kMaxTextBytes);
    if (!text.ok()) return text.status();
    read += static_cast<int64_t>(text->size());
    if (read > INT32_MAX) return too_many(read);
    const std::vector<uint16_t> tokens = trainer::byte_tokens(*text);
    const size_t cut = tokens.size() - static_cast<size_t>(static_cast<double>(tokens.size()) * val_fraction);
    train.insert(train.end(), tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(cut));
    val.insert(val.end(), tokens.begin() + static_cast<std::ptrdiff_t>(cut), tokens.end());
  }
  // Refused before --out is made: an empty input left a new empty folder behind.
  if (train.empty()) {
    return Status(StatusCode::kInvalidArgument, "dp-data: no training tokens left after --val-fraction " +
                                                    std::to_string(val_fraction) + " of " + std::to_string(read) +
                                                    " bytes");
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return Status(StatusCode::kIoError, "dp-data: cannot create '" + out_dir + "': " + ec.message());
  // Both outputs checked before either is written: a folder at val.bin's path left a new
  // train.bin beside the old val.bin (two corpora's halves).
  const std::string train_path = out_dir + "/train.bin", val_path = out_dir + "/val.bin";
  ZDP_RETURN_IF_ERROR(own_output(train_path));
  if (!val.empty()) ZDP_RETURN_IF_ERROR(own_output(val_path));
  // Both written and synced before either is renamed into place: a failure writing val.bin
  // (a full disk) left the new train.bin beside the old corpus's val.bin, which dp-train
  // takes as one corpus.
  ZDP_ASSIGN_OR_RETURN(const std::string train_staged, trainer::stage_token_file(train_path, train));
  std::string val_staged;
  if (!val.empty()) {
    zdp::StatusOr<std::string> staged = trainer::stage_token_file(val_path, val);
    if (!staged.ok()) {
      zdp::discard_staged(train_staged);
      return staged.status();
    }
    val_staged = *staged;
  }
  // With no held-out half, an older run's val.bin there is another corpus's: removed
  // before the new train.bin goes in (a removal that fails leaves the old pair whole).
  // An empty token file is one llm.c's loader asserts on and dp-train refuses: none.
  bool stale = false;
  if (val.empty()) {
    std::filesystem::path old(val_path);
    const std::filesystem::file_status st = std::filesystem::symlink_status(old, ec);
    stale = std::filesystem::is_regular_file(st) || std::filesystem::is_symlink(st);  // a link: removed, not its target
    if (stale && !std::filesystem::remove(old, ec)) {
      zdp::discard_staged(train_staged);
      return Status(StatusCode::kIoError, "dp-data: cannot remove the old " + val_path + " (" + ec.message() +
                                              "): it is not this corpus's held-out half");
    }
  }
  // The renames: what is left between them is a rename in one folder failing (the window
  // a pair of files cannot close without a folder swap).
  if (zdp::Status s = zdp::commit_staged(train_staged, train_path, "token file"); !s.ok()) {
    if (!val_staged.empty()) zdp::discard_staged(val_staged);
    return s;
  }
  if (val.empty()) {
    std::printf("dp-data: %zu files -> %s/train.bin (%zu tokens), no held-out tokens (--val-fraction %g): no "
                "val.bin written%s; byte-level, vocab 256\n",
                files.size(), out_dir.c_str(), train.size(), val_fraction, stale ? " (the old one removed)" : "");
    return Status::Ok();
  }
  ZDP_RETURN_IF_ERROR(zdp::commit_staged(val_staged, val_path, "token file"));
  std::printf("dp-data: %zu files -> %s/train.bin (%zu tokens), %s/val.bin (%zu tokens); byte-level, vocab 256\n",
              files.size(), out_dir.c_str(), train.size(), out_dir.c_str(), val.size());
  return Status::Ok();
}

Status print_info(const std::string& path) {
  trainer::report_mapped_file_faults("dp-data");  // it reads every token of the mapped file
  zdp::StatusOr<trainer::TokenFile> f = trainer::TokenFile::open(path);
  if (!f.ok()) return f.status();
  if (f->size() == 0) {
    return Status(StatusCode::kInvalidArgument, "token file '" + path + "': 0 tokens (llm.c's loader and dp-train "
                                                "refuse an empty file)");
  }
  const uint16_t* t = f->tokens();
  const uint16_t largest = f->size() > 0 ? *std::max_element(t, t + f->size()) : 0;
  std::printf("%s: llm.c token file v%d, %lld tokens, largest token %u\n", path.c_str(), zdp::kTokenFileVersion,
              static_cast<long long>(f->size()), largest);
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dp-data: make and inspect token files (llm.c .bin format: 256 int32 header + uint16 tokens)"};
  app.require_subcommand(1);

  std::vector<std::string> text_files;
  std::string out_dir;
  double val_fraction = 0.1;
  CLI::App* text = app.add_subcommand("text", "byte-level tokens of text files -> OUT/train.bin and OUT/val.bin");
  text->add_option("files", text_files, "text files")->required()->check(CLI::ExistingFile);
  text->add_option("--out", out_dir, "output directory")->required()->check(zdp::non_empty());
  text->add_option("--val-fraction", val_fraction, "held-out fraction of each file (its tail)")
      ->check(zdp::finite_range(0.0, 0.9))
      ->capture_default_str();

  std::string synth_out;
  int64_t synth_tokens = 0;
  int vocab = 256;
  int64_t seed = 1;  // train.seed's range: -1 and 2^64 saturated to the same chain
  CLI::App* synth = app.add_subcommand("synthetic", "a token file from a seeded Markov chain (4 successors per token)");
  synth->add_option("--out", synth_out, "output file")->required()->check(zdp::non_empty());
  // The format counts tokens in an int32: a larger count is refused before anything is allocated.
  synth->add_option("--tokens", synth_tokens, "token count (at most 2147483647, the format's int32 count)")
      ->required()
      ->check(zdp::integer_range(1, INT32_MAX));
  synth->add_option("--vocab", vocab, "vocabulary size")->check(zdp::integer_range(1, 65536))->capture_default_str();
  synth->add_option("--seed", seed, "seed of the chain")
      ->check(zdp::integer_range(0, INT64_MAX))
      ->capture_default_str();

  std::vector<std::string> info_files;
  CLI::App* info = app.add_subcommand("info", "print the header and token statistics of token files");
  info->add_option("files", info_files, "token files")->required();

  ZDP_CLI_PARSE(app, argc, argv);
  Status s;
  if (text->parsed()) {
    s = make_text_shards(text_files, out_dir, val_fraction);
  } else if (synth->parsed()) {
    s = trainer::write_token_file(synth_out, trainer::markov_tokens(synth_tokens, vocab, static_cast<uint64_t>(seed)));
    if (s.ok()) std::printf("dp-data: %s (%lld synthetic tokens, vocab %d)\n", synth_out.c_str(),
                            static_cast<long long>(synth_tokens), vocab);
  } else {
    // Every file is described or its problem said, as ls does; the exit code says whether
    // any failed (it stopped at the first bad one, and the others went unread).
    bool all_ok = true;
    for (const std::string& f : info_files) {
      const Status one = print_info(f);
      if (!one.ok()) std::fprintf(stderr, "dp-data: %s\n", one.to_string().c_str());
      all_ok = all_ok && one.ok();
    }
    return all_ok ? 0 : 1;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "dp-data: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
