// Parameter groups by name pattern: which weight decay each parameter gets (e.g. none for
// "*.bias", "*norm*", "*ln_*" and "ln1" / "lnf" names, without case), turned into the sorted decay-segment table the fused kernels
// read by global element index.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/common.h"
#include "zdp/status.h"

namespace zdp::optim {

// Parameters whose name matches any of `patterns` (shell globs, fnmatch(3): '*' also
// crosses '.'; with `ignore_case`, FNM_CASEFOLD) get `weight_decay`.
struct ParamGroupRule {
  std::string name;  // for messages, e.g. "no_decay"
  std::vector<std::string> patterns;
  double weight_decay = 0.0;
  // The by-name rule only: a parameter's own forced rule (Decay::kNoDecay) must not reach
  // another whose name differs in case.
  bool ignore_case = false;
};

// The usual rule: no weight decay for biases and normalisation parameters.
ParamGroupRule no_decay_for_biases_and_norms();

// Where a parameter lives in the flat buffer (elements).
struct ParamExtent {
  std::string name;
  int64_t offset = 0;
  int64_t numel = 0;
};

class ParamGroups {
 public:
  // Rules are tried in order; the first that matches decides. Unmatched parameters get
  // `default_weight_decay`. kInvalidArgument for an empty pattern list or pattern, or a
  // negative / non-finite weight decay.
  static StatusOr<ParamGroups> create(double default_weight_decay, std::vector<ParamGroupRule> rules);

  // Index of the first matching rule, or -1 for the default group.
  int group_of(std::string_view param_name) const;
  double weight_decay_of(std::string_view param_name) const;
  double default_weight_decay() const { return default_weight_decay_; }
  const std::vector<ParamGroupRule>& rules() const { return rules_; }

  // The segments of `params` whose weight decay differs from the default, sorted, with
  // touching segments of equal decay merged. kInvalidArgument when extents overlap or
  // are negative.
  StatusOr<std::vector<kernels::DecaySegment>> decay_segments(std::vector<ParamExtent> params) const;

 private:
  ParamGroups(double default_weight_decay, std::vector<ParamGroupRule> rules)
      : default_weight_decay_(default_weight_decay), rules_(std::move(rules)) {}
  double default_weight_decay_;
  std::vector<ParamGroupRule> rules_;
};

}  // namespace zdp::optim
