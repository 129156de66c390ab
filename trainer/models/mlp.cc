// The mlp model: d_model input features -> n_layers x (Linear d_model -> d_model, GELU)
// -> Linear d_model -> vocab_size, trained with cross-entropy (classification) or squared
// error (regression) on the synthetic teacher data of data/source.h. Layer l is group l,
// the head group n_layers.
#include <cmath>
#include <string>
#include <vector>

#include "trainer/models/model.h"

namespace zdp::trainer {
namespace {

using kernels::OutputMode;

class Mlp : public Model {
 public:
  Mlp(const ModelConfig& c, int64_t micro, Ops* ops)
      : Model(ops, c.dtype), depth_(c.n_layers), width_(c.d_model), outputs_(c.vocab_size), task_(c.task), micro_(micro) {}

  Status declare_params(const DeclareParam& declare) override {
    for (int l = 0; l <= depth_; ++l) {
      const int out = l < depth_ ? width_ : outputs_;
      const std::string name = l < depth_ ? "fc" + std::to_string(l) : std::string("head");
      // 1/sqrt(fan_in): unit-variance pre-activations, whatever the width.
      const float std = 1.0f / std::sqrt(static_cast<float>(width_));
      ZDP_ASSIGN_OR_RETURN(Param w, declare(name + ".weight", {out, width_}, Init::normal(std), l));
      ZDP_ASSIGN_OR_RETURN(Param b, declare(name + ".bias", {out}, Init::zeros(), l));
      w_.push_back(w);
      b_.push_back(b);
    }
    return Status::Ok();
  }

  Status forward_backward(Engine& engine, const Batch& batch, const LossSink& loss) override {
    return run(engine, batch, &loss).status();
  }
  StatusOr<double> eval_micro(Engine& engine, const Batch& batch) override { return run(engine, batch, nullptr); }
  int64_t tokens_per_sample() const override { return 1; }
  double flops_per_sample() const override {
    return 6.0 * (static_cast<double>(depth_) * width_ * width_ + static_cast<double>(width_) * outputs_);
  }
  std::string describe() const override {
    return "mlp " + std::to_string(width_) + " -> " + std::to_string(depth_) + " x " + std::to_string(width_) +
           " GELU -> " + std::to_string(outputs_) + " (" + to_string(task_) + ")";
  }

 private:
  Status allocate() override {
    const DType dt = dtype_;
    for (int l = 0; l <= depth_; ++l) {
      ZDP_ASSIGN_OR_RETURN(DeviceBuffer pre, take(micro_ * (l < depth_ ? width_ : outputs_), dt));
      pre_.push_back(std::move(pre));
      ZDP_ASSIGN_OR_RETURN(DeviceBuffer act, take(micro_ * width_, dt));  // act_[0]: the input
      act_.push_back(std::move(act));
    }
    ZDP_ASSIGN_OR_RETURN(grad_a_, take(micro_ * std::max(width_, outputs_), dt));
    ZDP_ASSIGN_OR_RETURN(grad_b_, take(micro_ * std::max(width_, outputs_), dt));
    ZDP_ASSIGN_OR_RETURN(targets_, take(micro_ * outputs_, DType::kF32));
    ZDP_ASSIGN_OR_RETURN(labels_, take_bytes(micro_ * 4));
    ZDP_ASSIGN_OR_RETURN(losses_, take(micro_, DType::kF32));
    return Status::Ok();
  }

