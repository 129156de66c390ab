// The Chrome trace / Perfetto JSON of a profiling run (Trace Event Format): one process
// per rank (pid = rank) with two threads, "compute" (tid 0: one "step N" event holding the
// step's parts) and "comm" (tid 1: one event per bucket collective with its bucket, bytes
// and bus bandwidth). Open it in ui.perfetto.dev or chrome://tracing.
#pragma once

#include <string>
#include <vector>

#include "profile/src/profile_data.h"

namespace zdp::profile {

inline constexpr int kComputeTid = 0;
inline constexpr int kCommTid = 1;

// Where `rank`'s times start (steady_clock seconds): the first measured step's start, the
// earliest over all ranks when they share one host (one steady clock, so skew between
// ranks shows), else the rank's own (clocks of different hosts are not comparable).
double time_origin(const std::vector<RankProfile>& ranks, const RankProfile& rank);

// Times in microseconds from time_origin().
std::string chrome_trace(const std::vector<RankProfile>& ranks, int world_size);

}  // namespace zdp::profile
