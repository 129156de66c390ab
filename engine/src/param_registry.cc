// ParamRegistry: add_param's list and the cross-rank registration check of finalize().
#include "engine/src/param_registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/internal/printable.h"
#include "core/internal/utf8.h"
#include "engine/src/host_collective.h"
#include "zdp/store.h"

namespace zdp {
namespace {

// The largest layer group a parameter may name (far beyond any model's layers).
constexpr int kMaxLayerGroup = 1 << 30;

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

StatusOr<Param> ParamRegistry::add(const EngineEnv& env, const std::string& name, const std::vector<int64_t>& shape,
                                   Init init, int layer, Decay decay) {
  // Refused here, naming the parameter, as api.md says (they reached finalize() before).
  const std::string call = "add_param('" + printable(name) + "' " + format_shape(shape) + ")";
  if (name.empty()) return env.invalid(call + ": the name is empty");
  // The name is a checkpoint's tensor name (a safetensors JSON key): every save of a run
  // that registered one of these failed, after the training it was to keep.
  if (name == "__metadata__") return env.invalid(call + ": the name is safetensors' reserved key");
  for (size_t i = 0; i < name.size();) {
    const size_t n = utf8_sequence_length(name, i);
    if (n == 0) return env.invalid(call + ": the name is not UTF-8 (byte " + std::to_string(i) + ")");
    // Control characters: the registration check compares ranks' names line by line (a
    // newline in one made every rank report a mismatch), and logs print them raw.
    if (n == 1 && (static_cast<unsigned char>(name[i]) < 0x20 || name[i] == 0x7f)) {
      return env.invalid(call + ": the name holds a control character (byte " + std::to_string(i) + ")");
    }
    i += n;
  }
  if (shape.empty()) return env.invalid(call + ": the shape has no dimension");
  for (const int64_t d : shape) {
    if (d < 1) return env.invalid(call + ": dimension " + std::to_string(d) + " is not positive");
  }
  // Bounded: the layout counts groups as layer + 1 (INT_MAX overflowed).
  if (layer < 0 || layer > kMaxLayerGroup) {
    return env.invalid(call + ": layer group " + std::to_string(layer) + " is not in [0, " +
                       std::to_string(kMaxLayerGroup) + "]");
  }
  const bool finite = std::isfinite(init.a) && std::isfinite(init.b);
  if (!finite || (init.kind == Init::Kind::kNormal && init.a < 0) ||
      (init.kind == Init::Kind::kUniform && init.a > init.b)) {
    return env.invalid(call + ": init (" + std::to_string(init.a) + ", " + std::to_string(init.b) +
                       ") is not a finite constant, a normal with std >= 0, or a uniform with low <= high");
  }
  if (!registered_.empty() && layer < registered_.back().spec.layer) {
    return env.invalid("add_param('" + name + "'): layer group " + std::to_string(layer) + " after '" +
                       registered_.back().spec.name + "' in layer group " +
                       std::to_string(registered_.back().spec.layer) +
                       " (layer groups must not decrease in registration order)");
  }
  for (size_t i = 0; i < registered_.size(); ++i) {
    if (registered_[i].spec.name == name) {
      return env.invalid("add_param('" + name + "'): the name is taken by parameter #" + std::to_string(i));
    }
  }
  registered_.push_back(Registration{ParamSpec{name, shape, layer}, init, decay});
  return Param{size() - 1};
}

std::vector<ParamSpec> ParamRegistry::specs() const {
  std::vector<ParamSpec> out;
  for (const Registration& r : registered_) out.push_back(r.spec);
  return out;
}

std::vector<std::string> ParamRegistry::names() const {
  std::vector<std::string> out;
  for (const Registration& r : registered_) out.push_back(r.spec.name);
  return out;
}

std::string ParamRegistry::label(int p) const {
  const ParamSpec& s = at(p).spec;
  return "'" + s.name + "' " + format_shape(s.shape);
}

namespace {

// Every option that decides what a rank computes or communicates, one "key = value" line
// each (doubles to 17 digits: they round-trip). Only the layout's options were compared:
// ranks with another optim.lr trained apart without a word, and ranks with another
// zero.accumulate issued other collectives and hung. Left out: trace (recording only).
std::vector<std::string> option_lines(const EngineOptions& o) {
  auto num = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    return std::string(buf);
  };
  auto i64 = [](int64_t v) { return std::to_string(v); };
  auto flag = [](bool v) { return std::string(v ? "true" : "false"); };
  const ZeroConfig& z = o.zero;
  const OptimConfig& p = o.optim;
  const LossScaleOptions& l = o.loss_scale;
  return {
      "zero.stage = " + i64(z.stage),
      "zero.bucket_mb = " + num(z.bucket_mb),
      "zero.reduce_dtype = " + std::string(to_string(z.reduce_dtype)) + " (wire " + to_string(z.reduce_quant) + ")",
      "zero.error_feedback = " + flag(z.error_feedback),
      "zero.gather_dtype wire = " + std::string(to_string(z.gather_quant)),
      "zero.compress = " + std::string(to_string(z.compress)),
      "zero.overlap = " + flag(z.overlap),
      "zero.prefetch_layers = " + i64(z.prefetch_layers),
      "zero.accumulate = " + std::string(to_string(z.accumulate)),
      "compute dtype = " + std::string(to_string(o.compute_dtype)),
      "overlap_param_gather = " + flag(o.overlap_param_gather),
      "accum_steps = " + i64(o.accum_steps),
      "optim.name = " + std::string(to_string(p.name)),
      "optim.lr = " + num(p.lr),
      "optim.beta1 = " + num(p.beta1),
      "optim.dampening = " + num(p.dampening),
      "optim.nesterov = " + flag(p.nesterov),
      "optim.beta2 = " + num(p.beta2),
      "optim.eps = " + num(p.eps),
      "optim.weight_decay = " + num(p.weight_decay),
      "optim.grad_clip = " + num(p.grad_clip),
      "optim.schedule = " + std::string(to_string(p.schedule)),
      "optim.warmup_steps = " + i64(p.warmup_steps),
      "optim.min_lr = " + num(p.min_lr),
      "optim.lr_scaling = " + std::string(to_string(p.lr_scaling)),
      "optim.base_batch = " + i64(p.base_batch),
      "optim.rounding = " + std::string(to_string(p.rounding)),
      "total_steps = " + i64(o.total_steps),
      "global_batch = " + i64(o.global_batch),
      "seed = " + i64(o.seed),
      "loss_scale = " + num(l.initial) + ", growth every " + i64(l.growth_interval) + " x " + num(l.growth_factor) +
          ", backoff " + num(l.backoff) + ", min " + num(l.min_scale),
      "deterministic = " + flag(o.deterministic),
      // Sizes stage 3's gather pool, and with it which layer groups stay gathered.
      "nested_layer_scopes = " + i64(o.nested_layer_scopes),
  };
}

}  // namespace

namespace {
// check_same_on_every_rank's mark (where[] holds it + 1) for a rank whose options failed
// validate() or that failed before finalize(): below -1, which stands for "no difference".
constexpr int64_t kInvalidOptions = -2;
}  // namespace

Status ParamRegistry::check_same_on_every_rank(EngineEnv& env, const EngineOptions& opt,
                                               const Status& own_options) const {
  // The options first, one entry each; then parameter i.
  std::vector<std::string> mine = option_lines(opt);
  const size_t options = mine.size();
  for (size_t i = 0; i < registered_.size(); ++i) {
    const Registration& r = registered_[i];
    mine.push_back(label(static_cast<int>(i)) + " layer " + std::to_string(r.spec.layer) + " decay " +
                   to_string(r.decay));
  }
  if (env.world == 1) return own_options.ok() ? own_options : own_options.with_context(env.who + ": finalize");

  PrefixStore store("zdp/engine/" + std::to_string(env.instance), env.ctx.store());
  std::string joined;
  for (const std::string& line : mine) joined += line + "\n";
  if (env.rank == 0) ZDP_RETURN_IF_ERROR(store.set("registration", joined));
  StatusOr<std::string> theirs_text = store.get("registration", env.timeout);
  if (!theirs_text.ok()) return theirs_text.status().with_context(env.who + ": finalize: rank 0's parameter list");
  const std::vector<std::string> theirs = split_lines(*theirs_text);

  auto entry = [&](const std::vector<std::string>& list, size_t i) {
    return i < list.size() ? list[i]
                           : "nothing (" + std::to_string(list.size() - options) + " parameters in all)";
  };
  int64_t diff = -1;
  for (size_t i = 0; i < std::max(mine.size(), theirs.size()); ++i) {
    if (i >= mine.size() || i >= theirs.size() || mine[i] != theirs[i]) {
      diff = static_cast<int64_t>(i);
      break;
    }
  }
  if (!own_options.ok()) {
    diff = kInvalidOptions;
    ZDP_RETURN_IF_ERROR(store.set("differs/" + std::to_string(env.rank), own_options.message()));
  } else if (diff >= 0) {
    ZDP_RETURN_IF_ERROR(store.set("differs/" + std::to_string(env.rank), entry(mine, static_cast<size_t>(diff))));
  }

  // Every rank learns which ranks differ, and where, so all of them stop with one story.
  std::vector<int64_t> where(static_cast<size_t>(env.world), 0);
  where[static_cast<size_t>(env.rank)] = diff + 1;
  ZDP_RETURN_IF_ERROR(all_reduce_i64(env, where, ReduceOp::kSum, "finalize: registration check"));
  for (int q = 0; q < env.world; ++q) {
    const int64_t d = where[static_cast<size_t>(q)] - 1;
    if (d == -1) continue;
    StatusOr<std::string> other = store.get("differs/" + std::to_string(q), env.timeout);
    const std::string theirs_entry = other.ok() ? *other : "(unknown: " + other.status().message() + ")";
    if (d == kInvalidOptions) {
      if (q == env.rank) return own_options.with_context(env.who + ": finalize");
      return Status(StatusCode::kAborted,
                    env.who + ": finalize: rank " + std::to_string(q) + " cannot finalize: " + theirs_entry);
    }
    const std::string what =
        d < static_cast<int64_t>(options)
            ? "engine options differ between ranks"
            : "parameter registration differs between ranks at parameter #" +
                  std::to_string(d - static_cast<int64_t>(options));
    return Status(StatusCode::kInvalidArgument, env.who + ": finalize: " + what + ": rank 0 has " +
                                                    entry(theirs, static_cast<size_t>(d)) + ", rank " +
                                                    std::to_string(q) + " has " + theirs_entry);
  }
  return Status::Ok();
}

}  // namespace zdp
