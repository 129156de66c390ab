// The bounds of the config's values, in one place: each far past any real job, so that
// a typo is refused with its key at load (and at --dry-run) instead of overflowing,
// allocating without end or waiting forever later. The key table
// (runtime/src/config/config_keys.cc) applies them key by key, the cross checks
// (config_checks.cc) to products of keys, and the planner the model's to a profile's model
// (planner/kernel_profile_file.cc).
#pragma once

#include <cstdint>
#include <string>

namespace zdp::config_internal {

// Longer than a day, a timeout is a typo (1e300 s would overflow the milliseconds it is
// kept in); shorter than a millisecond, it rounds to 0, which means "no deadline".
constexpr double kMaxTimeoutS = 86400;
constexpr double kMinTimeoutS = 0.001;
// Whole-job restarts: past a thousand, a job that keeps failing is a loop, not a recovery
// (2^31 - 1 overflowed the attempt count the launcher prints).
constexpr int kMaxRestarts = 1000;
// 2^30 samples per step (a billion) is beyond any real batch; larger ones came from typos
// and made 4.6e18 accumulation steps.
constexpr double kMaxGlobalBatch = 1073741824;
// A synthetic epoch of 2^62 samples is more than any run reads (its data position stops
// at 2^62, the checkpoint format's bound); a larger one hung the sampler's shuffle.
constexpr double kMaxSyntheticSamples = 4611686018427387904.0;  // 2^62
// A job of more than 2^20 ranks (a million GPUs), or a node of more than 4096 ranks, is
// a typo: nproc_per_node x nnodes overflowed int and wrapped to 0 or below, which made
// dp-launch plan divide by zero.
constexpr int64_t kMaxWorldSize = int64_t{1} << 20;
constexpr int64_t kMaxRanksPerNode = 4096;
// "" for a job of `ranks` ranks within kMaxWorldSize; else what follows the caller's
// "a (..) x b (..)": " = 268435456 ranks, more than a job may have (1048576)" (a negative
// count is a product that overflowed int64).
inline std::string world_size_excess(int64_t ranks) {
  if (ranks >= 0 && ranks <= kMaxWorldSize) return "";
  return " = " + (ranks < 0 ? std::string("more than 9223372036854775807") : std::to_string(ranks)) +
         " ranks, more than a job may have (" + std::to_string(kMaxWorldSize) + ")";
}
// A learning rate above 1000 diverges at the first step with any optimizer here.
constexpr double kMaxLr = 1000;
// A model's shape, far past any model trained (the deepest have about a thousand layers,
// the widest a d_model near 2^15, vocabularies near 2^18, contexts of 2^20-2^23 tokens).
// Beyond them the model spec alone would not fit in memory: 2e9 layers made dp-train
// allocate for minutes and dp-launch plan end in std::bad_alloc. Their products are
// bounded too (config_checks.cc, "the model's size").
constexpr int64_t kMaxLayers = 65536;
constexpr int64_t kMaxWidth = int64_t{1} << 20;
constexpr int64_t kMaxHeads = 65536;
constexpr int64_t kMaxVocab = int64_t{1} << 30;
constexpr int64_t kMaxSeqLen = int64_t{1} << 24;
// The model's size across its keys: the models, the planner and the engine's layout
// multiply them (a d_model of 2^20 squared times 12 times 65536 layers overflows int64).
// More than 2^48 parameters, or a micro-batch keeping more than 2^50 activation values,
// is far past any device and any model trained.
constexpr double kMaxParams = 281474976710656.0;        // 2^48
constexpr double kMaxActivations = 1125899906842624.0;  // 2^50

}  // namespace zdp::config_internal
