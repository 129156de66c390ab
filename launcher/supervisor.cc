// run_group: spawn, pump output, poll exits, enforce the startup deadline, watch the
// job-failed key, and stop everything on the first problem.
#include "launcher/supervisor.h"

#include <signal.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "launcher/liveness.h"
#include "launcher/output_pump.h"
#include "launcher/progress_watch.h"
#include "launcher/startup_check.h"
#include "launcher/terminal.h"
#include "runtime/internal/lifeline.h"
#include "zdp/launch_env.h"
#include "zdp/log.h"

namespace zdp::launcher {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(50);
constexpr auto kStoreCheckInterval = std::chrono::milliseconds(250);
// Before stopping the ranks, give them this long to print their flight recorders.
constexpr auto kFlightRecordWait = std::chrono::seconds(2);
// How long a rank may take to go after SIGKILL before the launcher stops waiting for it.
constexpr auto kKillWait = std::chrono::milliseconds(10000);
// How long a node waits for another node's word on the job-failed key before it blames
// its own rank that exited with an error: a rank killed on another node makes its peers
// here fail within milliseconds, and that node's launcher posts the cause right after.
constexpr auto kOtherNodesWord = std::chrono::milliseconds(1000);
// How often a node looks for the cause of its rank's failure elsewhere (rank_failed).
constexpr auto kCulpritPoll = std::chrono::milliseconds(250);
// How long the launcher waits, after a rank that failed because of another (launch_env.h's
// exit codes), for the one at fault to exit too: ranks that fail together (a checkpoint's
// agreement) exit within milliseconds of each other, in any order.
constexpr auto kOwnFailureGrace = std::chrono::milliseconds(2000);

std::string seconds_text(std::chrono::milliseconds d) {
  std::ostringstream s;
  s << static_cast<double>(d.count()) / 1000.0 << " s";
  return s.str();
}

class Group {
 public:
  Group(const GroupOptions& options, const std::atomic<int>& interrupt)
      : o_(options),
        interrupt_(interrupt),
        console_(options.console_fd, options.live_status),
        pump_(console_, options.log_dir),
        progress_(options.world_size) {}

  GroupResult run() {
    if (!spawn_all()) return result_;
    start_ = Clock::now();
    if (o_.store) {
      std::vector<int> local;
      for (const RankSpec& spec : o_.ranks) local.push_back(spec.rank);
      liveness_ = std::make_unique<LivenessWatch>(*o_.store, o_.world_size, local, o_.heartbeat_timeout, o_.node_rank == 0);
    }
    auto next_store_check = start_;
    while (true) {
      pump_.pump(kPollInterval);
      if (const int sig = interrupt_.load()) {
        // The other nodes stop too (within their next check of the key), not when they
        // find node 0's store gone.
        report_job_failed("node " + std::to_string(o_.node_rank) + "'s launcher received signal " +
                              std::to_string(sig),
                          /*final=*/true);
        console_.line("dp-launch: signal " + std::to_string(sig) + ": stopping the ranks (" +
                      (sig == SIGINT ? "SIGINT" : "SIGTERM") + ", SIGKILL after " + seconds_text(o_.stop_grace) +
                      "; another signal, a second or more later, kills them now)");
        stop_all(sig == SIGINT ? SIGINT : SIGTERM);
        return finish(GroupOutcome::kInterrupted, "the launcher received signal " + std::to_string(sig) +
                                                      "; stopped the ranks");
      }
      bool all_done = true;
      const RankProcess* failed = poll_all(&all_done);
      if (failed != nullptr) {
        // One that failed because of another: the one at fault may exit a moment later. The
        // laggard a timed-out rank waited for, read now: one slower than the timeout but not
        // stopped catches up during the grace, and was then no longer behind to be named.
        if (liveness_ && blame_weight(*failed) == 1) first_laggard_ = {failed->rank(), liveness_->culprit_of(failed->rank(), Clock::now(), false, true)};
        for (const auto until = Clock::now() + kOwnFailureGrace;
             blame_weight(*failed) < 2 && !all_done && Clock::now() < until;) {
          pump_.pump(kPollInterval);
          failed = poll_all(&all_done);
        }
        return rank_failed(*failed);
      }
      if (all_done) {
        // Not while another node's ranks wait for one of these that left before it was
        // ready: until the others are ready, or one joins (then check_startup fails the
        // job), or the startup deadline (a job of one node has nobody else to wait for).
        while (o_.store && !startup_done_ && o_.startup_timeout.count() > 0 &&
               o_.world_size > static_cast<int>(procs_.size()) && interrupt_.load() == 0) {
          if (check_startup() || check_other_nodes()) return result_;
          pump_.pump(kPollInterval);
        }
        if (o_.store) (void)o_.store->set(job_keys::node_done(o_.node_rank), "ok");
        drain();
        return finish(GroupOutcome::kSucceeded, "all " + std::to_string(procs_.size()) + " ranks exited 0");
      }
      if (o_.store && Clock::now() >= next_store_check) {
        next_store_check = Clock::now() + kStoreCheckInterval;
        if (check_other_nodes()) return result_;
        if (check_startup()) return result_;
        if (o_.watch_progress) show_progress();
      }
      if (liveness_ && check_liveness()) return result_;
    }
  }

