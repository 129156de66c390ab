// post_job_failed, stop_is_final, departed_nodes (job_stop.h).
#include "launcher/job_stop.h"

#include "zdp/launch_env.h"

namespace zdp::launcher {
namespace {

// The first launcher to add 1 here posts the job-failed reason.
constexpr const char* kJobFailedClaim = "zdp/job/failed_claim";

}  // namespace

void post_job_failed(Store& store, const std::string& reason, bool final) {
  if (final) (void)store.set(job_keys::kJobFinal, reason);
  StatusOr<int64_t> claim = store.add(kJobFailedClaim, 1);
  if (claim.ok() && *claim != 1) return;
  (void)store.set(job_keys::kJobFailed, reason);
}

bool stop_is_final(Store& store) {
  StatusOr<bool> final_stop = store.check({job_keys::kJobFinal});
  return !final_stop.ok() || *final_stop;
}

std::string departed_nodes(Store& store, int nnodes, int self) {
  std::string gone;
  for (int n = 1; n < nnodes; ++n) {
    if (n == self) continue;
    StatusOr<bool> done = store.check({job_keys::node_done(n)});
    if (done.ok() && *done) gone += (gone.empty() ? "" : ", ") + std::to_string(n);
  }
  return gone;
}

}  // namespace zdp::launcher
