// How ranks tell their launcher how far the job has come, through the job's store (the
// channel they already share; a rank's console output stays for people). Rank 0 keeps
// one job record up to date (step, loss, rate, the whole run's ETA, what it is doing);
// every rank keeps its own (its step and its compute time per step), from which node 0's
// launcher tells a slow rank from one that stopped reporting. dp-train writes them
// (trainer/loop/progress_report.h); dp-launch reads them (launcher/progress_watch.h).
// Records are small JSON objects; decoding refuses anything malformed or oversized.
#pragma once

#include <cstdint>
#include <string>

#include "zdp/status.h"
#include "zdp/store.h"

namespace zdp {

// Rank 0's view of the whole job.
struct JobProgress {
  int64_t step = 0;           // optimizer steps done (a resumed run counts the saved ones)
  int64_t steps = 0;          // train.steps
  double loss = -1;           // the last step's mean loss over the global batch; < 0 unknown
  double tokens_per_s = 0;    // over the last logged step(s)
  double elapsed_s = 0;       // since this run's training loop began
  double eta_s = -1;          // the rest of the run, evaluations and checkpoints included; < 0 unknown
  std::string phase = "train";  // "train", "eval", "checkpoint" or "done"
};

// One rank's own record.
struct RankProgress {
  int64_t step = 0;
  double compute_s = 0;  // this rank's forward + backward per step (recent mean): a straggler's is larger
  std::string phase = "train";
};

inline constexpr size_t kMaxProgressRecord = 1024;

std::string encode_progress(const JobProgress& p);
std::string encode_progress(const RankProgress& p);
// kInvalidArgument naming what is wrong (not JSON, a missing or mistyped field, too long).
StatusOr<JobProgress> decode_job_progress(const std::string& text);
StatusOr<RankProgress> decode_rank_progress(const std::string& text);

// "1h02m", "3m07s", "42s" (rounded to the second), "?" for a negative or unknown time.
std::string format_eta(double seconds);

namespace job_keys {
// Rank 0's JobProgress (within the attempt's prefix, like the other job keys).
inline const char* const kProgress = "zdp/progress/job";
// Rank r's RankProgress.
std::string rank_progress(int rank);
}  // namespace job_keys

}  // namespace zdp
