// plan_json (plan_report.h): the planner's report as JSON lines, one per model,
// assumptions, (world size, stage) and recommendation, for tools to read (plan.jsonl).
#include <nlohmann/json.hpp>

#include "planner/plan_report.h"

namespace zdp::launcher {

std::vector<nlohmann::json> plan_json(const PlanReport& rep, const PlannerInputs& in) {
  std::vector<nlohmann::json> lines;
  const trainer::ModelSpec& m = rep.model;
  lines.push_back({{"kind", "model"},
                   {"config", rep.config_path},
                   {"model", m.description},
                   {"psi", m.psi},
                   {"flops_per_sample", m.flops_per_sample},
                   {"tokens_per_sample", m.tokens_per_sample},
                   {"micro_batch", rep.micro_batch},
                   {"activation_bytes", m.activation_bytes},
                   {"fused_attention", m.fused_attention}});
  lines.push_back({{"kind", "assumptions"},
                   {"device", to_string(in.device)},
                   {"device_memory_bytes", in.device_memory},
                   {"device_memory_origin", in.memory_origin},
                   {"link_alpha_s", in.link.alpha_s},
                   {"link_beta_bytes_per_s", in.link.beta_bytes_per_s},
                   {"link_origin", in.link.origin},
                   {"ranks_per_node", in.ranks_per_node},
                   {"inter_link_alpha_s", in.inter_link.alpha_s},
                   {"inter_link_beta_bytes_per_s", in.inter_link.beta_bytes_per_s},
                   {"flops_per_s", in.flops_per_s},
                   {"optimizer_s", in.optimizer_s},
                   {"flops_origin", in.flops_origin}});
  for (const WorldPlan& w : rep.worlds) {
    for (const StagePlan& s : w.stages) {
      const MemoryPlan& p = s.memory;
      const StepRates rates = step_rates(rep.model, w.global_batch, w.world_size, s.time.step_s, in.peak_flops_per_s);
      lines.push_back({{"kind", "stage"},
                       {"world_size", w.world_size},
                       {"stage", s.stage},
                       {"global_batch", w.global_batch},
                       {"accum_steps", w.accum_steps},
                       {"accumulate", to_string(s.accumulate)},
                       {"flops_per_s", w.flops_per_s},
                       {"padded_elems", p.padded_elems},
                       {"buckets", p.bucket_elems.size()},
                       {"bytes",
                        {{"params", p.states.params},
                         {"grads", p.states.grads},
                         {"reduce_copy", p.states.reduce_copy},
                         {"accum", p.states.accum},
                         {"error_feedback", p.states.error_feedback},
                         {"master", p.states.master},
                         {"adam_m", p.states.m},
                         {"adam_v", p.states.v},
                         {"grad_staging", p.buffers.grad_staging},
                         {"reduce_staging", p.buffers.reduce_staging},
                         {"param_gather", p.buffers.param_gather},
                         {"wire", p.buffers.wire},
                         {"workspace", p.buffers.workspace},
                         {"library_workspace", s.library_workspace},
                         {"activations", s.activations},
                         {"engine_total", p.total()},
                         {"total", s.total},
                         {"formula_model_states", s.formula_bytes}}},
                       {"fits", s.fits},
                       {"sent_bytes_per_step", s.time.sent_bytes},
                       {"inter_node_sent_bytes_per_step", s.time.inter_sent_bytes},
                       {"uncompressed_step_s", s.uncompressed.step_s},
                       {"compute_s", s.time.compute_s},
                       {"optimizer_s", s.time.optimizer_s},
                       {"engine_s", s.time.engine_s},
                       {"reduce_s", s.time.reduce_s},
                       {"gather_s", s.time.gather_s},
                       {"exposed_comm_s", s.time.exposed_comm_s},
                       {"step_s", s.time.step_s},
                       {"tokens_per_s", rates.tokens_per_s},
                       {"mfu", rates.mfu < 0 ? nlohmann::json(nullptr) : nlohmann::json(rates.mfu)}});
    }
    lines.push_back({{"kind", "recommendation"},
                     {"world_size", w.world_size},
                     {"stage", w.recommended < 0 ? nlohmann::json(nullptr) : nlohmann::json(w.recommended)},
                     {"reason", w.reason}});
  }
  return lines;
}

}  // namespace zdp::launcher