  Status upload_inputs(const Batch& b) {
    if (b.count > micro_) return Status(StatusCode::kInternal, "mlp: batch larger than micro_batch");
    if (ops_->dtype() != DType::kF32) {
      return Status(StatusCode::kInvalidArgument, "mlp: features are fp32; run the mlp with model.dtype = \"fp32\"");
    }
    // Sizes and labels checked on the host, as the gpt checks its ids: a batch larger than
    // it says wrote past the input buffer, and a label outside the classes made the GPU's
    // cross-entropy read past a row of logits (the CPU twin refuses it).
    const auto wrong_size = [&](const char* what, size_t got, int64_t per_sample) {
      return Status(StatusCode::kInvalidArgument, std::string("mlp: the batch has ") + std::to_string(got) + " " + what +
                                                      " for its " + std::to_string(b.count) + " samples (" +
                                                      std::to_string(per_sample) + " each)");
    };
    if (static_cast<int64_t>(b.features.size()) != b.count * width_) return wrong_size("features", b.features.size(), width_);
    ZDP_RETURN_IF_ERROR(ops_->upload(act_[0].data(), b.features.data(), b.features.size() * sizeof(float)));
    if (task_ == MlpTask::kClassification) {
      if (static_cast<int64_t>(b.labels.size()) != b.count) return wrong_size("labels", b.labels.size(), 1);
      for (size_t i = 0; i < b.labels.size(); ++i) {
        if (b.labels[i] < 0 || b.labels[i] >= outputs_) {
          return Status(StatusCode::kInvalidArgument, "mlp: label " + std::to_string(b.labels[i]) + " of sample " +
                                                          std::to_string(i) + " is outside [0, " +
                                                          std::to_string(outputs_) + ") (model.vocab_size)");
        }
      }
      return ops_->upload(labels_.data(), b.labels.data(), b.labels.size() * 4);
    }
    if (static_cast<int64_t>(b.targets.size()) != b.count * outputs_) {
      return wrong_size("targets", b.targets.size(), outputs_);
    }
    return ops_->upload(targets_.data(), b.targets.data(), b.targets.size() * sizeof(float));
  }

  // Training with `loss` (returns 0; the loss goes there), else evaluation (returns the
  // mean loss, read back).
  StatusOr<double> run(Engine& engine, const Batch& batch, const LossSink* loss) {
    const bool train = loss != nullptr;
    ZDP_RETURN_IF_ERROR(upload_inputs(batch));
    const int64_t n = batch.count;
    for (int l = 0; l <= depth_; ++l) {  // forward
      ZDP_ASSIGN_OR_RETURN(Engine::LayerScope scope, engine.layer(l, Engine::Pass::kForward));
      ZDP_ASSIGN_OR_RETURN(void* w, param_view(engine, w_[l], "mlp"));
      ZDP_ASSIGN_OR_RETURN(void* b, param_view(engine, b_[l], "mlp"));
      const int out = l < depth_ ? width_ : outputs_;
      ZDP_RETURN_IF_ERROR(ops_->linear(act_[l].data(), w, b, pre_[l].data(), n, width_, out));
      if (l < depth_) ZDP_RETURN_IF_ERROR(ops_->gelu(pre_[l].data(), act_[l + 1].data(), n * width_));
    }
    // The loss; in training its gradient goes into grad_a_ (d loss / d head output).
    const float grad_scale = static_cast<float>(engine.loss_scale() / static_cast<double>(n));
    void* dlogits = train ? grad_a_.data() : nullptr;
    if (task_ == MlpTask::kClassification) {
      ZDP_RETURN_IF_ERROR(ops_->cross_entropy({n, outputs_, ops_->dtype(), pre_[depth_].data(), labels_.as<int32_t>(),
                                              losses_.as<float>(), dlogits, grad_scale}));
    } else {
      ZDP_RETURN_IF_ERROR(ops_->squared_error({n, outputs_, ops_->dtype(), pre_[depth_].data(), targets_.as<float>(),
                                              losses_.as<float>(), dlogits, grad_scale}));
    }
    if (!train) return ops_->mean_loss(losses_.as<float>(), n);
    ZDP_RETURN_IF_ERROR(ops_->loss_sum(losses_.as<float>(), n, *loss));
    ZDP_RETURN_IF_ERROR(engine.mark(TimelineEvent::Kind::kBackward));  // profiling: forward ends here

    void* dy = grad_a_.data();  // d loss / d pre-activation of layer l
    void* dx = grad_b_.data();
    for (int l = depth_; l >= 0; --l) {  // backward
      ZDP_ASSIGN_OR_RETURN(Engine::LayerScope scope, engine.layer(l, Engine::Pass::kBackward));
      ZDP_ASSIGN_OR_RETURN(void* w, param_view(engine, w_[l], "mlp"));
      ZDP_ASSIGN_OR_RETURN(void* gw, grad_view(engine, w_[l], "mlp"));
      ZDP_ASSIGN_OR_RETURN(void* gb, grad_view(engine, b_[l], "mlp"));
      const int out = l < depth_ ? width_ : outputs_;
      ZDP_RETURN_IF_ERROR(ops_->linear_backward(act_[l].data(), w, dy, l > 0 ? dx : nullptr, OutputMode::kOverwrite, gw,
                                               gb, n, width_, out));
      ZDP_RETURN_IF_ERROR(engine.grad_ready(w_[l]));
      ZDP_RETURN_IF_ERROR(engine.grad_ready(b_[l]));
      if (l > 0) {  // through the GELU of layer l - 1
        ZDP_RETURN_IF_ERROR(ops_->gelu_backward(pre_[l - 1].data(), dx, dx, n * width_));
        std::swap(dy, dx);
      }
    }
    return 0.0;
  }

