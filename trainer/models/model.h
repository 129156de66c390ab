// A reference model of dp-train: registers its parameters with the engine and runs one
// micro-batch at a time against the engine's parameter and gradient views (README "Use
// zdp from your own trainer"). Layer groups: one per block, so stage 3 gathers layer by
// layer; a scope is opened around each layer in forward and again in backward.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/data/source.h"
#include "kernels/loss_sum.h"
#include "trainer/models/ops.h"
#include "zdp/config.h"
#include "zdp/engine.h"

namespace zdp::trainer {

// Where a model declares a parameter: Engine::add_param in register_params(), a list in
// model_spec() (dp-launch plan), so the planner sees exactly what the trainer registers.
using DeclareParam =
    std::function<StatusOr<Param>(const std::string& name, const std::vector<int64_t>& shape, Init init, int layer)>;

// Where a training micro-batch's mean loss goes without a host wait: added (on the compute
// stream) into the double at `sum`, divided by `divide_by`; see kernels/loss_sum.h for
// `first` and `rounded`. Device memory on GPUs.
using LossSink = kernels::LossSumArgs;

class Model {
 public:
  virtual ~Model() = default;
  // Before engine.finalize(): every parameter with its layer group and initialisation
  // (declare_params through engine.add_param), then the activation buffers.
  Status register_params(Engine& engine);
  // Every parameter, in registration order.
  virtual Status declare_params(const DeclareParam& declare) = 0;
  // Forward and backward of one micro-batch: writes the gradient of the micro-batch's mean
  // loss (times engine.loss_scale()) into every grad view and marks each ready, and adds
  // the mean loss into `loss` (its losses/count fields are the model's; no host wait).
  // Calls engine.mark(kBackward) where its backward begins (profiling).
  virtual Status forward_backward(Engine& engine, const Batch& batch, const LossSink& loss) = 0;
  // forward_backward() into a temporary sum that is read back: the mean loss. Waits for
  // the device (tests, calibration; dp-train's loop uses forward_backward).
  StatusOr<double> train_micro(Engine& engine, const Batch& batch);
  // Forward only: the mean loss of `batch`.
  virtual StatusOr<double> eval_micro(Engine& engine, const Batch& batch) = 0;
  // Tokens per sample (gpt: seq_len; mlp: 1), for tokens/s.
  virtual int64_t tokens_per_sample() const = 0;
  // Floating-point operations of forward + backward per sample (6 x multiply-adds of the
  // GEMMs, plus attention), for MFU.
  virtual double flops_per_sample() const = 0;
  virtual std::string describe() const = 0;
  // Whether attention runs (or, without ops, is planned) fused: kernels/fused_attention.h.
  virtual bool fused_attention() const { return false; }
  // Layer scopes it keeps open inside another (EngineOptions::nested_layer_scopes).
  virtual int nested_layer_scopes() const { return 0; }
  // When the gradients of a layer group's parameters are complete (grad_ready) in a
  // micro-batch's backward, as the fraction of the backward's FLOPs done by then: the
  // planner's overlap of the reductions (dp-launch plan). Negative (the default): not
  // stated; the planner then takes the parameters to complete in reverse registration
  // order at a rate even in elements.
  virtual double grad_ready_fraction(int layer_group) const { return -1; }
  // Takes the activation and scratch buffers of one micro-batch through take()
  // (register_params() calls it; a model without ops only counts them).
  virtual Status allocate() = 0;
  // Bytes of the activation and scratch buffers of one micro-batch (MemCategory::kOther),
  // once register_params() or model_spec() has taken them.
  int64_t activation_bytes() const { return buffer_bytes_; }

 protected:
  // `ops` is null for a model made only to be described (model_spec): then allocate()
  // counts its buffers' bytes and allocates nothing.
  Model(Ops* ops, DType dtype) : ops_(ops), dtype_(dtype) {}
  // A buffer of `count` elements of `dtype` (bytes) from ops_, counted in activation_bytes().
  StatusOr<DeviceBuffer> take(int64_t count, DType dtype);
  StatusOr<DeviceBuffer> take_bytes(int64_t bytes);

  Ops* ops_;
  DType dtype_;  // the compute dtype (ops_->dtype() when there are ops)

 private:
  int64_t buffer_bytes_ = 0;
};

// The model of config.model, computing on `ops` (its device and compute dtype); null ops
// make a model that can only declare its parameters and count its buffers (model_spec).
StatusOr<std::unique_ptr<Model>> make_mlp(const ModelConfig& config, int64_t micro_batch, Ops* ops);
StatusOr<std::unique_ptr<Model>> make_gpt(const ModelConfig& config, int64_t micro_batch, Ops* ops);
StatusOr<std::unique_ptr<Model>> make_model(const Config& config, Ops& ops);

// What the gpt made without ops (model_spec: dp-launch plan) assumes a GPU runs:
// model.attention "fused", or "auto" with a 16-bit model.dtype (16-bit compute runs on
// GPUs only), in a zdp build with cuDNN fused attention that accepts the shape. dp-train
// decides on the device (Ops::use_fused_attention) and may fall back.
bool plans_fused_attention(const ModelConfig& m);

// A view of parameter p, or the engine's reason why there is none.
StatusOr<void*> param_view(Engine& engine, Param p, const char* what);
StatusOr<void*> grad_view(Engine& engine, Param p, const char* what);

}  // namespace zdp::trainer
