// model_spec(): a model made without Ops declares its parameters into a list and counts
// the buffers it would take (model.h), so the planner and dp-train share one definition.
#include "trainer/models/model_spec.h"

#include "kernels/fused_attention.h"
#include "trainer/models/model.h"

namespace zdp::trainer {

StatusOr<ModelSpec> model_spec(const Config& config) {
  const int64_t micro = config.train.micro_batch;
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, config.model.kind == ModelKind::kMlp
                                                         ? make_mlp(config.model, micro, nullptr)
                                                         : make_gpt(config.model, micro, nullptr));
  ModelSpec spec;
  ZDP_RETURN_IF_ERROR(model->declare_params(
      [&spec](const std::string& name, const std::vector<int64_t>& shape, Init, int layer) -> StatusOr<Param> {
        spec.params.push_back(ParamDecl{name, shape, layer});
        spec.psi += spec.params.back().numel();
        return Param{static_cast<int>(spec.params.size()) - 1};
      }));
  ZDP_RETURN_IF_ERROR(model->allocate());
  spec.description = model->describe();
  spec.activation_bytes = model->activation_bytes();
  spec.flops_per_sample = model->flops_per_sample();
  spec.tokens_per_sample = model->tokens_per_sample();
  spec.fused_attention = model->fused_attention();
  spec.nested_layer_scopes = model->nested_layer_scopes();
  // Per parameter, its layer group's (none when the model states none).
  for (const ParamDecl& p : spec.params) {
    const double f = model->grad_ready_fraction(p.layer);
    if (f < 0) {
      spec.grad_ready.clear();
      break;
    }
    spec.grad_ready.push_back(f);
  }
  if (spec.fused_attention) spec.attention_workspace_bytes = fused_attention_workspace_bytes(config);
  return spec;
}

int64_t fused_attention_workspace_bytes(const Config& config) {
  const ModelConfig& m = config.model;
  return kernels::fused_attention_workspace_estimate(
      {config.train.micro_batch, m.seq_len, m.n_heads, m.d_model / m.n_heads, m.dtype}, config.train.deterministic);
}

}  // namespace zdp::trainer
