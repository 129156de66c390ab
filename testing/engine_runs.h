// Runs a training job of TinyMlp on K real rank processes (fork_ranks, Gloo; the CPU, or
// every rank on CUDA device 0) and brings rank 0's results back to the test: the fp32
// masters after the run, every step's StepStats, and the communication timeline. The
// engine tests compare such runs; train_on() runs the job on a context a test made
// itself (an in-process NCCL rank, say).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/internal/host_waits.h"
#include "testing/fork_ranks.h"
#include "testing/test_cuda_device.h"
#include "testing/tiny_mlp.h"
#include "zdp/context.h"
#include "zdp/engine.h"

namespace zdp::testing {

using namespace std::chrono_literals;

// Makes a rank's communicator, as create_gloo_communicator does (its signature): another
// backend for the engine runs (the emulated NCCL's, tests/simt/nccl_emulated_ranks_test.cc).
using CommFactory = std::function<StatusOr<std::unique_ptr<Communicator>>(Store&, int rank, int world, Device&,
                                                                          const CommOptions&)>;

// A context around the store fork_ranks gives each rank (no launcher, no environment).
// `local_world` > 1 groups consecutive ranks into "nodes" of that many (LOCAL_RANK,
// LOCAL_WORLD_SIZE, node_rank), as torchrun numbers them. `config` is the context's (what dp-train's
// train() reads besides its own argument). `cuda`: the rank's device is CUDA device 0
// (Gloo then stages through pinned memory); REQUIRES no CUDA call before a fork.
// `comm_factory` makes the communicator (null: Gloo), whose collectives time out after
// `timeout`.
inline StatusOr<Context> make_test_context(int rank, int world, Store& store, int local_world = 1,
                                           const Config& config = {}, bool cuda = false,
                                           const CommFactory& comm_factory = nullptr,
                                           std::chrono::milliseconds timeout = 60s) {
  std::unique_ptr<Device> device;
  if (cuda) {
    ZDP_ASSIGN_OR_RETURN(device, test_cuda_device());
  } else {
    device = create_cpu_device();
  }
  CommOptions options;
  options.timeout = timeout;
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                       comm_factory ? comm_factory(store, rank, world, *device, options)
                                    : create_gloo_communicator(store, rank, world, *device, options));
  LaunchEnv env;
  env.rank = rank;
  env.world_size = world;
  env.local_world_size = local_world;
  env.local_rank = rank % local_world;
  env.node_rank = rank / local_world;
  env.origin = "fork_ranks";
  return Context::assemble(env, config, std::make_unique<PrefixStore>("test", store), std::move(device),
                           std::move(comm), options.timeout);
}

struct EngineRun {
  int world = 1;
  EngineOptions options;
  int steps = 20;
  int64_t global_batch = 24;  // samples per step over all ranks and micro-batches
  int poison_rank = -1;       // this rank writes `poison` into a gradient ...
  int64_t poison_step = -1;   // ... in the last micro-batch of this step (0-based)
  float poison = INFINITY;
  int backward_sleep_ms = 0;
  // Checkpoints: with `load_from`, load_checkpoint(load_from) after finalize and run the
  // steps [its step, steps); after each step count in `save_steps`, save_checkpoint(
  // save_root) (per node, with local_world > 1: save_root/node-<n>). `fault` is set as
  // ZDP_CKPT_FAULT in every rank first.
  std::string load_from;
  bool load_per_node = false;  // each "node" loads from load_from/node-<n> (local_world > 1)
  LoadOptions load;
  std::string save_root;
  std::vector<int> save_steps;
  SaveOptions save;
  int local_world = 1;
  std::string fault;
  bool cuda = false;  // every rank on CUDA device 0, Gloo over CUDA buffers
  CommFactory comm_factory;  // every rank's communicator (make_test_context); null: Gloo
  std::chrono::milliseconds comm_timeout = 60s;
  // This rank's process ends at the start of this step (0-based), as a rank that dies
  // (fork_ranks only).
  int exit_rank = -1;
  int exit_step = -1;
  // Steps are issued with step_async(); step_stats() is read after every `stats_every`-th
  // one and the last (the others' StepStats have step = -1): the host runs ahead.
  int stats_every = 1;
  // Sleep after each step (its stats and saves): time in which only communication the step
  // left in flight (overlap_param_gather's) can run.
  int between_steps_sleep_ms = 0;
};

