// Batch-size rules: the learning rate follows the global batch. A config names the batch
// its learning rate was tuned for (base_batch); the run's global batch
// B = world_size x micro_batch x accum_steps then scales it, so changing the number of
// ranks or accumulation steps keeps the training dynamics comparable.
#pragma once

#include <cstdint>

#include "zdp/optim_config.h"
#include "zdp/status.h"

namespace zdp::optim {

// The learning rate for `global_batch`, from `base_lr` tuned at `base_batch`.
// kInvalidArgument (naming every value) when a batch is not positive (with kNone too, so
// that a bad config is caught whatever the rule) or base_lr is negative or not finite.
StatusOr<double> scale_lr(double base_lr, LrScalingRule scaling, int64_t base_batch, int64_t global_batch);

}  // namespace zdp::optim
