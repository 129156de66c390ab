// ParamRegistry: add_param's list and the cross-rank registration check of finalize().
#include "engine/src/param_registry.h"

#include <algorithm>
#include <sstream>

#include "engine/src/host_collective.h"
#include "zdp/store.h"

namespace zdp {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

StatusOr<Param> ParamRegistry::add(const EngineEnv& env, const std::string& name, const std::vector<int64_t>& shape,
                                   Init init, int layer, Decay decay) {
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

Status ParamRegistry::check_same_on_every_rank(EngineEnv& env, const EngineOptions& opt) const {
  // Entry 0 is the options that shape the layout; entry i + 1 is parameter i.
  std::vector<std::string> mine;
  mine.push_back("options: stage " + std::to_string(opt.zero.stage) + ", compute " + to_string(opt.compute_dtype) +
 ", reduce " + to_string(opt.zero.reduce_dtype) + " (wire " + to_string(opt.zero.reduce_quant) +
                 ", gather " + to_string(opt.zero.gather_quant) + ", " + to_string(opt.zero.compress) + ")" +
                 ", accum_steps " + std::to_string(opt.accum_steps) +
                 ", bucket_mb " + std::to_string(opt.zero.bucket_mb));
  for (size_t i = 0; i < registered_.size(); ++i) {
    const Registration& r = registered_[i];
    mine.push_back(label(static_cast<int>(i)) + " layer " + std::to_string(r.spec.layer) + " decay " +
                   to_string(r.decay));
  }
  if (env.world == 1) return Status::Ok();

  PrefixStore store("zdp/engine/" + std::to_string(env.instance), env.ctx.store());
  std::string joined;
  for (const std::string& line : mine) joined += line + "\n";
  if (env.rank == 0) ZDP_RETURN_IF_ERROR(store.set("registration", joined));
  StatusOr<std::string> theirs_text = store.get("registration", env.timeout);
  if (!theirs_text.ok()) return theirs_text.status().with_context(env.who + ": finalize: rank 0's parameter list");
  const std::vector<std::string> theirs = split_lines(*theirs_text);

  auto entry = [](const std::vector<std::string>& list, size_t i) {
    return i < list.size() ? list[i] : "nothing (" + std::to_string(list.size() - 1) + " parameters in all)";
  };
  int64_t diff = -1;
  for (size_t i = 0; i < std::max(mine.size(), theirs.size()); ++i) {
    if (i >= mine.size() || i >= theirs.size() || mine[i] != theirs[i]) {
      diff = static_cast<int64_t>(i);
      break;
    }
  }
  if (diff >= 0)
    ZDP_RETURN_IF_ERROR(store.set("differs/" + std::to_string(env.rank), entry(mine, static_cast<size_t>(diff))));

  // Every rank learns which ranks differ, and where, so all of them stop with one story.
  std::vector<int64_t> where(static_cast<size_t>(env.world), 0);
  where[static_cast<size_t>(env.rank)] = diff + 1;
  ZDP_RETURN_IF_ERROR(all_reduce_i64(env, where, ReduceOp::kSum, "finalize: registration check"));
  for (int q = 0; q < env.world; ++q) {
    const int64_t d = where[static_cast<size_t>(q)] - 1;
    if (d < 0) continue;
    StatusOr<std::string> other = store.get("differs/" + std::to_string(q), env.timeout);
    const std::string theirs_entry = other.ok() ? *other : "(unknown: " + other.status().message() + ")";
    const std::string what =
        d == 0 ? "engine options differ between ranks"
               : "parameter registration differs between ranks at parameter #" + std::to_string(d - 1);
    return Status(StatusCode::kInvalidArgument, env.who + ": finalize: " + what + ": rank 0 has " +
                                                    entry(theirs, static_cast<size_t>(d)) + ", rank " +
                                                    std::to_string(q) + " has " + theirs_entry);
  }
  return Status::Ok();
}

}  // namespace zdp
