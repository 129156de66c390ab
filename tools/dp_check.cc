// dp-check: checks a job's wiring from inside a rank. Run it as the program of a
// dp-launch config (or under torchrun/srun): it reads the launch environment, meets the
// other ranks through the store, builds the communicator, checks an all-reduce and a
// broadcast against closed-form values, and times an all-reduce.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/internal/cli_parse.h"
#include "core/internal/cli_range.h"
#include "runtime/internal/rank_address.h"
#include "zdp/comm.h"
#include "zdp/config.h"
#include "zdp/device.h"
#include "zdp/launch_env.h"
#include "zdp/log.h"

namespace {

using zdp::Status;
using zdp::StatusCode;

struct Options {
  std::string backend = "auto";  // auto | gloo | nccl; dp-launch passes ZDP_BACKEND
  double timeout_s = 300;
  int64_t bench_bytes = 16 << 20;
};

Status check(const Options& o) {
  ZDP_ASSIGN_OR_RETURN(zdp::LaunchEnv env, zdp::read_launch_env());
  zdp::set_process_identity(env.rank, env.world_size);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<zdp::Store> store, env.master_port != 0
                                                              ? zdp::connect_job_store(env, timeout)
                                                              : zdp::StatusOr<std::unique_ptr<zdp::Store>>(
                                                                    std::unique_ptr<zdp::Store>(new zdp::InMemoryStore)));

