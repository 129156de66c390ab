// check_startup_of (startup_check.h).
#include "launcher/startup_check.h"

#include <sstream>

#include "zdp/launch_env.h"

namespace zdp::launcher {
namespace {

bool is_set(Store& store, const std::string& key) {
  StatusOr<bool> set = store.check({key});
  return set.ok() && *set;
}

std::string seconds_text(std::chrono::milliseconds d) {
  std::ostringstream s;
  s << static_cast<double>(d.count()) / 1000.0 << " s";
  return s.str();
}

}  // namespace

StartupCheck check_startup_of(Store& store, const StartupInputs& in) {
  StartupCheck out;
  std::vector<std::string> ready;
  for (int r = 0; r < in.world_size; ++r) ready.push_back(job_keys::rank_ready(r));
  StatusOr<bool> all = store.check(ready);
  if (all.ok() && *all) {
    out.ready = true;
    return out;
  }
  // A rank gone before it was ready, in a job whose ranks use zdp's rendezvous (another
  // has joined): the others would wait for it until the deadline (120 s by default) and
  // then hear only that it "never reached the job store".
  for (const int r : in.exited_zero) {
    if (is_set(store, job_keys::rank_ready(r))) continue;
    bool others_joined = false;
    for (int q = 0; q < in.world_size && !others_joined; ++q) {
      others_joined = q != r && is_set(store, job_keys::rank_joined(q));
    }
    if (!others_joined) continue;
    out.failure = "rank " + std::to_string(r) + " (node " + std::to_string(in.node_rank) +
                  ") exited 0 before it joined the job (before zdp::init's rendezvous was done); "
                  "the other ranks wait for it";
    out.rank = r;
    return out;
  }
  if (in.elapsed < in.timeout) return out;
  // Name the culprits: ranks that never reached the store, apart from those that did
  // and are (most likely) waiting for them.
  std::string absent, waiting;
  bool local_absent = false;  // one of this node's own ranks never reached the store
  for (int r = 0; r < in.world_size; ++r) {
    StatusOr<bool> is_ready = store.check({job_keys::rank_ready(r)});
    if (!is_ready.ok() || *is_ready) continue;
    std::string& list = is_set(store, job_keys::rank_joined(r)) ? waiting : absent;
    list += (list.empty() ? "" : ", ") + std::to_string(r);
    if (&list == &absent) {
      for (const int local : in.local_ranks) local_absent |= local == r;
    }
  }
  std::string reason = "startup_timeout_s (" + seconds_text(in.timeout) + ") passed: ";
  if (!absent.empty()) reason += "rank(s) " + absent + " never reached the job store";
  if (!waiting.empty()) {
    reason += std::string(absent.empty() ? "" : "; ") + "rank(s) " + waiting +
              " reached it but did not finish the rendezvous";
  }
  if (in.note) {
    const std::string note = in.note();
    if (!note.empty()) reason += "; " + note;
  }
  // Only where this node's own rank never came: other nodes' are their launchers' doing.
  if (local_absent) reason += " (a program that does not call zdp::init needs launch.startup_timeout_s = 0)";
  out.failure = reason;
  return out;
}

}  // namespace zdp::launcher
