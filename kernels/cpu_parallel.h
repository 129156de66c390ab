// How the CPU kernels split work: fixed-size blocks handed out statically over the OpenMP
// team (OMP_NUM_THREADS, set by the launcher), and runs of constant weight decay. Blocks
// are a whole number of cache lines, so two threads never write the same line.
// Internal to kernels/: only the CPU implementations include it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/common.h"
#include "kernels/philox.h"

namespace zdp::kernels::cpu {

// Elements per block: 64 KiB of fp32, big enough to amortise scheduling, small enough to
// balance 2-64 threads on the slices a rank owns.
inline constexpr int64_t kBlockElements = 16384;

// Calls fn(begin, end) for consecutive blocks of [0, count) on the OpenMP team. Below two
// blocks the work stays on the calling thread (a team costs more than it saves there).
template <typename Fn>
void parallel_blocks(int64_t count, int64_t block, Fn&& fn) {
  const int64_t num_blocks = (count + block - 1) / block;
#pragma omp parallel for schedule(static) if (num_blocks > 1)
  for (int64_t b = 0; b < num_blocks; ++b) {
    fn(b * block, std::min(count, (b + 1) * block));
  }
}

// Splits the local range [begin, end) of a slice starting at global index `offset` into
// runs of constant weight decay and calls fn(run_begin, run_end, weight_decay) for each,
// in order. Elements outside every segment get `default_decay`.
template <typename Fn>
void for_each_decay_run(const DecaySegment* segments, int64_t num, float default_decay, int64_t offset,
                        int64_t begin, int64_t end, Fn&& fn) {
  int64_t cursor = first_segment_ending_after(segments, num, offset + begin);
  int64_t i = begin;
  while (i < end) {
    if (cursor >= num) {
      fn(i, end, default_decay);
      return;
    }
    const int64_t seg_begin = segments[cursor].begin - offset, seg_end = segments[cursor].end - offset;
    if (i < seg_begin) {  // a gap before the next segment
      const int64_t stop = std::min(end, seg_begin);
      fn(i, stop, default_decay);
      i = stop;
      continue;
    }
    const int64_t stop = std::min(end, seg_end);
    fn(i, stop, segments[cursor].weight_decay);
    i = stop;
    ++cursor;
  }
}

// Elements whose stochastic-rounding bits are drawn per tile, ahead of the update loop,
// so that the loop itself stays a plain vectorisable pass.
inline constexpr int64_t kRandomTile = 512;

// The optimizer loop over the local range [begin, end): for each element i,
// p = update(i, gradient as fp32) (which also updates the optimizer state of i), then
// out[i] = p rounded into P (none when P is NoOutput). Stochastic rounding draws the
// bits of global index global_offset + i at `step`.
template <typename G, typename P, typename Update>
void update_loop(const G* __restrict grad, P* __restrict out, int64_t begin, int64_t end, Rounding rounding,
                 uint64_t seed, uint64_t step, int64_t global_offset, Update&& update) {
  if constexpr (std::is_same_v<P, NoOutput>) {
    for (int64_t i = begin; i < end; ++i) update(i, to_f32(grad[i]));
  } else if (rounding == Rounding::kNearest) {
    for (int64_t i = begin; i < end; ++i) out[i] = from_f32<P>(update(i, to_f32(grad[i])));
  } else {
    uint32_t bits[kRandomTile];
    for (int64_t t0 = begin; t0 < end; t0 += kRandomTile) {
      const int64_t len = std::min(kRandomTile, end - t0);
      const uint64_t first = static_cast<uint64_t>(global_offset + t0);
      for (uint64_t group = first / kRandomGroup; group * kRandomGroup < first + len; ++group) {
        const Philox4x32 r = random_group(seed, step, group);
        for (int lane = 0; lane < kRandomGroup; ++lane) {
          const int64_t k = static_cast<int64_t>(group * kRandomGroup + lane - first);
          if (k >= 0 && k < len) bits[k] = random_lane16(r, lane);
        }
      }
      for (int64_t k = 0; k < len; ++k) {
        out[t0 + k] = round_param<P>(update(t0 + k, to_f32(grad[t0 + k])), bits[k], Rounding::kStochastic);
      }
    }
  }
}

}  // namespace zdp::kernels::cpu
