// zdp::init: environment -> config -> store -> device -> communicator -> ready.
#include "zdp/context.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "core/internal/host_port.h"
#include "core/internal/open_file_limit.h"
#include "core/internal/standard_fds.h"
#include "core/internal/usable_cpus.h"
#include "kernels/fused_attention.h"
#include "kernels/gemm.h"
#include "runtime/src/context/heartbeat_publisher.h"
#include "runtime/src/context/rank_progress.h"
#include "runtime/internal/lifeline.h"
#include "runtime/internal/rank_address.h"
#include "runtime/internal/store_bind.h"
#include "zdp/log.h"
#include "zdp/tcp_store.h"

namespace zdp {
namespace {

// A rank 0 that hosts the store waits this long at most for the others to be done with it.
constexpr std::chrono::seconds kHostLinger{10};

std::string finished_key(int rank) { return "zdp/finished/" + std::to_string(rank); }

// Without dp-launch, rank 0 hosts the job's store (launch_env.h, LaunchEnv::store_host).
StatusOr<std::unique_ptr<TcpStoreServer>> host_store(const LaunchEnv& env) {
  TcpStoreServerOptions o;
  o.bind_host = store_bind_host(env.store_host, env.store_host != "127.0.0.1");  // launch_env: one node is 127.0.0.1
  o.port = env.store_port;
  o.secret = env.job_secret;
  o.max_connections = std::max(4096, 3 * env.world_size);  // two a rank, with room
  StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::start(o);
  if (!server.ok()) {
    return server.status().with_context("rank 0 (started without dp-launch: " + env.origin +
                                        "): cannot host the job store on " +
                                        host_port(o.bind_host, o.port) +
                                        " (MASTER_PORT, + 1 under torchrun; ZDP_STORE_PORT picks another)");
  }
  ZDP_LOG(kInfo) << "rank 0 hosts the job store on " << host_port(o.bind_host, o.port)
                 << " (the job was started without dp-launch: " << env.origin << ")";
  return server;
}

}  // namespace

Context::Context() : life_(std::make_shared<int>(0)) {}

Context::Context(Context&& other) noexcept : Context() { *this = std::move(other); }

// By hand: the defaulted assignment replaced the members in declaration order, freeing the
// old device before the old communicator on it, while the old heartbeat thread still read
// the communicator's progress.
Context& Context::operator=(Context&& other) noexcept {
  if (this == &other) return *this;
  release();
  env_ = std::move(other.env_);
  config_ = std::move(other.config_);
  timeout_ = other.timeout_;
  hosted_store_ = std::move(other.hosted_store_);
  store_ = std::move(other.store_);
  device_ = std::move(other.device_);
  comm_ = std::move(other.comm_);
  progress_ = std::move(other.progress_);
  heartbeat_ = std::move(other.heartbeat_);
  // What refers to `other` (an engine holds its reference, not this one's) sees it go.
  life_ = std::make_shared<int>(0);
  other.life_.reset();
  return *this;
}

Context::~Context() { release(); }

void Context::release() {
  life_.reset();       // engines that still refer to this context refuse their calls from now on
  heartbeat_.reset();  // it reads the communicator's progress
  if (progress_) progress_->set_comm(nullptr);
  comm_.reset();       // before the device its streams live on and the store it met through
  device_.reset();
  if (store_ && env_.rank0_hosts_store) {
    // Rank 0's store must outlive the others' last requests.
    (void)store_->set(finished_key(env_.rank), "1");
    if (env_.rank == 0) {
      std::vector<std::string> keys;
      for (int r = 0; r < env_.world_size; ++r) keys.push_back(finished_key(r));
      (void)store_->wait(keys, kHostLinger);
    }
  }
  store_.reset();
  hosted_store_.reset();
}

Context Context::assemble(LaunchEnv env, Config config, std::unique_ptr<Store> store, std::unique_ptr<Device> device,
                          std::unique_ptr<Communicator> comm, std::chrono::milliseconds collective_timeout) {
  // A null part was dereferenced by the first engine made on the context.
  if (!store || !device || !comm) {
    throw Error(Status(StatusCode::kInvalidArgument,
                       std::string("Context::assemble: the ") + (!store ? "store" : !device ? "device" : "communicator") +
                           " is null"));
  }
  Context ctx;
  ctx.env_ = std::move(env);
  ctx.config_ = std::move(config);
  ctx.timeout_ = collective_timeout;
  ctx.store_ = std::move(store);
  ctx.device_ = std::move(device);
  ctx.comm_ = std::move(comm);
  ctx.progress_ = std::make_shared<detail::RankProgress>();
  ctx.progress_->set_comm(ctx.comm_.get());
  return ctx;
}

void Context::set_step(int64_t step) {
  if (progress_) progress_->set_step(step);
}

StatusOr<Context> init(const InitOptions& options) {
  open_missing_standard_fds();  // no socket of the job's may become stdout (standard_fds.h)
  kernels::prepare_cudnn_environment();  // before this process starts threads (its setenv)
  Context ctx;
  ctx.progress_ = std::make_shared<detail::RankProgress>();
  ZDP_ASSIGN_OR_RETURN(ctx.env_, read_launch_env());
  const std::string who = "rank " + std::to_string(ctx.env_.rank);
  set_process_identity(ctx.env_.rank, ctx.env_.world_size);
  // Started by dp-launch: when it is gone, however it died, this rank and what it or its
  // wrapper started stop with it (runtime/internal/lifeline.h).
  if (const int lifeline_fd = lifeline::from_env(); lifeline_fd >= 0) {
    const std::string why = "[zdp] " + who + ": its launcher (dp-launch) is gone; stopping this rank's process group\n";
    lifeline::watch(lifeline_fd, [why] {
      sigset_t pipe_signal;  // the launcher read our output: a write may meet a closed pipe
      sigemptyset(&pipe_signal);
      sigaddset(&pipe_signal, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
      (void)!::write(STDERR_FILENO, why.data(), why.size());
      ::kill(0, SIGKILL);
      ::_exit(128 + SIGKILL);
    });
    // dp-launch forks its ranks with PR_SET_PDEATHSIG (SIGKILL): a rank exec'd straight
    // from a wrapper (`sleep 600 & exec dp-train`) was killed at once by it, so its watcher
    // never ran and the rest of its group outlived the launcher. The lifeline covers this
    // process now, and stops the group with it.
    ::prctl(PR_SET_PDEATHSIG, 0);
  }

  std::string path = options.config_path.empty() ? ctx.env_.config_path : options.config_path;
  if (!path.empty()) {
    StatusOr<Config> config = load_config(path, options.overrides);
    if (!config.ok()) return config.status().with_context(who + ": config");
    ctx.config_ = std::move(*config);
  } else {
    StatusOr<Config> config = parse_config("", "<defaults>", options.overrides);
    if (!config.ok()) return config.status().with_context(who + ": config");
    ctx.config_ = std::move(*config);
  }
  ctx.timeout_ = std::chrono::milliseconds(static_cast<int64_t>(ctx.config_.launch.collective_timeout_s * 1000));
  // launch.socket_ifname for NCCL's bootstrap, as dp-launch passes it: a rank torchrun or
  // srun started sets it itself (NCCL reads it at its first call), before the threads that
  // follow start; a value the environment already has stays.
  if (!ctx.config_.launch.socket_ifname.empty()) ::setenv("NCCL_SOCKET_IFNAME", ctx.config_.launch.socket_ifname.c_str(), 0);

  if (ctx.env_.store_port != 0) {
    // A rank started by torchrun or srun has its launcher's soft limit (often 1024): rank 0
    // hosting the store holds two connections a rank, and every Gloo rank one a peer.
    raise_open_file_limit();
    if (ctx.env_.rank0_hosts_store && ctx.env_.rank == 0) {
      ZDP_ASSIGN_OR_RETURN(ctx.hosted_store_, host_store(ctx.env_));
    }
    // The store may come up after this rank (its host starts later): wait as long as the
    // launcher waits for every rank to join. startup_timeout_s = 0 means no such deadline,
    // not "give up at once" (a connect deadline of 0 tried once: under torchrun or srun
    // every rank that started before rank 0 bound its port failed): then as long as a
    // collective waits for a peer, and at least 10 s, as dp-launch's own connection.
    const LaunchConfig& launch = ctx.config_.launch;
    const double connect_s =
        launch.startup_timeout_s > 0 ? launch.startup_timeout_s : std::max(launch.collective_timeout_s, 10.0);
    const auto connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(connect_s * 1000));
    StatusOr<std::unique_ptr<Store>> store = connect_job_store(ctx.env_, connect_timeout);
    if (!store.ok()) return store.status();
    ctx.store_ = std::move(*store);
    if (launch.heartbeat_timeout_s > 0) {
      const auto beat_timeout = std::chrono::milliseconds(static_cast<int64_t>(launch.heartbeat_timeout_s * 1000));
      ZDP_ASSIGN_OR_RETURN(ctx.heartbeat_, detail::HeartbeatPublisher::start(ctx.env_, beat_timeout, ctx.progress_));
    }
  } else if (ctx.env_.world_size == 1) {
    ctx.store_ = std::make_unique<InMemoryStore>();
  } else {
    return Status(StatusCode::kInvalidArgument, who + ": a world of " + std::to_string(ctx.env_.world_size) +
                                                    " needs MASTER_ADDR/MASTER_PORT for its store");
  }

  Backend backend = options.backend;
  if (backend == Backend::kAuto) backend = ctx.config_.launch.backend;
  if (backend == Backend::kAuto) {
    // auto | gloo | nccl, as launch.backend: anything else (a typo, "NCCL") silently ran Gloo.
    if (const char* b = std::getenv("ZDP_BACKEND"); b != nullptr && *b != '\0') {
      const std::string word = b;
      if (word == "nccl") backend = Backend::kNccl;
      else if (word == "gloo") backend = Backend::kGloo;
      else if (word != "auto") {
        return Status(StatusCode::kInvalidArgument,
                      who + ": ZDP_BACKEND='" + word.substr(0, 64) + "' is not auto, gloo or nccl");
      }
    }
  }
  const bool has_gpu = cuda_device_count() > 0;
  backend = resolve_backend(backend, has_gpu);
  if (backend == Backend::kNccl) {
    if (!has_gpu) return Status(StatusCode::kUnavailable, who + ": backend nccl needs a CUDA device; none is visible");
    StatusOr<std::unique_ptr<Device>> device = create_cuda_device(ctx.env_.local_rank % cuda_device_count());
    if (!device.ok()) return device.status().with_context(who);
    ctx.device_ = std::move(*device);
  } else {
    ctx.device_ = create_cpu_device();
    // Ranks that share a host and were started without dp-launch (by hand, srun without
    // binding; torchrun sets OMP_NUM_THREADS=1) would each run a thread per core of the
    // host: cores x ranks threads. Split the cores as dp-launch does.
    if (std::getenv("OMP_NUM_THREADS") == nullptr && ctx.env_.local_world_size > 1) {
      const int threads = std::max(1, usable_cpu_cores() / ctx.env_.local_world_size);
      kernels::set_cpu_threads(threads);
      ZDP_LOG(kInfo) << "init: " << threads << " CPU thread(s) for this rank (the usable cores / "
                     << ctx.env_.local_world_size << " ranks on this host; OMP_NUM_THREADS sets another count)";
    }
  }

  CommOptions copts;
  copts.timeout = ctx.timeout_;
  if (backend == Backend::kGloo && ctx.env_.master_port != 0) {
    // Peers on other hosts connect to the address this rank advertises (rank_address.h).
    const EnvLookup env = [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
    StatusOr<RankAddress> address =
        choose_rank_address(ctx.config_.launch, ctx.env_.master_addr, ctx.env_.master_port, env,
                            ctx.env_.local_world_size == ctx.env_.world_size);
    if (!address.ok()) return address.status().with_context(who);
    if (address->explicit_choice) ZDP_RETURN_IF_ERROR(check_rank_address(*address).with_context(who));
    copts.iface = address->iface;
    copts.hostname = address->address;
    ZDP_LOG(kDebug) << "init: rank " << ctx.env_.rank << " advertises " << address->describe();
  }
  StatusOr<std::unique_ptr<Communicator>> comm =
      backend == Backend::kNccl
          ? create_nccl_communicator(*ctx.store_, ctx.env_.rank, ctx.env_.world_size, *ctx.device_, copts)
          : create_gloo_communicator(*ctx.store_, ctx.env_.rank, ctx.env_.world_size, *ctx.device_, copts);
  if (!comm.ok()) return comm.status();
  ctx.comm_ = std::move(*comm);
  ctx.progress_->set_comm(ctx.comm_.get());
  ZDP_RETURN_IF_ERROR(announce_ready(*ctx.store_, ctx.env_.rank));
  ZDP_LOG(kDebug) << "init: rank " << ctx.env_.rank << "/" << ctx.env_.world_size << " (" << ctx.env_.origin << ") on "
                  << ctx.device_->name() << " with " << ctx.comm_->backend();
  return ctx;
}

}  // namespace zdp
