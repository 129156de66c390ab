// zdp::init: environment -> config -> store -> device -> communicator -> ready.
#include "zdp/context.h"

#include <cstdlib>

#include "runtime/internal/rank_address.h"
#include "zdp/log.h"

namespace zdp {

Context::~Context() {
  comm_.reset();  // before the device its streams live on and the store it met through
  device_.reset();
  store_.reset();
}

Context Context::assemble(LaunchEnv env, Config config, std::unique_ptr<Store> store, std::unique_ptr<Device> device,
                          std::unique_ptr<Communicator> comm, std::chrono::milliseconds collective_timeout) {
  Context ctx;
  ctx.env_ = std::move(env);
  ctx.config_ = std::move(config);
  ctx.timeout_ = collective_timeout;
  ctx.store_ = std::move(store);
  ctx.device_ = std::move(device);
  ctx.comm_ = std::move(comm);
  return ctx;
}

StatusOr<Context> init(const InitOptions& options) {
  Context ctx;
  ZDP_ASSIGN_OR_RETURN(ctx.env_, read_launch_env());
  const std::string who = "rank " + std::to_string(ctx.env_.rank);
  set_process_identity(ctx.env_.rank, ctx.env_.world_size);

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

  if (ctx.env_.master_port != 0) {
    StatusOr<std::unique_ptr<Store>> store = connect_job_store(ctx.env_, ctx.timeout_);
    if (!store.ok()) return store.status();
    ctx.store_ = std::move(*store);
  } else if (ctx.env_.world_size == 1) {
    ctx.store_ = std::make_unique<InMemoryStore>();
  } else {
    return Status(StatusCode::kInvalidArgument, who + ": a world of " + std::to_string(ctx.env_.world_size) +
                                                    " needs MASTER_ADDR/MASTER_PORT for its store");
  }

  Backend backend = options.backend;
  if (backend == Backend::kAuto) backend = ctx.config_.launch.backend;
  if (backend == Backend::kAuto) {
    if (const char* b = std::getenv("ZDP_BACKEND")) backend = std::string(b) == "nccl" ? Backend::kNccl : Backend::kGloo;
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
  }

  CommOptions copts;
  copts.timeout = ctx.timeout_;
  if (backend == Backend::kGloo && ctx.env_.master_port != 0) {
    // Peers on other hosts connect to the address this rank advertises (rank_address.h).
    const EnvLookup env = [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
    StatusOr<RankAddress> address =
        choose_rank_address(ctx.config_.launch, ctx.env_.master_addr, ctx.env_.master_port, env);
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
  ZDP_RETURN_IF_ERROR(announce_ready(*ctx.store_, ctx.env_.rank));
  ZDP_LOG(kDebug) << "init: rank " << ctx.env_.rank << "/" << ctx.env_.world_size << " (" << ctx.env_.origin << ") on "
                  << ctx.device_->name() << " with " << ctx.comm_->backend();
  return ctx;
}

}  // namespace zdp
