// How the CPU kernels split work: fixed-size blocks handed out statically over the OpenMP
// team (OMP_NUM_THREADS, set by the launcher), and runs of constant weight decay. Blocks
// are a whole number of cache lines, so two threads never write the same line.
// Internal to kernels/: only the CPU implementations include it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/common.h"
#include "kernels/philox.h"
#include "kernels/slice_update.h"

// On x86-64 the hot loops are compiled twice, for AVX2 and for the baseline (SSE2), and
// the loader picks one per machine (GCC/Clang target_clones: an ifunc). The operations are
// the same IEEE ones either way (no FMA: -ffp-contract=off), so the bits are too. The
// attribute goes on a function called inside the OpenMP region, not on the one holding the
// pragma: the region's body is outlined into a function of its own, which is not cloned.
// Helpers called from a cloned function are forced inline (ZDP_CPU_INLINE), so that they
// are compiled for the clone's target too. Not under ThreadSanitizer: the ifunc resolver
// runs while the loader relocates, before the TSan runtime exists, and its instrumented
// entry crashed every TSan test binary at start (scripts/sanitize.sh tsan).
#if defined(__SANITIZE_THREAD__)
#define ZDP_NO_CPU_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ZDP_NO_CPU_CLONES 1
#endif
#endif
// GCC only: clang 14 refuses target_clones on function templates, which these are.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(ZDP_NO_CPU_CLONES)
#define ZDP_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#define ZDP_CPU_INLINE __attribute__((always_inline)) inline
#else
#define ZDP_CPU_CLONES
#define ZDP_CPU_INLINE inline
#endif

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

// bits[k] = random16(seed, step, first + k) for k < len: whole groups of 8 in a plain loop
// (it vectorises across groups), the partial groups at either end element by element.
ZDP_CPU_INLINE void fill_random_bits(uint64_t seed, uint64_t step, uint64_t first, int64_t len, uint32_t* bits) {
  const uint64_t end = first + static_cast<uint64_t>(len);
  const uint64_t group_begin = (first + kRandomGroup - 1) / kRandomGroup, group_end = end / kRandomGroup;
  if (group_begin >= group_end) {  // no whole group
    for (int64_t k = 0; k < len; ++k) bits[k] = random16(seed, step, first + static_cast<uint64_t>(k));
    return;
  }
  const int64_t head = static_cast<int64_t>(group_begin * kRandomGroup - first);
  for (int64_t k = 0; k < head; ++k) bits[k] = random16(seed, step, first + static_cast<uint64_t>(k));
  uint32_t* whole = bits + head;
  const int64_t groups = static_cast<int64_t>(group_end - group_begin);
  for (int64_t g = 0; g < groups; ++g) {
    const Philox4x32 r = random_group(seed, step, group_begin + static_cast<uint64_t>(g));
    for (int w = 0; w < 4; ++w) {
      whole[g * kRandomGroup + 2 * w] = r.v[w] & 0xffffu;
      whole[g * kRandomGroup + 2 * w + 1] = r.v[w] >> 16;
    }
  }
  for (int64_t k = head + groups * kRandomGroup; k < len; ++k) {
    bits[k] = random16(seed, step, first + static_cast<uint64_t>(k));
  }
}

// The optimizer loop over the local range [begin, end): for each element i,
// p = update(i, gradient as fp32) (which also updates the optimizer state of i), then
// out[i] = p rounded into P (none when P is NoOutput). Stochastic rounding draws the
// bits of global index global_offset + i at `step`.
template <typename G, typename P, typename Update>
ZDP_CPU_INLINE void update_loop(const G* __restrict grad, P* __restrict out, int64_t begin, int64_t end, Rounding rounding,
                 uint64_t seed, uint64_t step, int64_t global_offset, Update&& update) {
  if constexpr (std::is_same_v<P, NoOutput>) {
    for (int64_t i = begin; i < end; ++i) update(i, to_f32(grad[i]));
  } else if (rounding == Rounding::kNearest) {
    for (int64_t i = begin; i < end; ++i) out[i] = from_f32<P>(update(i, to_f32(grad[i])));
  } else {
    uint32_t bits[kRandomTile];
    for (int64_t t0 = begin; t0 < end; t0 += kRandomTile) {
      const int64_t len = std::min(kRandomTile, end - t0);
      fill_random_bits(seed, step, static_cast<uint64_t>(global_offset + t0), len, bits);
      for (int64_t k = 0; k < len; ++k) {
        out[t0 + k] = round_param<P>(update(t0 + k, to_f32(grad[t0 + k])), bits[k], Rounding::kStochastic);
      }
    }
  }
}

// update_loop over the slice of `a`: its gradient, output, rounding and stochastic-rounding key.
template <typename G, typename P, typename Update>
ZDP_CPU_INLINE void update_loop(const SliceUpdateArgs& a, int64_t begin, int64_t end, Update&& update) {
  update_loop(static_cast<const G*>(a.grad), static_cast<P*>(a.param_out), begin, end, a.rounding, a.seed,
              static_cast<uint64_t>(a.step), a.global_offset, std::forward<Update>(update));
}

// The CPU update of one slice, the same for every optimizer: checks the decay table, then
// calls run(G{}, P{}, begin, end, weight_decay) for each run of constant weight decay in
// each block, on the OpenMP team, with the gradient and output storage types (P = NoOutput
// without param_out). `run` is the optimizer's own loop (a ZDP_CPU_CLONES function).
template <typename Run>
Status update_slice(const SliceUpdateArgs& a, const char* op, Run&& run) {
  ZDP_RETURN_IF_ERROR(validate_segments(a.segments, a.num_segments));
  if (a.count == 0) return Status::Ok();
  return dispatch_update_types(a, op, [&](auto g, auto p) -> Status {
    parallel_blocks(a.count, kBlockElements, [&](int64_t begin, int64_t end) {
      for_each_decay_run(a.segments, a.num_segments, a.weight_decay, a.global_offset, begin, end,
                         [&](int64_t b, int64_t e, float wd) { run(g, p, b, e, wd); });
    });
    return Status::Ok();
  });
}

}  // namespace zdp::kernels::cpu