  int depth_, width_, outputs_;
  MlpTask task_;
  int64_t micro_;
  std::vector<Param> w_, b_;
  std::vector<DeviceBuffer> pre_, act_;
  DeviceBuffer grad_a_, grad_b_, targets_, labels_, losses_;
};

}  // namespace

Status Model::register_params(Engine& engine) {
  ZDP_RETURN_IF_ERROR(declare_params([&engine](const std::string& name, const std::vector<int64_t>& shape, Init init,
                                               int layer) { return engine.add_param(name, shape, init, layer); }));
  return allocate();
}

StatusOr<DeviceBuffer> Model::take(int64_t count, DType dtype) {
  return take_bytes(count * static_cast<int64_t>(dtype_size(dtype)));
}

StatusOr<DeviceBuffer> Model::take_bytes(int64_t bytes) {
  buffer_bytes_ += Ops::allocation_bytes(bytes);
  if (ops_ == nullptr) return DeviceBuffer();
  return ops_->alloc_bytes(bytes);
}

StatusOr<double> Model::train_micro(Engine& engine, const Batch& batch) {
  if (ops_ == nullptr) return Status(StatusCode::kInternal, "train_micro: a model made only to be described");
  ZDP_ASSIGN_OR_RETURN(DeviceBuffer sum, ops_->alloc_bytes(sizeof(double)));
  LossSink sink;
  sink.sum = sum.as<double>();
  sink.first = true;
  ZDP_RETURN_IF_ERROR(forward_backward(engine, batch, sink));
  double mean = 0;
  ZDP_RETURN_IF_ERROR(ops_->download(&mean, sum.data(), sizeof(double)));
  return mean;
}

// A null view stands for the engine's first failure (a dead peer, a timeout): that is the
// error to report, not the missing view, which only follows from it.
namespace {
Status missing_view(const Engine& engine, const char* what, const char* view) {
  const Status cause = engine.error();
  if (!cause.ok()) return cause;
  return Status(StatusCode::kInternal, std::string(what) + ": the engine gave no " + view + " view and no error");
}
}  // namespace

StatusOr<void*> param_view(Engine& engine, Param p, const char* what) {
  void* v = engine.param(p);
  if (v == nullptr) return missing_view(engine, what, "parameter");
  return v;
}

StatusOr<void*> grad_view(Engine& engine, Param p, const char* what) {
  void* v = engine.grad(p);
  if (v == nullptr) return missing_view(engine, what, "gradient");
  return v;
}

StatusOr<std::unique_ptr<Model>> make_mlp(const ModelConfig& config, int64_t micro_batch, Ops* ops) {
  return std::unique_ptr<Model>(new Mlp(config, micro_batch, ops));
}

StatusOr<std::unique_ptr<Model>> make_model(const Config& config, Ops& ops) {
  ZDP_RETURN_IF_ERROR(check_model_support(config));  // the mlp in 16-bit: named before anything is built
  if (config.model.kind == ModelKind::kMlp) return make_mlp(config.model, config.train.micro_batch, &ops);
  return make_gpt(config.model, config.train.micro_batch, &ops);
}

}  // namespace zdp::trainer
