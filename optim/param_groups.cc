// Parameter groups by glob pattern and the decay-segment table (see optim/param_groups.h).
#include "optim/param_groups.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace zdp::optim {

// Matched without case (HF's "LayerNorm.weight", "RMSNorm"), with GPT-2's "ln_1" / "ln_f",
// the "ln1" / "lnf" of nanoGPT-style ports and llm.c's "ln1w" / "lnfb", and a bare "bias":
// models ported from HF, nanoGPT or llm.c had their norms decayed.
ParamGroupRule no_decay_for_biases_and_norms() {
  return ParamGroupRule{"no_decay",
                        {"*.bias", "bias", "*norm*", "*ln_*", "*ln[0-9f]", "*ln[0-9f].*", "*ln[0-9f][wb]"},
                        0.0,
                        /*ignore_case=*/true};
}

StatusOr<ParamGroups> ParamGroups::create(double default_weight_decay, std::vector<ParamGroupRule> rules) {
  auto bad_decay = [](double wd) { return !(wd >= 0.0) || !std::isfinite(wd); };
  if (bad_decay(default_weight_decay)) {
    return Status(StatusCode::kInvalidArgument,
                  "param groups: default weight_decay " + std::to_string(default_weight_decay) + " is not >= 0");
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    const ParamGroupRule& r = rules[i];
    const std::string where = "param group " + std::to_string(i) + " (\"" + r.name + "\")";
    if (r.patterns.empty()) return Status(StatusCode::kInvalidArgument, where + " has no patterns");
    for (const std::string& p : r.patterns) {
      if (p.empty()) return Status(StatusCode::kInvalidArgument, where + " has an empty pattern");
    }
    if (bad_decay(r.weight_decay)) {
      return Status(StatusCode::kInvalidArgument,
                    where + ": weight_decay " + std::to_string(r.weight_decay) + " is not >= 0");
    }
  }
  return ParamGroups(default_weight_decay, std::move(rules));
}

int ParamGroups::group_of(std::string_view param_name) const {
  const std::string name(param_name);  // fnmatch needs NUL-terminated strings
  for (size_t i = 0; i < rules_.size(); ++i) {
    for (const std::string& pattern : rules_[i].patterns) {
      if (fnmatch(pattern.c_str(), name.c_str(), rules_[i].ignore_case ? FNM_CASEFOLD : 0) == 0) {
        return static_cast<int>(i);
      }
    }
  }
  return -1;
}

double ParamGroups::weight_decay_of(std::string_view param_name) const {
  const int g = group_of(param_name);
  return g < 0 ? default_weight_decay_ : rules_[static_cast<size_t>(g)].weight_decay;
}

StatusOr<std::vector<kernels::DecaySegment>> ParamGroups::decay_segments(std::vector<ParamExtent> params) const {
  std::sort(params.begin(), params.end(), [](const ParamExtent& a, const ParamExtent& b) { return a.offset < b.offset; });
  std::vector<kernels::DecaySegment> segments;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamExtent& p = params[i];
    if (p.offset < 0 || p.numel < 0) {
      return Status(StatusCode::kInvalidArgument, "parameter \"" + p.name + "\" has a negative offset or size");
    }
    if (i > 0 && params[i - 1].offset + params[i - 1].numel > p.offset) {
      return Status(StatusCode::kInvalidArgument,
                    "parameters \"" + params[i - 1].name + "\" and \"" + p.name + "\" overlap in the flat buffer");
    }
    const double wd = weight_decay_of(p.name);
    if (p.numel == 0 || wd == default_weight_decay_) continue;
    const float wdf = static_cast<float>(wd);
    if (!segments.empty() && segments.back().end == p.offset && segments.back().weight_decay == wdf) {
      segments.back().end = p.offset + p.numel;  // e.g. a LayerNorm's weight followed by its bias
    } else {
      segments.push_back(kernels::DecaySegment{p.offset, p.offset + p.numel, wdf});
    }
  }
  return segments;
}

}  // namespace zdp::optim
