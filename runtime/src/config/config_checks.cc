// Checks across config keys (batch geometry, node ranks, schedules) and the ones that need
// the world size; every message prints all the values involved, torchtitan-style.
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "optim/lr_scaling.h"
#include "runtime/internal/config_limits.h"
#include "runtime/src/config/config_keys.h"
#include "runtime/src/config/cross_checker.h"
#include "zdp/checkpoint.h"

namespace zdp {
namespace {

using config_internal::checked_mul;
using config_internal::KeyInfo;
using config_internal::product_text;
using config_internal::selected;
using config_internal::str;

}  // namespace

std::string Config::where(const std::string& key) const {
  auto it = origins.find(key);
  if (it == origins.end()) return source;
  const KeyOrigin& o = it->second;
  if (!o.forwarded.empty()) return o.forwarded;
  switch (o.source) {
    case ValueSource::kFile: return source + ":" + std::to_string(o.line) + ":" + std::to_string(o.column);
    case ValueSource::kOverride: return "--set " + o.override_text;
    case ValueSource::kDefault: break;
  }
  return source;
}

namespace config_internal {

void cross_checks(const Config& c, int world_size, const std::set<std::string>& failed,
                  const std::vector<std::string>* prefixes, std::vector<std::string>* out) {
  CrossChecker check(c, failed, prefixes, out);
  const TrainConfig& t = c.train;
  launch_checks(c, check);
  // With the world size known, the check below names all four numbers instead.
  if (t.accum_steps > 0 && t.micro_batch > 0 && world_size <= 0) {
    const int64_t per_rank = checked_mul(t.micro_batch, t.accum_steps);
    check.require(per_rank > 0 && t.global_batch % per_rank == 0,
                  {"train.global_batch", "train.micro_batch", "train.accum_steps"}, [&] {
                    return "train.global_batch (" + str(t.global_batch) + ") is not divisible by train.micro_batch (" +
                           str(t.micro_batch) + ") x train.accum_steps (" + str(t.accum_steps) +
                           ") = " + product_text(per_rank);
                  });
  }
  if (c.model.kind == ModelKind::kGpt && c.model.n_heads > 0) {
    check.require(c.model.d_model % c.model.n_heads == 0, {"model.d_model", "model.n_heads", "model.kind"}, [&] {
      return "model.d_model (" + str(c.model.d_model) + ") is not divisible by model.n_heads (" +
             str(c.model.n_heads) + ") (model.kind = \"gpt\")";
    });
  }
  model_checks(c, check);
  // The sampler's position after the last step, steps x global_batch, must stay below the
  // bound every checkpoint's data_position is checked against.
  check.require(checked_mul(t.steps, t.global_batch) >= 0 && checked_mul(t.steps, t.global_batch) <= kMaxDataPosition,
                {"train.steps", "train.global_batch"}, [&] {
                  return "train.steps (" + str(t.steps) + ") x train.global_batch (" + str(t.global_batch) + ") = " +
                         product_text(checked_mul(t.steps, t.global_batch)) + " samples exceeds " +
                         str(kMaxDataPosition) + " (2^62), the most a run's data position may reach";
                });
  if (c.optim.schedule == LrSchedule::kConstant) {
    check.require(c.optim.warmup_steps <= t.steps, {"optim.warmup_steps", "train.steps"}, [&] {
      return "optim.warmup_steps (" + str(c.optim.warmup_steps) + ") exceeds train.steps (" + str(t.steps) + ")";
    });
  } else {
    // A decaying schedule runs from warmup_steps to train.steps: it needs at least one step
    // (the engine's LrSchedule::validate would otherwise refuse it only at finalize).
    check.require(c.optim.warmup_steps < t.steps, {"optim.warmup_steps", "train.steps", "optim.schedule"}, [&] {
      return "optim.warmup_steps (" + str(c.optim.warmup_steps) + ") must be less than train.steps (" +
             str(t.steps) + ") when optim.schedule = \"" + to_string(c.optim.schedule) +
             "\": the decay needs at least one step after warmup";
    });
  }
  // torch.optim.SGD's rule: Nesterov momentum needs a momentum and no dampening.
  check.require(!c.optim.nesterov || c.optim.name != OptimizerKind::kSgd ||
                    (c.optim.beta1 > 0 && c.optim.dampening == 0),
                {"optim.nesterov", "optim.beta1", "optim.dampening"}, [&] {
                  return "optim.nesterov needs a momentum (optim.beta1 > 0, is " + format_float(c.optim.beta1) +
                         ") and no dampening (optim.dampening = 0, is " + format_float(c.optim.dampening) +
                         "), as torch.optim.SGD";
                });
  check.require(c.optim.min_lr <= c.optim.lr, {"optim.min_lr", "optim.lr"}, [&] {
    return "optim.min_lr (" + format_float(c.optim.min_lr) + ") exceeds optim.lr (" + format_float(c.optim.lr) + ")";
  });
  // Quantized communication: where it cannot apply, refused rather than ignored.
  const bool quant_reduce = c.zero.reduce_quant != WireQuant::kNone;
  check.require(!quant_reduce || c.zero.stage >= 1, {"zero.reduce_dtype", "zero.stage"}, [&] {
    return std::string("zero.reduce_dtype = \"") + to_string(c.zero.reduce_quant) +
           "\" quantizes the gradient reduce-scatter of stages 1-3; zero.stage is 0 (an all-reduce): use stage 1 "
           "or more, or reduce_dtype \"fp32\" / \"bf16\"";
  });
  check.require(c.zero.gather_quant == WireQuant::kNone || c.zero.stage >= 1, {"zero.gather_dtype", "zero.stage"},
                [&] {
                  return std::string("zero.gather_dtype = \"int8\" quantizes the parameter all-gather of stages "
                                     "1-3; zero.stage is 0 (nothing is gathered): use stage 1 or more, or \"auto\"");
                });
  check.require(c.zero.error_feedback || quant_reduce, {"zero.error_feedback", "zero.reduce_dtype"}, [&] {
    return "zero.error_feedback = false only applies to a quantized reduce_dtype (\"int8\", \"int4\"); "
           "zero.reduce_dtype is \"" + std::string(to_string(c.zero.reduce_dtype)) + "\": remove the key";
  });
  check.require(c.zero.compress == CompressScope::kAll || quant_reduce || c.zero.gather_quant != WireQuant::kNone,
                {"zero.compress", "zero.reduce_dtype", "zero.gather_dtype"}, [&] {
                  return std::string("zero.compress = \"inter-node\" chooses which peers get quantized values, "
                                     "but nothing is quantized (zero.reduce_dtype \"") +
                         to_string(c.zero.reduce_dtype) +
                         "\", gather_dtype \"auto\"): set reduce_dtype \"int8\" / \"int4\" or gather_dtype "
                         "\"int8\", or remove the key";
                });
  check.require(!c.train.deterministic || (!quant_reduce && c.zero.gather_quant == WireQuant::kNone),
                {"train.deterministic", "zero.reduce_dtype", "zero.gather_dtype"}, [&] {
                  return "train.deterministic = true promises bit-identical results at any world size; quantized "
                         "communication (zero.reduce_dtype = \"" +
                         std::string(quant_reduce ? to_string(c.zero.reduce_quant) : to_string(c.zero.reduce_dtype)) +
                         "\", zero.gather_dtype = \"" + (c.zero.gather_quant == WireQuant::kNone ? "auto" : "int8") +
                         "\") rounds each rank's chunk with its own scales, which depends on the world size: "
                         "use one or the other";
                });
  // Sharded accumulation reduce-scatters into the owned gradient shard, which only stages
  // 2-3 have: refused elsewhere rather than silently ignored.
  check.require(c.zero.accumulate != GradAccumulation::kSharded || c.zero.stage >= 2,
                {"zero.accumulate", "zero.stage"}, [&] {
                  return "zero.accumulate = \"sharded\" needs zero.stage 2 or 3 (the gradient shard it "
                         "accumulates into); zero.stage is " + str(c.zero.stage) + ": use \"local\"";
                });
  check.require(c.checkpoint.every_steps == 0 || !c.checkpoint.dir.empty(),
                {"checkpoint.every_steps", "checkpoint.dir"}, [&] {
                  return "checkpoint.every_steps (" + str(c.checkpoint.every_steps) +
                         ") needs checkpoint.dir: where should the checkpoints go?";
                });
  check.require(!c.profile.kernels || c.profile.enabled, {"profile.kernels", "profile.enabled"}, [&] {
    return std::string("profile.kernels = true times kernels in profiling runs only: set profile.enabled = true too");
  });
  check.require(!c.profile.kernels || c.model.kind == ModelKind::kGpt, {"profile.kernels", "model.kind"}, [&] {
    return std::string("profile.kernels = true times the gpt model's kernel regions (what the planner's GPU step "
                       "model predicts); the mlp has none: leave it out");
  });
  // The learning rate the run uses: a batch-size rule scales it (EngineOptions::from), and
  // a scaled rate past optim.lr's bound was refused only inside the ranks, naming a value
  // no one typed.
  if (c.optim.lr_scaling != LrScalingRule::kNone && t.global_batch > 0) {
    const int64_t base = c.optim.base_batch > 0 ? c.optim.base_batch : t.global_batch;
    const StatusOr<double> scaled = optim::scale_lr(c.optim.lr, c.optim.lr_scaling, base, t.global_batch);
    check.require(!scaled.ok() || *scaled <= config_internal::kMaxLr,
                  {"optim.lr", "optim.lr_scaling", "optim.base_batch", "train.global_batch"}, [&] {
                    return "optim.lr (" + format_float(c.optim.lr) + ") scaled by optim.lr_scaling = \"" +
                           to_string(c.optim.lr_scaling) + "\" from optim.base_batch (" + str(base) +
                           ") to train.global_batch (" + str(t.global_batch) + ") is " + format_float(*scaled) +
                           ", above optim.lr's bound (" + format_float(config_internal::kMaxLr) + ")";
                  });
  }
  if (c.profile.enabled) {
    // Both are >= 0 (the key table): only the sum can overflow, and it wrapped below
    // train.steps (a profile that measured nothing).
    int64_t last = 0;
    if (__builtin_add_overflow(c.profile.warmup_steps, c.profile.active_steps, &last)) last = -1;
    check.require(c.profile.warmup_steps < t.steps, {"profile.warmup_steps", "train.steps", "profile.enabled"}, [&] {
      return "profile.warmup_steps (" + str(c.profile.warmup_steps) + ") leaves no step of train.steps (" +
             str(t.steps) + ") to measure";
    });
    check.require(last >= 0 && last <= t.steps,
                  {"profile.warmup_steps", "profile.active_steps", "train.steps", "profile.enabled"}, [&] {
                    return "profile.warmup_steps (" + str(c.profile.warmup_steps) + ") + profile.active_steps (" +
                           str(c.profile.active_steps) + ") = " + product_text(last) + " exceeds train.steps (" +
                           str(t.steps) + ")";
                  });
  }
  if (world_size <= 0 || t.micro_batch <= 0) return;

  const int64_t per_step = checked_mul(t.micro_batch, world_size);
  const bool divisible = per_step > 0 && t.global_batch % per_step == 0;
  if (t.accum_steps > 0 && !divisible) {
    // accum_steps given: one message with every factor of the global batch.
    const int64_t product = checked_mul(per_step, t.accum_steps);
    check.require(false, {"train.global_batch", "train.micro_batch", "train.accum_steps"}, [&] {
      return "train.global_batch (" + str(t.global_batch) + ") is not divisible by train.micro_batch (" +
             str(t.micro_batch) + ") x train.accum_steps (" + str(t.accum_steps) + ") x world size (" +
             str(world_size) + ") = " + product_text(per_step < 0 ? -1 : product) +
             "; it must equal that product";
    });
    return;
  }
  check.require(divisible, {"train.global_batch", "train.micro_batch"}, [&] {
    return "train.global_batch (" + str(t.global_batch) + ") is not divisible by train.micro_batch (" +
           str(t.micro_batch) + ") x world size (" + str(world_size) + ") = " + product_text(per_step);
  });
  // Deterministic mode sums the step's M = global_batch / micro_batch micro-batches in one
  // tree over their global index; a world size that does not divide M would change them.
  check.require(divisible || !t.deterministic, {"train.deterministic", "train.global_batch", "train.micro_batch"}, [&] {
    const int64_t m = t.global_batch / t.micro_batch;
    return "train.deterministic: world size " + str(world_size) + " does not divide the " + str(m) +
           " micro-batches of a step (train.global_batch / train.micro_batch); bit-identical results hold for "
           "world sizes that divide it";
  });
  if (divisible && t.accum_steps > 0) {
    const int64_t derived = t.global_batch / per_step;
    check.require(t.accum_steps == derived, {"train.accum_steps", "train.global_batch", "train.micro_batch"}, [&] {
      return "train.accum_steps (" + str(t.accum_steps) + ") does not match train.global_batch (" +
             str(t.global_batch) + ") / (train.micro_batch (" + str(t.micro_batch) + ") x world size (" +
             str(world_size) + ")) = " + str(derived);
    });
  }
}

}  // namespace config_internal

namespace {

// Every range and word of the selected keys (all of them for null `prefixes`), then the
// checks between them; world_size 0 skips those that need it.
Status check_config(const Config& config, int world_size, const std::vector<std::string>* prefixes) {
  std::vector<std::string> problems;
  // Range checks again: a Config may have been built or edited in code, not parsed.
  std::set<std::string> failed;
  for (const KeyInfo& k : config_internal::key_table()) {
    if (!selected(k.name, prefixes)) continue;
    const std::string problem = config_internal::check_value(k, k.get(config));
    if (!problem.empty()) {
      problems.push_back(config.where(k.name) + ": " + problem);
      failed.insert(k.name);
    }
  }
  if (prefixes == nullptr && world_size < 1) {
    problems.push_back(config.source + ": world size (" + std::to_string(world_size) + ") must be >= 1");
  }
  config_internal::cross_checks(config, world_size, failed, prefixes, &problems);
  if (problems.empty()) return Status::Ok();
  std::string message;
  for (const std::string& p : problems) message += (message.empty() ? "" : "\n") + p;
  return Status(StatusCode::kInvalidArgument, message);
}

}  // namespace

Status validate_for_world(const Config& config, int world_size) { return check_config(config, world_size, nullptr); }

Status validate_keys(const Config& config, const std::vector<std::string>& prefixes) {
  return check_config(config, 0, &prefixes);
}

int64_t resolved_accum_steps(const TrainConfig& train, int world_size) {
  if (train.accum_steps > 0) return train.accum_steps;
  return train.global_batch / (train.micro_batch * world_size);
}

int resolve_nproc_per_node(const LaunchConfig& launch, int cuda_device_count) {
  if (launch.nproc_per_node > 0) return launch.nproc_per_node;
  return cuda_device_count > 0 ? cuda_device_count : kCpuDefaultNprocPerNode;
}

Backend resolve_backend(Backend backend, bool ranks_use_cuda) {
  if (backend != Backend::kAuto) return backend;
  return ranks_use_cuda ? Backend::kNccl : Backend::kGloo;
}

}  // namespace zdp