 private:
  bool spawn_all() {
    for (RankSpec spec : o_.ranks) {
      if (o_.lifeline_fd >= 0) {
        spec.inherited_fd = o_.lifeline_fd;
        spec.env[lifeline::kEnv] = std::to_string(o_.lifeline_fd);
      }
      StatusOr<RankProcess> p = RankProcess::spawn(spec);
      if (!p.ok()) {
        // Not restarted: the same program fails the same way (a missing library, a
        // permission), and the other nodes would wait for ranks that never come.
        report_job_failed("node " + std::to_string(o_.node_rank) + ": " + p.status().message(), /*final=*/true);
        stop_all(SIGTERM);
        finish(GroupOutcome::kSpawnFailed, p.status().message());
        result_.final_stop = true;
        return false;
      }
      const Status added = pump_.add(spec.rank, p->output_fd(), "=== attempt " + std::to_string(o_.attempt) + " ===");
      if (!added.ok()) ZDP_LOG(kWarn) << "rank " << spec.rank << ": " << added.message();
      procs_.push_back(std::move(*p));
    }
    return true;
  }

  // Whether `p` is a zdp rank (it reached the job's store), whose exit codes 3 and 4 say
  // another rank was at fault (rank_exit_code); any other program's codes mean nothing.
  bool zdp_rank(const RankProcess& p) {
    auto [it, fresh] = zdp_ranks_.emplace(p.rank(), false);
    if (fresh && o_.store) {
      StatusOr<bool> joined = o_.store->check({job_keys::rank_joined(p.rank())});
      it->second = joined.ok() && *joined;
    }
    return it->second;
  }
  // Of ranks that failed together, the one to blame: killed by a signal (3), then failed on
  // its own (2: any other non-zero code, or any code of a program that is not zdp's), then
  // timed out waiting for another (1), then stopped because another failed (0).
  int blame_weight(const RankProcess& p) {
    const ExitInfo& e = p.exit_info();
    if (e.signal != 0) return 3;
    if (!zdp_rank(p)) return 2;
    return e.code == kExitPeerFailed ? 0 : e.code == kExitPeerTimeout ? 1 : 2;
  }
  std::string describe_exit(const RankProcess& p) {
    const int w = blame_weight(p);
    return p.exit_info().describe() + (w == 0   ? " (it stopped because another rank failed)"
                                       : w == 1 ? " (it timed out waiting for another rank)"
                                                : "");
  }

  // Polls every rank: the one to blame of those failed so far (blame_weight), or null;
  // `all_done` whether all have exited. A rank that exited 0 while the job ran is kept to
  // blame for the others' failure (ended_mid_job_).
  const RankProcess* poll_all(bool* all_done) {
    const RankProcess* failed = nullptr;
    *all_done = true;
    for (RankProcess& p : procs_) {
      const ExitInfo& e = p.poll();
      if (!e.exited) {
        *all_done = false;
      } else if (!e.ok()) {
        if (failed == nullptr || blame_weight(p) > blame_weight(*failed)) failed = &p;
      } else if (exited_zero_.insert(p.rank()).second && liveness_) {
        // Marked in the store with what it was doing, so that any node's launcher can name
        // it as the cause of its own ranks' failure.
        const std::string mid = liveness_->ended_mid_job(p.rank());
        if (!mid.empty() && ended_mid_job_.empty()) ended_mid_job_ = mid;
        liveness_->exited(p.rank(), mid);
      }
    }
    return failed;
  }