// What one rank saw; EngineRunResult holds rank 0's, and every rank's StepStats.
struct EngineRunResult {
  std::string failures;  // empty when every rank succeeded
  std::vector<std::vector<float>> masters;  // gathered fp32 masters after the run
  std::vector<StepStats> stats;
  std::vector<TimelineEvent> timeline;
  std::vector<double> backward_end;  // steady-clock seconds at the end of each step's backward
  std::vector<std::vector<StepStats>> stats_by_rank;
  // train_on() only: per step, the host waits inside step_async() (HostWaits::blocking).
  std::vector<int64_t> step_host_waits;
};

namespace detail {

template <typename T>
void put(std::FILE* f, const T& v) { std::fwrite(&v, sizeof(T), 1, f); }
template <typename T>
T get(std::FILE* f) {
  T v{};
  if (std::fread(&v, sizeof(T), 1, f) != 1) v = T{};
  return v;
}

}  // namespace detail

// Runs `run` on `ctx` (this process's rank), filling `result` with what it saw.
inline Status train_on(Context& ctx, const EngineRun& run, EngineRunResult& result) {
  const int rank = ctx.rank(), world = ctx.world_size();
  Engine engine(ctx, run.options);
  ZDP_ASSIGN_OR_RETURN(TinyMlp model, TinyMlp::create(engine));
  ZDP_RETURN_IF_ERROR(engine.finalize());
  if (!run.fault.empty()) ::setenv("ZDP_CKPT_FAULT", run.fault.c_str(), 1);
  int first_step = 0;
  if (!run.load_from.empty()) {
    const std::string from =
        run.load_per_node ? run.load_from + "/node-" + std::to_string(rank / run.local_world) : run.load_from;
    ZDP_ASSIGN_OR_RETURN(CheckpointState loaded, engine.load_checkpoint(from, run.load));
    first_step = static_cast<int>(loaded.step);
    if (loaded.data_position != loaded.step * run.global_batch) {
      return Status(StatusCode::kInternal, "loaded data_position " + std::to_string(loaded.data_position));
    }
  }
  std::string save_root = run.save_root;
  if (run.local_world > 1) save_root += "/node-" + std::to_string(rank / run.local_world);
  const int64_t accum = engine.accum_steps();
  if (run.global_batch % (world * accum) != 0) return Status(StatusCode::kInvalidArgument, "batch does not divide");
  const int64_t per_micro = run.global_batch / (world * accum);
  for (int step = first_step; step < run.steps; ++step) {
    if (rank == run.exit_rank && step == run.exit_step) std::_Exit(17);
    for (int64_t m = 0; m < accum; ++m) {
      TinyMlp::Hooks hooks;
      hooks.backward_sleep_ms = run.backward_sleep_ms;
      if (rank == run.poison_rank && step == run.poison_step && m == accum - 1) hooks.poison = run.poison;
      const int64_t first = (m * world + rank) * per_micro;  // disjoint slices of the global batch
      Status s = kernels::dispatch_float(run.options.compute_dtype, "run", [&](auto t) -> Status {
        return model.train_micro<decltype(t)>(engine, step, first, per_micro, hooks).status();
      });
      ZDP_RETURN_IF_ERROR(s);
    }
    result.backward_end.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count());
    const HostWaits before = host_waits();
    ZDP_RETURN_IF_ERROR(engine.step_async());
    result.step_host_waits.push_back(host_waits().blocking() - before.blocking());
    StepStats stats;
    stats.step = -1;
    if ((step + 1) % std::max(1, run.stats_every) == 0 || step + 1 == run.steps) {
      ZDP_ASSIGN_OR_RETURN(stats, engine.step_stats());
    }
    result.stats.push_back(stats);
    for (int save : run.save_steps) {
      if (save != step + 1) continue;
      CheckpointState state;
      state.step = step + 1;
      state.data_position = state.step * run.global_batch;
      state.trainer_json = "{\"model\": \"tiny_mlp\"}";
      ZDP_RETURN_IF_ERROR(engine.save_checkpoint(save_root, state, run.save).status());
    }
    if (run.between_steps_sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(run.between_steps_sleep_ms));
  }
  for (int l = 0; l < TinyMlp::kLayers; ++l) {
    for (Param p : {model.weight(l), model.bias(l)}) {
      ZDP_ASSIGN_OR_RETURN(std::vector<float> v, engine.gather_master(p));
      result.masters.push_back(std::move(v));
    }
  }
  if (run.options.trace) {
    ZDP_ASSIGN_OR_RETURN(result.timeline, engine.timeline());
  }
  return Status::Ok();
}

