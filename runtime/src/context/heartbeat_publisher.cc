// HeartbeatPublisher: beat, watch for the job-failed key, print the flight recorder.
#include "runtime/src/context/heartbeat_publisher.h"

#include <unistd.h>

#include "runtime/internal/heartbeat.h"
#include "runtime/internal/reconnecting_store.h"
#include "zdp/launch_env.h"
#include "zdp/log.h"
#include "zdp/tcp_store.h"

namespace zdp::detail {
namespace {

// The job-failed key is awaited in slices this long: how late a stopping rank prints its
// flight recorder at most, and how long the destructor may wait for the thread.
constexpr std::chrono::milliseconds kSlice{100};

// A PrefixStore that owns the store it prefixes.
class OwningPrefixStore final : public PrefixStore {
 public:
  OwningPrefixStore(std::string prefix, std::unique_ptr<Store> base)
      : PrefixStore(std::move(prefix), *base), base_(std::move(base)) {}

 private:
  std::unique_ptr<Store> base_;
};

}  // namespace

StatusOr<std::unique_ptr<HeartbeatPublisher>> HeartbeatPublisher::start(
    const LaunchEnv& env, std::chrono::milliseconds timeout, std::shared_ptr<RankProgress> progress) {
  // The store answered this rank a moment ago: a few seconds are plenty.
  auto connect = [env](std::chrono::milliseconds within) -> StatusOr<std::unique_ptr<Store>> {
    StatusOr<std::unique_ptr<TcpStoreClient>> client =
        TcpStoreClient::connect(env.store_host, env.store_port, within, env.job_secret);
    if (!client.ok()) return client.status().with_context("rank " + std::to_string(env.rank) + ": heartbeat");
    return std::unique_ptr<Store>(new OwningPrefixStore(attempt_prefix(env.attempt), std::move(*client)));
  };
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Store> first, connect(std::chrono::seconds(10)));
  // A connection that breaks is made again (runtime/internal/reconnecting_store.h).
  auto store = std::make_unique<ReconnectingStore>(std::move(first), connect, std::chrono::seconds(2),
                                                   "rank " + std::to_string(env.rank) + "'s heartbeat");
  return std::make_unique<HeartbeatPublisher>(std::move(store), env.rank, heartbeat_interval(timeout),
                                              std::move(progress));
}

HeartbeatPublisher::HeartbeatPublisher(std::unique_ptr<Store> store, int rank, std::chrono::milliseconds interval,
                                       std::shared_ptr<RankProgress> progress)
    : store_(std::move(store)), rank_(rank), interval_(interval), progress_(std::move(progress)) {
  thread_ = std::thread([this] { loop(); });
}

HeartbeatPublisher::~HeartbeatPublisher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // The heartbeat stops on purpose (the Context is released; the process may go on, e.g.
  // post-processing): the mark a launcher also sets for a rank that exited 0, so that the
  // silence is not read as a stall. Skipped with a store already failing (no wait on it).
  if (!store_failed_) (void)store_->set(heartbeat_keys::exited(rank_), "released");
}

void HeartbeatPublisher::loop() {
  using Clock = std::chrono::steady_clock;
  bool printed = false;
  Clock::time_point next_beat = Clock::now();
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    if (Clock::now() >= next_beat || progress_->take_changed()) {
      publish();
      next_beat = Clock::now() + interval_;
    }
    const auto slice = std::min<std::chrono::milliseconds>(
        kSlice, std::chrono::ceil<std::chrono::milliseconds>(next_beat - Clock::now()));
    if (printed) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, slice, [this] { return stop_; });
      continue;
    }
    // Waiting on the key (rather than sleeping) prints the flight recorder as soon as a
    // launcher stops the job.
    StatusOr<std::string> failed = store_->get(job_keys::kJobFailed, std::max(slice, std::chrono::milliseconds(1)));
    if (failed.ok()) {
      print_flight_record(*failed);
      printed = true;
    } else if (failed.status().code() != StatusCode::kTimeout) {
      // The store failed (and could not be reached again, when it can reconnect): said
      // once, then tried every second, so that beats resume when it is back.
      if (!store_failed_) {
        ZDP_LOG(kWarn) << "heartbeat: the store failed (" << failed.status().message() << "); trying every second";
      }
      store_failed_ = true;
      std::unique_lock<std::mutex> lock(mu_);
      if (wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) return;
    } else {
      store_failed_ = false;
    }
  }
}

void HeartbeatPublisher::publish() {
  HeartbeatRecord r;
  r.beat = ++beat_;
  r.pid = ::getpid();
  r.host = process_identity().host;
  r.interval_s = std::chrono::duration<double>(interval_).count();
  r.step = progress_->step();
  r.marks = progress_->marks();
  if (const Communicator* comm = progress_->comm()) {
    r.has_comm = true;
    r.comm = comm->progress();
    const std::vector<CollectiveRecord> records = comm->flight_record();
    const size_t first = records.size() > HeartbeatRecord::kRecent ? records.size() - HeartbeatRecord::kRecent : 0;
    for (size_t i = first; i < records.size(); ++i) {
      r.recent.push_back(RecentCollective{records[i].desc.seq, records[i].desc.signature(), records[i].desc.describe()});
    }
    if (r.comm.in_flight) {
      r.current = r.comm.current.describe();
      r.current_signature = r.comm.current.signature();
    }
  }
  const Status s = store_->set(heartbeat_keys::beat(rank_), encode_heartbeat(r));
  if (!s.ok()) ZDP_LOG(kDebug) << "heartbeat " << r.beat << " not published: " << s.message();
}

void HeartbeatPublisher::print_flight_record(const std::string& reason) {
  const Communicator* comm = progress_->comm();
  ZDP_LOG(kWarn) << "the job is stopping (" << reason << "); this rank's last collectives (flight recorder, oldest first):\n"
                 << (comm ? comm->flight_record_text() : std::string("  (no communicator yet)\n"));
  (void)store_->set(heartbeat_keys::flight_printed(rank_), "1");
}

}  // namespace zdp::detail