  GroupResult rank_failed(const RankProcess& failed) {
    const int others = static_cast<int>(procs_.size()) - 1;
    // Every rank that failed did so because of another, and one here ended mid-job with
    // exit code 0: that one (its peers lost their connections to it).
    std::string cause = blame_weight(failed) < 2 ? ended_mid_job_ : "";
    // Ranks on other nodes: one that died there may be why this one failed (an error exit,
    // not a signal); its launcher names it on the job-failed key (node 0 blamed its own
    // healthy rank). A node that died whole posts nothing: its ranks' heartbeats go still,
    // seen once stale (three beats, liveness.h); until then the rank here, which most
    // likely only lost its connection to them, is not blamed.
    if (cause.empty() && o_.store && failed.exit_info().signal == 0 &&
        o_.world_size > static_cast<int>(procs_.size())) {
      const auto deadline = Clock::now() + std::max<std::chrono::milliseconds>(
                                               kOtherNodesWord, liveness_ ? liveness_->stale_after() : kOtherNodesWord);
      while (true) {
        StatusOr<std::string> elsewhere = o_.store->get(job_keys::kJobFailed, kCulpritPoll);
        if (elsewhere.ok()) {
          const std::string reason = "the job was stopped: " + *elsewhere + "; then rank " +
                                     std::to_string(failed.rank()) + " here failed: " + describe_exit(failed);
          // Read now: node 0 stays only a second after it posts (stop_all may take 6).
          const bool final_stop = stop_is_final(*o_.store);
          console_.line("dp-launch: node " + std::to_string(o_.node_rank) + ": " + reason + "; stopping the other " +
                        std::to_string(others) + " local rank(s)");
          stop_all(SIGTERM);
          finish(GroupOutcome::kOtherNodeFailed, reason);
          result_.final_stop = final_stop;
          return result_;
        }
        if (liveness_) cause = liveness_->culprit_of(failed.rank(), Clock::now(), /*stale_only=*/true, blame_weight(failed) < 2);
        if (!cause.empty() || Clock::now() >= deadline || interrupt_.load() != 0) break;
      }
    }
    std::string reason = "rank " + std::to_string(failed.rank()) + " (node " + std::to_string(o_.node_rank) +
                         ", pid " + std::to_string(failed.pid()) + ") failed: " + describe_exit(failed);
    // A rank that exits with an error may only have timed out waiting for a stopped one:
    // blame the one whose heartbeat stopped first. Only one that says it timed out is
    // compared with the living ranks' positions (behind()): heartbeats are up to a second
    // apart, and for any other failure that named a healthy rank as the one it waited for.
    if (cause.empty() && liveness_ && failed.exit_info().signal == 0) {
      cause = liveness_->culprit_of(failed.rank(), Clock::now(), blame_weight(failed) != 1, blame_weight(failed) < 2);
      if (cause.empty() && failed.rank() == first_laggard_.first) cause = first_laggard_.second;
    }
    if (!cause.empty()) {
      reason = cause + "; " + reason +
               (blame_weight(failed) == 0 ? " (most likely because of it)" : " (most likely waiting for it)");
    }
    // A signal that came meanwhile stops the job for good (dp-launch does not restart it).
    report_job_failed(reason, /*final=*/interrupt_.load() != 0);
    console_.line("dp-launch: " + reason + "; stopping the other " + std::to_string(others) + " local rank(s)");
    await_flight_records();
    stop_all(SIGTERM);
    finish(GroupOutcome::kRankFailed, reason);
    result_.failed_rank = failed.rank();
    result_.failed_exit = failed.exit_info();
    result_.failed_tail = pump_.tail(failed.rank());
    result_.failed_log = pump_.log_path(failed.rank());
    return result_;
  }

