// Permutation (keyed Feistel network) and the DistributedSampler position arithmetic.
#include "trainer/data/sampler.h"

#include <string>

namespace zdp::trainer {
namespace {

// SplitMix64's finaliser: a well-mixed 64-bit hash, the round function of the network.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr int kRounds = 4;  // Luby-Rackoff: 4 rounds of a good function look random

}  // namespace

Permutation::Permutation(int64_t n, uint64_t key) : n_(n), key_(mix(key)) {
  // The smallest 4^h >= n; h = 32 (the whole uint64 range) holds any int64 n. Without the
  // cap, n above 2^62 shifted 1 by 64, which is undefined (on x86 a shift by 0: the loop
  // never ended and every rank hung before its first step).
  while (half_bits_ < 32 && (uint64_t{1} << (2 * half_bits_)) < static_cast<uint64_t>(n_)) ++half_bits_;
}

uint64_t Permutation::half(uint64_t v, int round) const {
  return mix(key_ ^ mix(v + (static_cast<uint64_t>(round) << 56))) & ((uint64_t{1} << half_bits_) - 1);
}

int64_t Permutation::operator()(int64_t i) const {
  // Only [0, n) is permuted; anything else would walk the cycle forever.
  if (i < 0 || i >= n_) i = static_cast<int64_t>(static_cast<uint64_t>(i) % static_cast<uint64_t>(n_));
  // Each Feistel pass is a bijection of [0, 4^h); walking the cycle until the value falls
  // inside [0, n) restricts it to a bijection of [0, n). Since 4^h < 4n, a walk takes
  // fewer than 4 passes on average.
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t x = static_cast<uint64_t>(i);
  do {
    uint64_t left = x >> half_bits_, right = x & mask;
    for (int r = 0; r < kRounds; ++r) {
      const uint64_t next = left ^ half(right, r);
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

StatusOr<DistributedSampler> DistributedSampler::create(const SamplerOptions& o) {
  std::string bad;
  auto add = [&](const std::string& what) { bad += (bad.empty() ? "" : "; ") + what; };
  if (o.dataset_size < 1) add("dataset size " + std::to_string(o.dataset_size) + " is not >= 1");
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    add("rank " + std::to_string(o.rank) + " is not in [0, world size " + std::to_string(o.world_size) + ")");
  }
  if (o.micro_batch < 1) add("micro_batch " + std::to_string(o.micro_batch) + " is not >= 1");
  const int64_t per_micro = o.micro_batch * o.world_size;
  if (o.micro_batch >= 1 && o.world_size >= 1 && (o.global_batch < 1 || o.global_batch % per_micro != 0)) {
    add("global_batch (" + std::to_string(o.global_batch) + ") is not a positive multiple of micro_batch (" +
        std::to_string(o.micro_batch) + ") x world size (" + std::to_string(o.world_size) + ")");
  }
  if (o.start_step < 0 || o.start_position < 0) {
    add("resume point (step " + std::to_string(o.start_step) + ", position " + std::to_string(o.start_position) +
        ") is negative");
  } else if (o.start_position > kMaxPosition) {
    add("resume position " + std::to_string(o.start_position) + " is beyond 2^62, the last position a run can read");
  } else if (o.last_step > o.start_step && o.global_batch >= 1) {
    // The position after the last step (steps start_step .. last_step - 1 are read; the
    // final checkpoint stores this one), in checked arithmetic: the config's bound on
    // train.steps x train.global_batch is the same.
    int64_t span = 0, end = 0;
    if (__builtin_mul_overflow(o.last_step - o.start_step, o.global_batch, &span) ||
        __builtin_add_overflow(o.start_position, span, &end) || end > kMaxPosition) {
      add("steps " + std::to_string(o.start_step) + " to " + std::to_string(o.last_step) + " of global_batch " +
          std::to_string(o.global_batch) + " from position " + std::to_string(o.start_position) +
          " would read beyond position 2^62");
    }
  }
  if (!bad.empty()) return Status(StatusCode::kInvalidArgument, "sampler: " + bad);
  return DistributedSampler(o, o.global_batch / per_micro);
}

Permutation DistributedSampler::permutation(int64_t epoch) const {
  return Permutation(options_.dataset_size, options_.seed * 0x100000001B3ull + static_cast<uint64_t>(epoch));
}

int64_t DistributedSampler::index_at(int64_t position) const {
  const int64_t within = position % options_.dataset_size;
  return options_.shuffle ? permutation(epoch_of(position))(within) : within;
}

std::vector<int64_t> DistributedSampler::micro_batch(int64_t step, int64_t micro) const {
  const int64_t first =
      position_of_step(step) + (micro * options_.world_size + options_.rank) * options_.micro_batch;
  std::vector<int64_t> out(static_cast<size_t>(options_.micro_batch));
  for (int64_t k = 0; k < options_.micro_batch; ++k) out[static_cast<size_t>(k)] = index_at(first + k);
  return out;
}

}  // namespace zdp::trainer