  const bool nccl = o.backend == "nccl" || (o.backend == "auto" && zdp::cuda_device_count() > 0);
  std::unique_ptr<zdp::Device> device;
  if (nccl) {
    ZDP_ASSIGN_OR_RETURN(device, zdp::create_cuda_device(env.local_rank % std::max(1, zdp::cuda_device_count())));
  } else {
    device = zdp::create_cpu_device();
  }
  zdp::CommOptions copts;
  copts.timeout = timeout;
  if (!nccl && env.world_size > 1) {
    // The address Gloo peers on other hosts connect to, chosen as dp-train's ranks choose
    // it (launch.rank_addr, launch.socket_ifname, GLOO_SOCKET_IFNAME, else the interface
    // that routes to MASTER_ADDR): left to Gloo, it advertised 127.0.0.1, and a multi-node
    // check failed where the job would work.
    zdp::LaunchConfig launch;
    if (!env.config_path.empty()) {
      ZDP_ASSIGN_OR_RETURN(const zdp::Config config, zdp::load_config(env.config_path));
      launch = config.launch;
    }
    const zdp::EnvLookup lookup = [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
    ZDP_ASSIGN_OR_RETURN(const zdp::RankAddress address,
                         zdp::choose_rank_address(launch, env.master_addr, env.master_port, lookup,
                                                  env.local_world_size == env.world_size));
    if (address.explicit_choice) ZDP_RETURN_IF_ERROR(zdp::check_rank_address(address));
    copts.iface = address.iface;
    copts.hostname = address.address;
  }
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<zdp::Communicator> comm,
                       nccl ? zdp::create_nccl_communicator(*store, env.rank, env.world_size, *device, copts)
                            : zdp::create_gloo_communicator(*store, env.rank, env.world_size, *device, copts));
  ZDP_RETURN_IF_ERROR(zdp::announce_ready(*store, env.rank));
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<zdp::Stream> stream, device->create_stream("comm"));

  // Closed forms: sum of ranks = K(K-1)/2; a broadcast from the last rank.
  const int64_t k = env.world_size;
  const int64_t n = 1024;
  ZDP_ASSIGN_OR_RETURN(zdp::DeviceBuffer buf, device->allocate(n * 8, zdp::MemCategory::kWorkspace));
  std::vector<int64_t> host(n, env.rank);
  ZDP_RETURN_IF_ERROR(device->memcpy(buf.data(), host.data(), n * 8));
  ZDP_RETURN_IF_ERROR(comm->all_reduce(buf.data(), buf.data(), n, zdp::DType::kI64, zdp::ReduceOp::kSum, *stream, 1));
  ZDP_RETURN_IF_ERROR(stream->synchronize(timeout));
  ZDP_RETURN_IF_ERROR(device->memcpy(host.data(), buf.data(), n * 8));
  for (int64_t i = 0; i < n; ++i) {
    if (host[i] != k * (k - 1) / 2) {
      return Status(StatusCode::kInternal, "all_reduce: element " + std::to_string(i) + " is " +
                                               std::to_string(host[i]) + ", expected " + std::to_string(k * (k - 1) / 2));
    }
  }
  std::fill(host.begin(), host.end(), env.rank == k - 1 ? 42 : -1);
  ZDP_RETURN_IF_ERROR(device->memcpy(buf.data(), host.data(), n * 8));
  ZDP_RETURN_IF_ERROR(comm->broadcast(buf.data(), n, zdp::DType::kI64, static_cast<int>(k - 1), *stream, 2));
  ZDP_RETURN_IF_ERROR(stream->synchronize(timeout));
  ZDP_RETURN_IF_ERROR(device->memcpy(host.data(), buf.data(), n * 8));
  for (int64_t i = 0; i < n; ++i) {
    if (host[i] != 42) return Status(StatusCode::kInternal, "broadcast: element " + std::to_string(i) + " differs");
  }

  // One timed fp32 all-reduce (after a warm-up) for a first bandwidth figure.
  const int64_t count = o.bench_bytes / 4;
  ZDP_ASSIGN_OR_RETURN(zdp::DeviceBuffer big, device->allocate(count * 4, zdp::MemCategory::kWorkspace));
  ZDP_RETURN_IF_ERROR(stream->memset_async(big.data(), 0, static_cast<size_t>(count) * 4));
  double seconds = 0;
  for (int iter = 0; iter < 2; ++iter) {
    const auto t0 = std::chrono::steady_clock::now();
    ZDP_RETURN_IF_ERROR(comm->all_reduce(big.data(), big.data(), count, zdp::DType::kF32, zdp::ReduceOp::kSum, *stream));
    ZDP_RETURN_IF_ERROR(stream->synchronize(timeout));
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // The bytes reduced (whole fp32 elements), and nccl-tests' bus bandwidth, 2(k-1)/k x
  // bytes / time: a world of one moves nothing between ranks, so it has none.
  const int64_t bytes = count * 4;
  char bus[64] = "no bus bandwidth in a world of 1";
  if (k > 1) {
    std::snprintf(bus, sizeof(bus), "busbw %.2f GB/s",
                  2.0 * static_cast<double>(k - 1) / static_cast<double>(k) * static_cast<double>(bytes) / seconds / 1e9);
  }
  std::printf("dp-check: rank %d/%lld (local %d/%d, %s, %s on %s): store, all_reduce and broadcast OK; "
              "all_reduce of %s: %.2f ms, %s\n",
              env.rank, static_cast<long long>(k), env.local_rank, env.local_world_size, env.origin.c_str(),
              comm->backend(), device->name().c_str(), zdp::format_bytes(bytes).c_str(), seconds * 1e3, bus);
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dp-check: checks a zdp job's environment, store and communicator from inside each rank"};
  Options o;
  if (const char* b = std::getenv("ZDP_BACKEND")) o.backend = b;
  app.add_option("--backend", o.backend, "auto | gloo | nccl (default: $ZDP_BACKEND or auto)")
      ->check(CLI::IsMember({"auto", "gloo", "nccl"}))
      ->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "seconds for the store and each collective")
      ->check(zdp::finite_range(1e-3, 86400))  // launch.collective_timeout_s's bounds
      ->capture_default_str();
  app.add_option("--bench-bytes", o.bench_bytes, "size of the timed all-reduce (rounded down to whole fp32 elements)")
      ->check(zdp::integer_range(4, int64_t{1} << 34))
      ->capture_default_str();
  ZDP_CLI_PARSE(app, argc, argv);
  // $ZDP_BACKEND is the default, so CLI11's check never saw it.
  if (o.backend != "auto" && o.backend != "gloo" && o.backend != "nccl") {
    std::fprintf(stderr, "dp-check: ZDP_BACKEND='%s' is not auto, gloo or nccl\n", o.backend.substr(0, 64).c_str());
    return 2;
  }
  // Under dp-launch the resolved config supplies the collective timeout (flags still win).
  if (const char* path = std::getenv("ZDP_CONFIG"); path != nullptr && app.count("--timeout") == 0) {
    zdp::StatusOr<zdp::Config> config = zdp::load_config(path);
    if (!config.ok()) {
      ZDP_LOG(kError) << "dp-check: " << config.status().to_string();
      return 1;
    }
    o.timeout_s = config->launch.collective_timeout_s;
  }
  const Status s = check(o);
  if (!s.ok()) {
    ZDP_LOG(kError) << "dp-check failed: " << s.to_string();
    return zdp::rank_exit_code(s);  // whose fault, for the launcher's blame
  }
  return 0;
}
