// What dp-ckpt does (dp_ckpt.cc is only its command line): describe a checkpoint, verify
// it, and export its weights as one safetensors file in fp32, bf16 or fp16. Export
// streams: it converts a bounded buffer at a time, tensor by tensor, so it never holds
// the model (a 100 GB checkpoint exports on a machine with a few GB of memory).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "zdp/checkpoint.h"
#include "zdp/comm.h"  // DType
#include "zdp/status.h"

namespace zdp::ckpt_tool {

// "12.0 KiB", "3.4 GiB": bytes for people (1024-based).
std::string human_bytes(int64_t bytes);

// dp-ckpt info: the checkpoint (a step-<N> directory, or a root: its newest) as text: its
// path, step and data position, optimizer step and loss scale, world size, ZeRO stage,
// compute dtype and storage at save time, library version, the trainer's own fields
// (the stored config excepted), both files with their sizes and checksum chunks, and a
// table of the model's tensors: name, dtype, shape, bytes. Reads no tensor data.
StatusOr<std::string> describe(const std::string& path_or_root);

// dp-ckpt info --config: the config the checkpoint was saved with (dp-train stores it as
// TOML under "config" in its trainer state). kNotFound when the trainer stored none.
StatusOr<std::string> saved_config(const std::string& path_or_root);

// dp-ckpt verify: the text of a successful verify_checkpoint(); its error otherwise.
StatusOr<std::string> verify(const std::string& path_or_root);

struct ExportOptions {
  DType dtype = DType::kF32;          // of the exported tensors: fp32 | bf16 | fp16
  std::string out;                    // the safetensors file written (through a temporary file
                                      // beside it and a rename)
  int64_t buffer_elems = int64_t{1} << 20;  // elements converted per pass (at most the largest
                                            // tensor's): memory is 4 + 2 or 4 + 4 bytes each
  bool verify = true;                 // verify_checkpoint(kModel) first (one extra read of the model file)
  bool force = false;                 // replace `out` when it is an existing regular file
};

struct ExportReport {
  std::string source;          // the step-<N> directory exported
  std::string out;
  int64_t tensors = 0;
  int64_t elements = 0;
  int64_t bytes = 0;           // of the output file
  int64_t buffer_bytes = 0;    // the conversion buffers: all the tensor data this held at once
  // Finite fp32 values beyond the output dtype's range, written as infinity (fp16 above
  // 65504; bf16 only near fp32's own limit): as torch's .half() does, but said.
  int64_t overflowed = 0;
  std::vector<std::pair<std::string, int64_t>> overflowed_tensors;  // name, count
  // Temporary files of earlier exports of the same target whose process had died
  // (export_temp_file.h), removed before this one began.
  std::vector<std::string> removed_leftovers;
};

// dp-ckpt export: model.safetensors of the checkpoint, every tensor cast to options.dtype
// (round to nearest even: kernels/cast.h, the same function the engine uses), under the
// same names, in the same order, with the source's metadata plus "format": "pt" (what
// transformers' loaders expect). Refuses a source tensor that is not F32 and an output
// inside a checkpoint (this one or another, a symlink's target included), naming them. The output is never something the user did not
// ask to replace: an existing regular file only with `force`; a symlink is followed to the
// regular file it names (written through) or refused; a device, directory, FIFO or socket
// is refused.
// The file export_model() writes for `out`: `out` itself, or the regular file a symlink
// names. kInvalidArgument naming `out` for anything else that exists there, or for an
// existing regular file without `force`.
StatusOr<std::string> export_target(const std::string& out, bool force);
StatusOr<ExportReport> export_model(const std::string& path_or_root, const ExportOptions& options);

}  // namespace zdp::ckpt_tool
