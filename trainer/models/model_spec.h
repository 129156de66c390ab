// A reference model described without an engine, a device or data: the parameters it
// registers (the same declare_params() dp-train runs), the activation buffers it takes
// for one micro-batch and its FLOPs per sample. What `dp-launch plan` starts from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zdp/config.h"
#include "zdp/memory_plan.h"

namespace zdp::trainer {

struct ModelSpec {
  std::string description;        // Model::describe()
  std::vector<ParamDecl> params;  // in registration order
  int64_t psi = 0;                // sum of the parameters' elements
  int64_t activation_bytes = 0;   // per rank, for train.micro_batch (MemCategory::kOther)
  double flops_per_sample = 0;    // forward + backward (Model::flops_per_sample)
  int64_t tokens_per_sample = 1;
  bool fused_attention = false;   // the gpt's attention planned fused (plans_fused_attention in model.h)
  int nested_layer_scopes = 0;    // Model::nested_layer_scopes (EngineOptions' field of that name)
  std::vector<double> grad_ready;  // Model::grad_ready_fraction of each parameter's group, or empty
  // GPUs with fused attention: cuDNN's workspace (kernels::fused_attention_workspace_estimate
  // at train.micro_batch; MemCategory::kWorkspace), else 0.
  int64_t attention_workspace_bytes = 0;
};

// The model of config.model at config.train.micro_batch. kInvalidArgument as make_model.
StatusOr<ModelSpec> model_spec(const Config& config);

// The gpt's fused-attention cuDNN workspace at train.micro_batch, were it fused
// (kernels::fused_attention_workspace_estimate; train.deterministic decides which).
int64_t fused_attention_workspace_bytes(const Config& config);

}  // namespace zdp::trainer
