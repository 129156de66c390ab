// verify_checkpoint(): recomputes every checksum of a checkpoint (dp-ckpt verify).
#include "zdp/checkpoint.h"

#include "core/internal/printable.h"
#include "runtime/internal/checkpoint_hash.h"
#include "runtime/internal/checkpoint_values.h"
#include "zdp/dtype.h"

#include <vector>

namespace zdp {
namespace {

// The optimizer file holds, for exactly the model file's tensors and with their shapes,
// one of the state sets zdp writes (checkpoint.h): "<name>.exp_avg" and
// "<name>.exp_avg_sq" (AdamW), "<name>.momentum_buffer" (SGD with momentum), or nothing
// (SGD without momentum).
Status check_optimizer_names(const safetensors::Reader& model, const safetensors::Reader& optimizer) {
  const auto& tensors = optimizer.header().tensors;
  const size_t params = model.header().tensors.size();
  std::vector<const char*> suffixes;
  if (params > 0 && tensors.size() == 2 * params) {
    suffixes = {kExpAvgSuffix, kExpAvgSqSuffix};
  } else if (params > 0 && tensors.size() == params) {
    suffixes = {kMomentumBufferSuffix};
  } else if (!tensors.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  optimizer.path() + ": " + std::to_string(tensors.size()) + " tensors, expected 2 (adamw), 1 (sgd " +
                      "with momentum) or 0 (sgd) per tensor of " + model.path() + " (" + std::to_string(params) + ")");
  }
  for (const safetensors::TensorInfo& t : model.header().tensors) {
    for (const char* suffix : suffixes) {
      const int i = optimizer.find(t.name + suffix);
      if (i < 0) {
        return Status(StatusCode::kInvalidArgument, optimizer.path() + ": no tensor '" + printable(t.name + suffix) +
                                                        "' for the model's '" + printable(t.name) + "'");
      }
      const safetensors::TensorInfo& state = tensors[static_cast<size_t>(i)];
      if (state.dtype != "F32") {
        return Status(StatusCode::kInvalidArgument, optimizer.path() + ": tensor '" + printable(state.name) + "' is " +
                                                        printable(state.dtype) + ", a checkpoint holds F32");
      }
      if (state.shape != t.shape) {
        // Which file is wrong is not known from the two alone; the caller has checked the
        // model file against state.json first.
        return Status(StatusCode::kInvalidArgument,
                      optimizer.path() + ": tensor '" + printable(state.name) + "' is " + format_shape(state.shape) +
                          " but " + model.path() + "'s '" + printable(t.name) + "' is " + format_shape(t.shape) +
                          ": the files disagree (one was altered)");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<VerifyReport> verify_checkpoint(const std::string& path_or_root, VerifyScope scope) {
  ZDP_ASSIGN_OR_RETURN(const CheckpointInfo info, read_checkpoint_info(path_or_root));
  VerifyReport report;
  report.path = info.state.path;
  std::vector<safetensors::Reader> readers;
  std::vector<char> buffer;
  std::vector<CheckpointFileInfo> files;
  for (const CheckpointFileInfo& entry : info.files) {
    if (scope == VerifyScope::kAll || entry.name == kCheckpointModelFile) files.push_back(entry);
  }
  for (const CheckpointFileInfo& entry : files) {
    const std::string path = report.path + "/" + entry.name;
    StatusOr<safetensors::Reader> opened = safetensors::Reader::open(path);
    if (opened.status().code() == StatusCode::kNotFound) {
      return Status(StatusCode::kNotFound, path + " is missing (state.json lists it)");
    }
    ZDP_RETURN_IF_ERROR(opened.status());
    const safetensors::Reader& file = readers.emplace_back(std::move(*opened));
    if (file.file_bytes() != entry.bytes || file.data_start() != entry.header_bytes) {
      return Status(StatusCode::kIoError, path + ": " + std::to_string(file.file_bytes()) + " bytes with a " +
                                              std::to_string(file.data_start()) + "-byte header, state.json says " +
                                              std::to_string(entry.bytes) + " and " +
                                              std::to_string(entry.header_bytes));
    }
    ZDP_ASSIGN_OR_RETURN(const std::string head, file.read_header_bytes());
    const uint64_t h = checkpoint::hash_bytes(head.data(), head.size());
    if (h != entry.header_hash) {
      return Status(StatusCode::kIoError, path + ": the header has checksum " + checkpoint::hash_hex(h) +
                                              ", state.json says " + checkpoint::hash_hex(entry.header_hash));
    }
    // Each intact chunk's values too, as a load checks them: a diverged run's checkpoint
    // (NaN, infinity, a negative second moment) passed verify and failed every resume.
    checkpoint::FileValueCheck values(file);
    for (size_t c = 0; c < entry.chunk_hashes.size(); ++c) {
      ZDP_ASSIGN_OR_RETURN(const uint64_t got,
                           checkpoint::hash_chunk(file, static_cast<int64_t>(c), entry.chunk_bytes, buffer));
      const checkpoint::ChunkRange r =
          checkpoint::chunk_range(static_cast<int64_t>(c), file.header().data_bytes(), entry.chunk_bytes);
      if (got != entry.chunk_hashes[c]) {
        return Status(StatusCode::kIoError,
                      checkpoint::mismatch_message(path, static_cast<int64_t>(c), r, got, entry.chunk_hashes[c]));
      }
      if (scope == VerifyScope::kAll || entry.name == kCheckpointModelFile) {
        ZDP_RETURN_IF_ERROR(values.feed(r.begin, buffer.data(), r.end - r.begin));
      }
    }
    report.files += 1;
    report.chunks += static_cast<int64_t>(entry.chunk_hashes.size());
    report.bytes += entry.bytes;
  }
  const safetensors::Reader* model = nullptr;
  const safetensors::Reader* optimizer = nullptr;
  for (size_t i = 0; i < files.size(); ++i) {
    if (files[i].name == kCheckpointModelFile) model = &readers[i];
    if (files[i].name == kCheckpointOptimizerFile) optimizer = &readers[i];
  }
  if (model == nullptr) {
    return Status(StatusCode::kInvalidArgument,
                  report.path + "/" + kCheckpointStateFile + " lists no " + kCheckpointModelFile);
  }
  if (model->header().tensors.size() != static_cast<size_t>(info.params)) {
    return Status(StatusCode::kInvalidArgument, model->path() + ": " + std::to_string(model->header().tensors.size()) +
                                                    " tensors, state.json says " + std::to_string(info.params));
  }
  // The model file against state.json first (whose own checksum was verified on reading),
  // so a forged shape there is blamed on the model file, not on the optimizer's.
  int64_t elements = 0;
  for (const safetensors::TensorInfo& t : model->header().tensors) {
    // zdp writes its masters and moments in fp32, and a load refuses anything else as
    // another model's: verify said such a file passed.
    if (t.dtype != "F32") {
      return Status(StatusCode::kInvalidArgument, model->path() + ": tensor '" + printable(t.name) + "' is " +
                                                      printable(t.dtype) + ", a checkpoint holds F32");
    }
    elements += t.numel();
  }
  if (elements != info.elements) {
    return Status(StatusCode::kInvalidArgument, model->path() + ": the tensors hold " + std::to_string(elements) +
                                                    " elements, state.json says " + std::to_string(info.elements) +
                                                    " (a tensor's shape was altered)");
  }
  if (optimizer != nullptr) ZDP_RETURN_IF_ERROR(check_optimizer_names(*model, *optimizer));
  return report;
}

}  // namespace zdp
