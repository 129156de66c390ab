// zdp::init(): a rank's place in the job and the objects every trainer needs (device,
// communicator, store, config). Works under dp-launch, torchrun-style launchers, Slurm
// (srun with one task per GPU) and in a plain single process (a world of 1, no store).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "zdp/comm.h"
#include "zdp/config.h"
#include "zdp/device.h"
#include "zdp/launch_env.h"
#include "zdp/status.h"
#include "zdp/store.h"

namespace zdp {

struct InitOptions {
  // The job config; empty = $ZDP_CONFIG (written by dp-launch), else the defaults.
  std::string config_path;
  // Applied on top of the config file (e.g. a trainer's own --set flags).
  std::vector<std::string> overrides;
  // Device and backend: kAuto uses CUDA device LOCAL_RANK with NCCL when this build has
  // CUDA and the machine a GPU, else the CPU with Gloo. The config's launch.backend and
  // $ZDP_BACKEND (set by dp-launch) are used when this is kAuto.
  Backend backend = Backend::kAuto;
};

// Move-only. Destroying it releases the communicator before the device and the store.
class Context {
 public:
  Context(Context&&) noexcept = default;
  Context& operator=(Context&&) noexcept = default;
  ~Context();

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  int local_rank() const { return env_.local_rank; }
  const LaunchEnv& launch_env() const { return env_; }
  const Config& config() const { return config_; }
  Device& device() { return *device_; }
  Communicator& comm() { return *comm_; }
  // The job's store (attempt-scoped); an in-memory one for a single process.
  Store& store() { return *store_; }
  std::chrono::milliseconds collective_timeout() const { return timeout_; }

  // A context from parts the caller already has: tests that fork ranks around their own
  // store, trainers with their own bootstrap. REQUIRES: `comm` was created on `device`
  // for env.rank / env.world_size. Takes ownership of all three.
  static Context assemble(LaunchEnv env, Config config, std::unique_ptr<Store> store,
                          std::unique_ptr<Device> device, std::unique_ptr<Communicator> comm,
                          std::chrono::milliseconds collective_timeout);

 private:
  friend StatusOr<Context> init(const InitOptions& options);
  Context() = default;
  LaunchEnv env_;
  Config config_;
  std::chrono::milliseconds timeout_{0};
  std::unique_ptr<Store> store_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Communicator> comm_;
};

// Reads the launch environment and the config, connects to the store, creates the
// device and the communicator, and marks the rank ready for the launcher. Errors name
// the rank and what failed (a missing variable, an unreachable store, a config error).
StatusOr<Context> init(const InitOptions& options = {});

}  // namespace zdp
