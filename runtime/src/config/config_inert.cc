// inert_settings (zdp/config.h): keys a user wrote that do nothing in the config they are
// in. The config check refuses a key that can only be a mistake (zero.error_feedback
// without quantization, model.attention for the mlp); the ones here are plausibly kept
// for another setup (a stage-3 config run with --set zero.stage=2, a tokens config whose
// held-out file was left out), so they are said, not refused. Settings under an explicit
// off switch (profile.* with profile.enabled = false) are not listed: the switch says
// that they wait for it.
#include <string>
#include <vector>

#include "zdp/config.h"

namespace zdp {

std::vector<std::string> inert_settings(const Config& c) {
  std::vector<std::string> out;
  // `key`, when the file or --set gave it, does nothing because of `why`.
  auto note = [&](const char* key, bool inert, const std::string& why) {
    if (inert && c.origins.count(key)) out.push_back(c.where(key) + ": " + key + " has no effect: " + why);
  };
  note("zero.prefetch_layers", c.zero.stage < 3,
       "only zero.stage = 3 gathers parameters ahead of use (zero.stage is " + std::to_string(c.zero.stage) + ")");
  const std::string no_checkpoints = "no checkpoints are written (checkpoint.dir is empty)";
  note("checkpoint.keep_last", c.checkpoint.dir.empty(), no_checkpoints);
  note("checkpoint.storage", c.checkpoint.dir.empty(), no_checkpoints);
  const bool no_val = c.data.kind == DataKind::kTokens && c.data.val_path.empty();
  const std::string no_eval = "nothing is evaluated (data.kind = \"tokens\" and data.val_path is empty)";
  note("train.eval_every", no_val, no_eval);
  note("train.eval_samples", no_val, no_eval);
  note("data.synthetic_samples", c.data.kind != DataKind::kSynthetic,
       "it sizes the synthetic data, and data.kind is \"" + std::string(to_string(c.data.kind)) + "\"");
  for (const char* key : {"data.path", "data.val_path"}) {
    note(key, c.data.kind == DataKind::kSynthetic, "data.kind = \"synthetic\" generates its samples and reads no file");
  }
  const bool sgd = c.optim.name == OptimizerKind::kSgd;
  note("optim.beta2", sgd, "optim.name = \"sgd\" keeps no second moment (optim.beta1 is its momentum)");
  note("optim.eps", sgd, "optim.name = \"sgd\" has no denominator");
  for (const char* key : {"optim.dampening", "optim.nesterov"}) {
    note(key, !sgd, "it is SGD's; optim.name is \"adamw\"");
  }
  note("optim.dampening", sgd && c.optim.beta1 == 0, "optim.beta1 (SGD's momentum) is 0: there is no momentum to damp");
  note("optim.min_lr", c.optim.schedule == LrSchedule::kConstant,
       "optim.schedule = \"constant\" never decays to it");
  note("optim.base_batch", c.optim.lr_scaling == LrScalingRule::kNone,
       "optim.lr_scaling = \"none\" scales nothing by it");
  note("launch.rank_addr", c.launch.backend == Backend::kNccl,
       "it is the address Gloo ranks advertise; NCCL chooses its own (NCCL_SOCKET_IFNAME, launch.socket_ifname)");
  note("optim.lr_scaling", c.optim.lr_scaling != LrScalingRule::kNone && c.optim.base_batch == 0,
       "optim.base_batch is 0 (= train.global_batch): the ratio is 1 at every global batch");
  note("checkpoint.resume", c.checkpoint.dir.empty() && c.checkpoint.resume == ResumeMode::kAuto,
       "\"auto\" looks in checkpoint.dir, which is empty");
  note("optim.rounding", c.model.dtype == DType::kF32, "fp32 parameters are the masters, not rounded copies");
  note("zero.error_feedback", c.zero.reduce_quant == WireQuant::kNone,
       "only a quantized zero.reduce_dtype (\"int8\", \"int4\") has a rounding error to feed back");
  note("zero.accumulate", c.train.accum_steps == 1, "train.accum_steps is 1: nothing accumulates");
  const bool mlp = c.model.kind == ModelKind::kMlp;
  note("model.attention", !mlp && c.launch.backend == Backend::kGloo,
       "CPU ranks (launch.backend = \"gloo\") always run the batched path; it chooses for GPUs");
  note("model.n_heads", mlp, "the mlp has no attention (model.kind = \"mlp\")");
  note("model.seq_len", mlp, "the mlp's samples are vectors, not sequences (model.kind = \"mlp\")");
  return out;
}

}  // namespace zdp