  // Heartbeats: a stalled rank or a desync stops the job; a slow rank is reported.
  bool check_liveness() {
    const Finding f = liveness_->poll(Clock::now());
    if (f.verdict == Verdict::kNone) return false;
    if (f.verdict == Verdict::kStraggler) {
      console_.line("dp-launch: warning: " + f.message);
      return false;
    }
    report_job_failed(f.message);
    console_.line("dp-launch: " + f.message + "; stopping the job");
    await_flight_records();
    stop_all(SIGTERM);
    finish(f.verdict == Verdict::kDesync ? GroupOutcome::kDesync : GroupOutcome::kRankStalled, f.message);
    result_.failed_rank = f.rank;
    if (const RankProcess* p = local_process(f.rank)) {
      result_.failed_exit = p->exit_info();
      result_.failed_tail = pump_.tail(f.rank);
      result_.failed_log = pump_.log_path(f.rank);
    }
    return true;
  }

  // The job-failed key is set: the ranks print their flight recorders (heartbeat thread)
  // before the SIGTERM; a stopped rank cannot, so the wait is bounded.
  void await_flight_records() {
    if (!liveness_) return;
    std::vector<int> running;
    for (RankProcess& p : procs_) {
      if (!p.poll().exited) running.push_back(p.rank());
    }
    liveness_->wait_for_flight_records(running, kFlightRecordWait);
  }

  const RankProcess* local_process(int rank) const {
    for (const RankProcess& p : procs_) {
      if (p.rank() == rank) return &p;
    }
    return nullptr;
  }

  // Another node's launcher stopped the job: stop ours too. So does losing the store (no
  // connection for 30 s: node 0's launcher is gone), else our ranks run on with nobody to meet.
  bool check_other_nodes() {
    StatusOr<bool> failed = o_.store->check({job_keys::kJobFailed});
    if (!failed.ok()) {
      const std::string why = "lost the job's store (node 0's launcher is gone?): " + failed.status().message();
      console_.line("dp-launch: node " + std::to_string(o_.node_rank) + ": " + why + "; stopping the job");
      stop_all(SIGTERM);
      finish(GroupOutcome::kStoreLost, why);
      result_.final_stop = true;  // a restarted attempt would wait for a store that is gone
      return true;
    }
    if (!*failed) return false;
    StatusOr<std::string> why = o_.store->get(job_keys::kJobFailed, std::chrono::milliseconds(1000));
    const bool final_stop = stop_is_final(*o_.store);  // set before the key: read now, while node 0 is there
    stop_all(SIGTERM);
    finish(GroupOutcome::kOtherNodeFailed, "the job was stopped: " + (why.ok() ? *why : std::string("(unknown)")));
    result_.final_stop = final_stop;
    return true;
  }

  // Every rank must be ready (zdp::init done) by the startup deadline (startup_check.h).
  bool check_startup() {
    if (startup_done_ || o_.startup_timeout.count() <= 0) return false;
    std::vector<int> local;
    for (const RankSpec& spec : o_.ranks) local.push_back(spec.rank);
    const StartupCheck c = check_startup_of(
        *o_.store, StartupInputs{o_.world_size, o_.node_rank, local, exited_zero_,
                                 std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_),
                                 o_.startup_timeout, o_.startup_note});
    startup_done_ = c.ready;
    if (c.failure.empty()) return false;
    report_job_failed(c.failure);
    console_.line("dp-launch: " + c.failure + "; stopping the job");
    stop_all(SIGTERM);
    finish(c.rank >= 0 ? GroupOutcome::kRankFailed : GroupOutcome::kStartupTimeout, c.failure);
    if (const RankProcess* p = c.rank >= 0 ? local_process(c.rank) : nullptr) {
      result_.failed_rank = c.rank;
      result_.failed_exit = p->exit_info();
      result_.failed_tail = pump_.tail(c.rank);
      result_.failed_log = pump_.log_path(c.rank);
      result_.final_stop = true;  // a program that leaves before it joins does so again
    }
    return true;
  }

  void report_job_failed(const std::string& reason, bool final = false) {
    if (o_.store) post_job_failed(*o_.store, reason, final);
  }

