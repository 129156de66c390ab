// A reference model of dp-train: registers its parameters with the engine and runs one
// micro-batch at a time against the engine's parameter and gradient views (README "Use
// zdp from your own trainer"). Layer groups: one per block, so stage 3 gathers layer by
// layer; a scope is opened around each layer in forward and again in backward.
#pragma once

#include <memory>
#include <string>

#include "trainer/data/source.h"
#include "trainer/models/ops.h"
#include "zdp/config.h"
#include "zdp/engine.h"

namespace zdp::trainer {

class Model {
 public:
  virtual ~Model() = default;
  // Before engine.finalize(): every parameter with its layer group and initialisation.
  virtual Status register_params(Engine& engine) = 0;
  // Forward and backward of one micro-batch: writes the gradient of the micro-batch's mean
  // loss (times engine.loss_scale()) into every grad view and marks each ready. Returns
  // the mean loss. Calls engine.mark(kBackward) where its backward begins (profiling).
  virtual StatusOr<double> train_micro(Engine& engine, const Batch& batch) = 0;
  // Forward only: the mean loss of `batch`.
  virtual StatusOr<double> eval_micro(Engine& engine, const Batch& batch) = 0;
  // Tokens per sample (gpt: seq_len; mlp: 1), for tokens/s.
  virtual int64_t tokens_per_sample() const = 0;
  // Floating-point operations of forward + backward per sample (6 x multiply-adds of the
  // GEMMs, plus attention), for MFU.
  virtual double flops_per_sample() const = 0;
  virtual std::string describe() const = 0;
};

// The model of config.model, computing on `ops` (its device and compute dtype).
StatusOr<std::unique_ptr<Model>> make_mlp(const ModelConfig& config, int64_t micro_batch, Ops& ops);
StatusOr<std::unique_ptr<Model>> make_gpt(const ModelConfig& config, int64_t micro_batch, Ops& ops);
StatusOr<std::unique_ptr<Model>> make_model(const Config& config, Ops& ops);

// A view of parameter p, or the engine's reason why there is none.
StatusOr<void*> param_view(Engine& engine, Param p, const char* what);
StatusOr<void*> grad_view(Engine& engine, Param p, const char* what);

}  // namespace zdp::trainer
