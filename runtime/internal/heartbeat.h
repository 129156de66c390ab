// The liveness channel between ranks and launchers: every rank publishes a heartbeat
// (job_keys::heartbeat) through the job store every beat, independent of collective
// timeouts; each launcher watches its ranks' (launcher/liveness.h). A heartbeat that
// stops names a stopped or frozen rank within launch.heartbeat_timeout_s; the progress
// it carries names where each rank is (step, collective) and catches ranks that issue
// different collectives.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "zdp/comm.h"
#include "zdp/status.h"

namespace zdp {

// At the start of `step`, a rank had issued `issued` collectives with this fingerprint.
struct StepMark {
  int64_t step = 0;
  uint64_t issued = 0;
  uint64_t fingerprint = 0;
};

// One of the last collectives a rank issued: ranks compare these at equal numbers.
struct RecentCollective {
  uint64_t seq = 0;
  uint64_t signature = 0;
  std::string text;  // CollectiveDesc::describe()
};

struct HeartbeatRecord {
  uint64_t beat = 0;      // counts up every publication: the launcher notes when it changed
  int64_t pid = 0;
  std::string host;
  double interval_s = 1;  // how often this rank publishes
  int64_t step = -1;      // Context::set_step; -1 until the trainer sets it
  bool has_comm = false;  // false before the communicator exists
  CommProgress comm;      // `current` is meaningful when comm.in_flight
  std::string current;    // comm.current.describe(), for reports
  uint64_t current_signature = 0;
  std::vector<StepMark> marks;  // the last few step boundaries, oldest first
  std::vector<RecentCollective> recent;  // the last few collectives issued, oldest first
  static constexpr size_t kRecent = 8;
};

// "key=value" lines; values never contain a newline.
std::string encode_heartbeat(const HeartbeatRecord& record);
// kInvalidArgument for text that is not a heartbeat (bounded: at most 4 KiB is read).
StatusOr<HeartbeatRecord> decode_heartbeat(const std::string& text);

// The heartbeat interval for a heartbeat timeout: a tenth of it, within 0.05 .. 1 s, so
// that a timeout spans at least ten beats.
std::chrono::milliseconds heartbeat_interval(std::chrono::milliseconds timeout);

// "rank 0 (pid 123, host h)"
std::string describe_rank(int rank, const HeartbeatRecord& record);
// Where the rank is: "in step 41, at reduce_scatter #312 (...) for 12.0 s" or
// "in step 41, between collectives (#311 finished 2.0 s ago)".
std::string describe_position(const HeartbeatRecord& record);

}  // namespace zdp

namespace zdp::heartbeat_keys {
// Within the attempt's prefix: rank r's heartbeat, the mark a rank sets once it has
// printed its flight recorder after the job-failed key appeared, and the mark its node's
// launcher sets when it exited 0, or the rank itself when it released its Context (its
// heartbeat stopped for good: no stall, no culprit).
std::string beat(int rank);
std::string flight_printed(int rank);
std::string exited(int rank);
}  // namespace zdp::heartbeat_keys
