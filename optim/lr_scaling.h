// Batch-size rules: the learning rate follows the global batch. A config names the batch
// its learning rate was tuned for (base_batch); the run's global batch
// B = world_size x micro_batch x accum_steps then scales it, so changing the number of
// ranks or accumulation steps keeps the training dynamics comparable.
#pragma once

#include <cstdint>
#include <string_view>

#include "zdp/status.h"

namespace zdp::optim {

enum class LrScaling : uint8_t {
  kNone = 0,  // lr as configured, whatever the batch
  kLinear,    // lr * B / base_batch (Goyal et al. 2017, for SGD)
  kSqrt,      // lr * sqrt(B / base_batch) (Krizhevsky 2014; common for Adam)
};
const char* to_string(LrScaling scaling);
// "none" | "linear" | "sqrt"; kInvalidArgument naming the accepted values.
StatusOr<LrScaling> parse_lr_scaling(std::string_view text);

// The learning rate for `global_batch`, from `base_lr` tuned at `base_batch`.
// kInvalidArgument (naming every value) when a batch is not positive (with kNone too, so
// that a bad config is caught whatever the rule) or base_lr is negative or not finite.
StatusOr<double> scale_lr(double base_lr, LrScaling scaling, int64_t base_batch, int64_t global_batch);

}  // namespace zdp::optim
