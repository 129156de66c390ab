// zdp::init(): a rank's place in the job and the objects every trainer needs (device,
// communicator, store, config). Works under dp-launch, torchrun-style launchers, Slurm
// (srun with one task per GPU) and in a plain single process (a world of 1, no store).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
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

class TcpStoreServer;
namespace detail {
class HeartbeatPublisher;  // runtime/src/context/heartbeat_publisher.h
class RankProgress;        // runtime/src/context/rank_progress.h
}  // namespace detail

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

// Move-only. Destroying it stops the heartbeat, then releases the communicator before
// the device and the store (and, on a rank 0 that hosts the store, waits up to 10 s for
// the other ranks to finish with it).
class Context {
 public:
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
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
  // The training step this rank is in: its heartbeat carries it, so liveness reports say
  // "stopped responding ... in step 41", and it marks a step boundary, where every rank
  // must have issued the same collectives (checked by the launchers). Call it at the
  // same point of every step on every rank. Cheap (a few atomics and one lock).
  void set_step(int64_t step);
  // For an object that keeps a reference to this context (an Engine): expires when the
  // context is destroyed or moved from, so that the object can refuse its calls instead
  // of reaching freed memory.
  std::weak_ptr<const void> lifetime() const { return life_; }

  // A context from parts the caller already has: tests that fork ranks around their own
  // store, trainers with their own bootstrap. REQUIRES: `comm` was created on `device`
  // for env.rank / env.world_size (an engine's finalize() refuses a context whose env is
  // not its communicator's). Takes ownership of all three; throws zdp::Error for a null one.
  static Context assemble(LaunchEnv env, Config config, std::unique_ptr<Store> store,
                          std::unique_ptr<Device> device, std::unique_ptr<Communicator> comm,
                          std::chrono::milliseconds collective_timeout);

 private:
  friend StatusOr<Context> init(const InitOptions& options);
  Context();
  // Tears down in order: heartbeat, communicator, device, store (the destructor's and
  // the move assignment's).
  void release();
  LaunchEnv env_;
  Config config_;
  std::chrono::milliseconds timeout_{0};
  std::unique_ptr<TcpStoreServer> hosted_store_;  // rank 0 without dp-launch
  std::unique_ptr<Store> store_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Communicator> comm_;
  std::shared_ptr<detail::RankProgress> progress_;
  std::unique_ptr<detail::HeartbeatPublisher> heartbeat_;
  std::shared_ptr<const void> life_;  // lifetime()'s; a new one for each context moved into
};

// Reads the launch environment and the config, connects to the store, creates the
// device and the communicator, and marks the rank ready for the launcher. Errors name
// the rank and what failed (a missing variable, an unreachable store, a config error).
StatusOr<Context> init(const InitOptions& options = {});

}  // namespace zdp
