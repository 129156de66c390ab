// JSON forms of the profiler's data: the compact form in which each rank sends its
// RankProfile to rank 0 through the store, and the readable per-step line of
// profile.jsonl (milliseconds, names instead of indices).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "profile/src/profile_data.h"
#include "zdp/status.h"

namespace zdp::profile {

// Round trip: rank_from_json(rank_to_json(p)) == p (doubles as JSON numbers keep their bits).
std::string rank_to_json(const RankProfile& profile);
// kInvalidArgument naming `what` (e.g. "rank 3's profile") when the text is not such a profile.
StatusOr<RankProfile> rank_from_json(const std::string& text, const std::string& what);

// One line of profile.jsonl: {"type":"step","rank","step","step_ms","parts_ms":{...},
// "comm_ms","exposed_comm_ms","compute_ms","memory":{category:{"current","peak"}},
// "collectives":[{"bucket","op","bytes","start_ms","end_ms","busbw_gbps"}]}, times from `origin`.
nlohmann::json step_line(const StepProfile& step, int rank, int world_size, double origin);

}  // namespace zdp::profile
