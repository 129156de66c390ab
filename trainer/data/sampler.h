// DistributedSampler semantics over a dataset of N samples: the training order is an
// endless stream of epochs, epoch e being a permutation of [0, N) drawn from (seed, e)
// (or the identity without shuffling). A run's data position is an index into
// that stream -- step s starts at s x global_batch -- so it resumes exactly at any world
// size. Within a step, rank r's micro-batch m is positions
//   s x B + (m x K + r) x micro .. + micro - 1
// so the ranks read disjoint parts of the global batch and every epoch is read exactly
// once by all ranks together.
#pragma once

#include <cstdint>
#include <vector>

#include "zdp/status.h"

namespace zdp::trainer {

// A bijection of [0, n) keyed by (seed, round): a 4-round Feistel network on the smallest
// even power of two >= n with cycle-walking, so any position is computed in O(1) time and
// memory, without materialising a permutation of 10^9 samples on every rank.
class Permutation {
 public:
  Permutation(int64_t n, uint64_t key);
  int64_t operator()(int64_t i) const;
  int64_t size() const { return n_; }

 private:
  uint64_t half(uint64_t v, int round) const;
  int64_t n_;
  uint64_t key_;
  int half_bits_ = 1;
};

struct SamplerOptions {
  int64_t dataset_size = 0;   // N, samples per epoch
  int64_t global_batch = 1;   // B = world_size x micro_batch x accum_steps
  int64_t micro_batch = 1;
  int world_size = 1;
  int rank = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  // Resuming: step `start_step` begins at global position `start_position` (what a
  // checkpoint stored), and each later step global_batch samples further on. Equal to
  // start_step x global_batch unless the global batch changed since the save.
  int64_t start_step = 0;
  int64_t start_position = 0;
  // The last step the run will read (train.steps); 0 = not known. With it, create()
  // refuses a run whose positions would pass kMaxPosition, so no position arithmetic of
  // the run can overflow.
  int64_t last_step = 0;
};

// The largest global stream position a sampler addresses (the checkpoint format's
// kMaxDataPosition): far beyond any dataset, far below int64's end.
inline constexpr int64_t kMaxPosition = int64_t{1} << 62;

class DistributedSampler {
 public:
  // kInvalidArgument naming every inconsistent value (B != K x micro x accum, a resume
  // position beyond kMaxPosition, a run whose last step would pass it, ...).
  static StatusOr<DistributedSampler> create(const SamplerOptions& options);

  // The dataset index at global stream position `position` (epoch position / N).
  // REQUIRES: 0 <= position <= kMaxPosition.
  int64_t index_at(int64_t position) const;
  // The epoch that position belongs to.
  int64_t epoch_of(int64_t position) const { return position / options_.dataset_size; }
  // Dataset indices of this rank's micro-batch `micro` of step `step` (both from 0).
  std::vector<int64_t> micro_batch(int64_t step, int64_t micro) const;
  // The global position where step `step` starts: what a checkpoint stores.
  int64_t position_of_step(int64_t step) const {
    return options_.start_position + (step - options_.start_step) * options_.global_batch;
  }
  int64_t accum_steps() const { return accum_; }
  const SamplerOptions& options() const { return options_; }

 private:
  DistributedSampler(SamplerOptions options, int64_t accum) : options_(options), accum_(accum) {}
  Permutation permutation(int64_t epoch) const;
  SamplerOptions options_;
  int64_t accum_;
};

}  // namespace zdp::trainer