  // SIGTERM (or SIGINT) to every running rank's process group, SIGKILL after the grace.
  void stop_all(int first_signal) {
    for (RankProcess& p : procs_) {
      if (!p.running()) continue;
      p.signal_group(first_signal);
      p.signal_group(SIGCONT);  // a stopped (SIGSTOP) rank acts on the signal only once continued
    }
    const auto deadline = Clock::now() + o_.stop_grace;
    const auto signals = [this] { return o_.signals_received ? o_.signals_received() : 0; };
    const int signals_before = signals();
    bool hurried = false;  // a signal came during the grace: kill now (a second Ctrl-C)
    while (Clock::now() < deadline && any_running() && !(hurried = signals() != signals_before)) {
      pump_.pump(kPollInterval);
    }
    for (RankProcess& p : procs_) {
      if (p.running()) {
        console_.line("dp-launch: rank " + std::to_string(p.rank()) +
                      (hurried ? std::string(" is being stopped and another signal came")
                               : " did not stop within " + seconds_text(o_.stop_grace)) +
                      "; killing it");
        p.signal_group(SIGKILL);
      }
    }
    // A rank SIGKILL cannot stop (in uninterruptible sleep: a device driver, a hung
    // network file system) is left to init after a bounded wait rather than hanging the
    // launcher: named, with its pid, so that someone can look at it.
    const auto kill_deadline = Clock::now() + kKillWait;
    while (any_running() && Clock::now() < kill_deadline) pump_.pump(std::chrono::milliseconds(10));
    for (RankProcess& p : procs_) {
      if (p.running()) {
        console_.line("dp-launch: rank " + std::to_string(p.rank()) + " (pid " + std::to_string(p.pid()) +
                      ") is still there " + seconds_text(kKillWait) +
                      " after SIGKILL (uninterruptible sleep: a device driver or file system?); leaving it");
      }
    }
    drain();
  }

  bool any_running() {
    bool running = false;
    for (RankProcess& p : procs_) running |= !p.poll().exited;
    return running;
  }

  // Collects what the ranks printed last (bounded: a grandchild may hold a pipe open).
  void drain() {
    const auto deadline = Clock::now() + std::chrono::seconds(1);
    while (!pump_.drained() && Clock::now() < deadline) pump_.pump(std::chrono::milliseconds(20));
  }

  // The status line (a terminal) or, in plain output, a line for each rank that turns
  // slow or silent (once per rank and kind).
  void show_progress() {
    const auto now = Clock::now();
    progress_.poll(*o_.store, now);
    if (console_.live()) {
      console_.status(progress_.status_line(now));
      return;
    }
    for (const ProgressWatch::Problem& p : progress_.problems(now)) {
      if (reported_.insert(std::to_string(p.rank) + p.kind).second) console_.line("dp-launch: " + p.text);
    }
  }

  GroupResult finish(GroupOutcome outcome, const std::string& reason) {
    console_.status("");  // the launcher's last lines follow on a clean line
    result_.outcome = outcome;
    result_.reason = reason;
    return result_;
  }

  const GroupOptions& o_;
  const std::atomic<int>& interrupt_;
  Terminal console_;
  OutputPump pump_;
  ProgressWatch progress_;
  std::set<std::string> reported_;  // rank problems already printed
  std::vector<RankProcess> procs_;
  std::unique_ptr<LivenessWatch> liveness_;  // with a store
  std::set<int> exited_zero_;                // local ranks seen exiting 0
  std::map<int, bool> zdp_ranks_;            // zdp_rank's answers
  std::string ended_mid_job_;                // the first of them that exited in the middle of the job
  std::pair<int, std::string> first_laggard_{-1, ""};  // (the rank that timed out first, its laggard then)
  Clock::time_point start_;
  bool startup_done_ = false;
  GroupResult result_;
};

}  // namespace

const char* to_string(GroupOutcome outcome) {
  switch (outcome) {
    case GroupOutcome::kSucceeded: return "succeeded";
    case GroupOutcome::kRankFailed: return "rank failed";
    case GroupOutcome::kRankStalled: return "rank stopped responding";
    case GroupOutcome::kDesync: return "collective mismatch";
    case GroupOutcome::kStartupTimeout: return "startup timeout";
    case GroupOutcome::kOtherNodeFailed: return "stopped by another node";
    case GroupOutcome::kStoreLost: return "lost node 0's store";
    case GroupOutcome::kInterrupted: return "interrupted";
    case GroupOutcome::kSpawnFailed: return "spawn failed";
  }
  return "?";
}

GroupResult run_group(const GroupOptions& options, const std::atomic<int>& interrupt) {
  Group group(options, interrupt);
  return group.run();
}

}  // namespace zdp::launcher
