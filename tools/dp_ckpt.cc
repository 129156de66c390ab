// dp-ckpt: inspect, verify and export zdp checkpoints (zdp/checkpoint.h) without an engine,
// a GPU or the job's world size. The work is in ckpt_tool.h; this file is the command line.
//   dp-ckpt info DIR [--config]      the tensors and the saved state (or the config used)
//   dp-ckpt verify DIR               every checksum and value; exit 1 naming the bad file and chunk or tensor
//   dp-ckpt export DIR --dtype bf16 --out model.safetensors
// DIR is a step-<N> directory or a checkpoint root (the checkpoint its `latest` names).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <string>

#include "core/internal/cli_parse.h"
#include "core/internal/cli_range.h"
#include "tools/ckpt_tool.h"

namespace {

int fail(const zdp::Status& status) {
  std::fprintf(stderr, "dp-ckpt: %s\n", status.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dp-ckpt: inspect, verify and export zdp checkpoints (a step-<N> directory, or a checkpoint "
               "directory: the checkpoint its `latest` file names)"};
  app.require_subcommand(1);

  std::string path;
  bool show_config = false;
  CLI::App* info = app.add_subcommand("info", "the saved state and a table of the tensors (name, dtype, shape, bytes)");
  info->add_option("checkpoint", path, "step-<N> directory or checkpoint root")->required();
  info->add_flag("--config", show_config, "print the config the checkpoint was saved with (TOML) instead");

  CLI::App* verify = app.add_subcommand(
      "verify", "recompute every checksum and check every value (finite; second moments not negative); exit 1 naming "
                "the first bad file and chunk or tensor");
  verify->add_option("checkpoint", path, "step-<N> directory or checkpoint root")->required();

  zdp::ckpt_tool::ExportOptions ex;
  bool no_verify = false;
  const std::map<std::string, zdp::DType> dtypes = {
      {"fp32", zdp::DType::kF32}, {"bf16", zdp::DType::kBF16}, {"fp16", zdp::DType::kF16}};
  std::string dtype_word = "fp32";
  CLI::App* exp = app.add_subcommand(
      "export", "write the weights as one safetensors file in fp32, bf16 or fp16, streaming with bounded memory");
  exp->add_option("checkpoint", path, "step-<N> directory or checkpoint root")->required();
  exp->add_option("--dtype", dtype_word, "dtype of the exported tensors: fp32, bf16 or fp16 (round to nearest even)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  exp->add_option("--out", ex.out, "the safetensors file to write (a new file; see --force)")
      ->required()
      ->check(zdp::non_empty());
  exp->add_flag("--force", ex.force, "replace --out when it is an existing regular file");
  exp->add_option("--buffer-elems", ex.buffer_elems, "elements converted per pass (memory: 4 bytes each read, plus 2 or 4 written: 6 for bf16/fp16, 8 for fp32)")
      ->check(zdp::integer_range(1, int64_t{1} << 32))
      ->capture_default_str();
  exp->add_flag("--no-verify", no_verify, "skip checking the model file's checksums and values first");

  ZDP_CLI_PARSE(app, argc, argv);

  if (info->parsed()) {
    zdp::StatusOr<std::string> text =
        show_config ? zdp::ckpt_tool::saved_config(path) : zdp::ckpt_tool::describe(path);
    if (!text.ok()) return fail(text.status());
    std::fputs(text->c_str(), stdout);
    return 0;
  }
  if (verify->parsed()) {
    zdp::StatusOr<std::string> text = zdp::ckpt_tool::verify(path);
    if (!text.ok()) return fail(text.status());
    std::printf("%s\n", text->c_str());
    return 0;
  }
  ex.verify = !no_verify;
  ex.dtype = dtypes.at(dtype_word);
  zdp::StatusOr<zdp::ckpt_tool::ExportReport> r = zdp::ckpt_tool::export_model(path, ex);
  if (!r.ok()) return fail(r.status());
  for (const std::string& leftover : r->removed_leftovers) {
    std::fprintf(stderr, "dp-ckpt: removed %s, left by an export that was killed\n", leftover.c_str());
  }
  std::printf("exported %lld tensors (%lld elements) of %s as %s to %s (%s; buffers %s)\n",
              static_cast<long long>(r->tensors), static_cast<long long>(r->elements), r->source.c_str(),
              zdp::to_string(ex.dtype), r->out.c_str(), zdp::ckpt_tool::human_bytes(r->bytes).c_str(),
              zdp::ckpt_tool::human_bytes(r->buffer_bytes).c_str());
  if (r->overflowed > 0) {
    std::fprintf(stderr, "dp-ckpt: warning: %lld finite values are beyond %s's range and were written as infinity:",
                 static_cast<long long>(r->overflowed), zdp::to_string(ex.dtype));
    for (size_t i = 0; i < r->overflowed_tensors.size() && i < 10; ++i) {
      std::fprintf(stderr, "%s %s (%lld)", i == 0 ? "" : ",", r->overflowed_tensors[i].first.c_str(),
                   static_cast<long long>(r->overflowed_tensors[i].second));
    }
    std::fprintf(stderr, "%s; export as %s to keep them\n", r->overflowed_tensors.size() > 10 ? ", ..." : "",
                 ex.dtype == zdp::DType::kF16 ? "bf16 or fp32" : "fp32");
  }
  return 0;
}