namespace detail {

inline Status run_rank(const EngineRun& run, const std::string& path, int rank, int world, Store& store) {
  ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store, run.local_world, {}, run.cuda,
                                                      run.comm_factory, run.comm_timeout));
  EngineRunResult result;
  ZDP_RETURN_IF_ERROR(train_on(ctx, run, result));
  std::FILE* f = std::fopen((path + "." + std::to_string(rank)).c_str(), "wb");
  if (f == nullptr) return Status(StatusCode::kIoError, "cannot write " + path);
  put<uint64_t>(f, result.masters.size());
  for (const auto& v : result.masters) {
    put<uint64_t>(f, v.size());
    std::fwrite(v.data(), sizeof(float), v.size(), f);
  }
  put<uint64_t>(f, result.stats.size());
  for (const StepStats& s : result.stats) put(f, s);
  put<uint64_t>(f, result.timeline.size());
  for (const TimelineEvent& e : result.timeline) put(f, e);
  put<uint64_t>(f, result.backward_end.size());
  for (double t : result.backward_end) put(f, t);
  std::fclose(f);
  return Status::Ok();
}

}  // namespace detail

inline EngineRunResult run_engine(const EngineRun& run) {
  char path[] = "/tmp/zdp_engine_run_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd >= 0) ::close(fd);
  const std::string failures = describe_failures(fork_ranks(run.world, [&](int rank, int world, Store& store) {
    return detail::run_rank(run, path, rank, world, store);
  }));
  ::unlink(path);
  std::vector<EngineRunResult> ranks(static_cast<size_t>(run.world));
  for (int r = 0; r < run.world; ++r) {
    const std::string file = std::string(path) + "." + std::to_string(r);
    EngineRunResult& result = ranks[static_cast<size_t>(r)];
    std::FILE* f = std::fopen(file.c_str(), "rb");
    if (f == nullptr) continue;
    result.masters.resize(detail::get<uint64_t>(f));
    for (auto& v : result.masters) {
      v.resize(detail::get<uint64_t>(f));
      if (std::fread(v.data(), sizeof(float), v.size(), f) != v.size()) result.failures += "short result file\n";
    }
    result.stats.resize(detail::get<uint64_t>(f));
    for (StepStats& s : result.stats) s = detail::get<StepStats>(f);
    result.timeline.resize(detail::get<uint64_t>(f));
    for (TimelineEvent& e : result.timeline) e = detail::get<TimelineEvent>(f);
    result.backward_end.resize(detail::get<uint64_t>(f));
    for (double& t : result.backward_end) t = detail::get<double>(f);
    std::fclose(f);
    ::unlink(file.c_str());
  }
  EngineRunResult result = std::move(ranks[0]);
  result.failures += failures;
  for (EngineRunResult& r : ranks) result.stats_by_rank.push_back(r.stats);
  result.stats_by_rank[0] = result.stats;
  if (result.masters.empty() && result.failures.empty()) result.failures = "rank 0 wrote no results\n";
  return result;
}

// The largest |a - b| over all parameters, and where.
struct MaxDiff {
  double value = 0.0;
  std::string where;
};
inline MaxDiff max_difference(const EngineRunResult& a, const EngineRunResult& b) {
  MaxDiff d;
  if (a.masters.size() != b.masters.size()) return {INFINITY, "parameter counts differ"};
  for (size_t p = 0; p < a.masters.size(); ++p) {
    if (a.masters[p].size() != b.masters[p].size()) return {INFINITY, "parameter #" + std::to_string(p) + " sizes differ"};
    for (size_t i = 0; i < a.masters[p].size(); ++i) {
      const double diff = std::fabs(static_cast<double>(a.masters[p][i]) - b.masters[p][i]);
      if (!(diff <= d.value)) {
        d.value = diff;
        d.where = "parameter #" + std::to_string(p) + " element " + std::to_string(i) + ": " +
                  std::to_string(a.masters[p][i]) + " vs " + std::to_string(b.masters[p][i]);
      }
    }
  }
  return d;
}

}  // namespace zdp::testing
