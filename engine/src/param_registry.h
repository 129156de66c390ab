// The parameters a trainer registered (add_param): names, shapes, layer groups,
// initialisation and decay choices, in registration order; and finalize()'s check that
// every rank registered the same list with the same options.
#pragma once

#include <string>
#include <vector>

#include "engine/src/engine_env.h"
#include "engine/src/layout.h"
#include "zdp/engine.h"

namespace zdp {

struct Registration {
  ParamSpec spec;
  Init init;
  Decay decay = Decay::kByName;
};

class ParamRegistry {
 public:
  // kInvalidArgument (from `env`) for a taken name or a decreasing layer group.
  StatusOr<Param> add(const EngineEnv& env, const std::string& name, const std::vector<int64_t>& shape, Init init,
                      int layer, Decay decay);

  int size() const { return static_cast<int>(registered_.size()); }
  bool valid(int p) const { return p >= 0 && p < size(); }
  const Registration& at(int p) const { return registered_[static_cast<size_t>(p)]; }
  const std::vector<Registration>& all() const { return registered_; }
  std::vector<ParamSpec> specs() const;
  std::vector<std::string> names() const;
  // "'fc1.weight' [16, 8]", for messages.
  std::string label(int p) const;

  // Collective: every rank registered the same parameters with the same options that
  // shape the layout (checked against rank 0's list through the store, so the message
  // names both sides, on every rank). `own_options`: this rank's EngineOptions::validate(),
  // or the failure it deferred before finalize(); a rank where it is not OK is named on
  // every rank with its reason (the others only saw it leave, or waited out the timeout
  // while it lived on).
  Status check_same_on_every_rank(EngineEnv& env, const EngineOptions& options, const Status& own_options) const;

 private:
  std::vector<Registration> registered_;
};

}  // namespace zdp
