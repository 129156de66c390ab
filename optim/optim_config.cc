// The config words of the [optim] enums (zdp/optim_config.h).
#include "zdp/optim_config.h"

namespace zdp {

const char* to_string(OptimizerKind value) {
  switch (value) {
    case OptimizerKind::kAdamW: return "adamw";
    case OptimizerKind::kSgd: return "sgd";
  }
  return "?";
}

const char* to_string(LrSchedule value) {
  switch (value) {
    case LrSchedule::kConstant: return "constant";
    case LrSchedule::kCosine: return "cosine";
    case LrSchedule::kLinear: return "linear";
  }
  return "?";
}

const char* to_string(LrScalingRule value) {
  switch (value) {
    case LrScalingRule::kNone: return "none";
    case LrScalingRule::kLinear: return "linear";
    case LrScalingRule::kSqrt: return "sqrt";
  }
  return "?";
}

const char* to_string(ParamRounding value) {
  switch (value) {
    case ParamRounding::kNearest: return "nearest";
    case ParamRounding::kStochastic: return "stochastic";
  }
  return "?";
}

}  // namespace zdp
