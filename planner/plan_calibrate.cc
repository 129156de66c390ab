// The --calibrate measurements (see plan_calibrate.h).
#include "planner/plan_calibrate.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cerrno>
#include <cstring>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "kernels/gemm.h"
#include "planner/format_numbers.h"
#include "trainer/models/model.h"
#include "trainer/models/model_spec.h"
#include "zdp/context.h"
#include "zdp/engine.h"
#include "zdp/log.h"
#include "zdp/comm.h"
#include "zdp/device.h"
#include "zdp/store.h"
#include "zdp/tcp_store.h"

extern char** environ;

namespace zdp::launcher {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Best-of GEMM rate: Y[rows, out] = X[rows, in] W^T, as a linear layer runs it.
StatusOr<double> time_gemm(const CalibrateOptions& o) {
  // A rank's thread count for every kernel, as dp-launch gives it (OMP_NUM_THREADS): the
  // model's LayerNorm, softmax and AdamW ran on every core while the output said "1
  // thread per rank" (10x faster than a rank on an idle machine, 30x slower on a busy one).
  kernels::set_cpu_threads(o.threads);
  kernels::set_cpu_gemm_threads(o.threads);
  std::unique_ptr<kernels::Gemm> gemm = kernels::make_cpu_gemm();
  std::vector<float> x(static_cast<size_t>(o.rows * o.in), 0.5f), w(static_cast<size_t>(o.out * o.in), 0.25f),
      y(static_cast<size_t>(o.rows * o.out));
  kernels::GemmArgs g;
  g.a.trans = kernels::Transpose::kYes;  // column-major: C[out, rows] = W^T[out, in] X[in, rows]
  g.m = o.out;
  g.n = o.rows;
  g.k = o.in;
  g.a.data = w.data();
  g.a.ld = o.in;
  g.b.data = x.data();
  g.b.ld = o.in;
  g.c.data = y.data();
  g.c.ld = o.out;
  double best = 1e30;
  for (int i = 0; i < 6; ++i) {  // the first warms up
    const auto t = Clock::now();
    ZDP_RETURN_IF_ERROR(gemm->run(g, nullptr).with_context("calibration GEMM"));
    if (i > 0) best = std::min(best, since(t));
  }
  return 2.0 * static_cast<double>(o.rows * o.in * o.out) / best;
}

// One rank of the 2-rank all-reduce: the best seconds at each size.
StatusOr<std::pair<double, double>> all_reduce_rank(Store& store, int rank, const CalibrateOptions& o) {
  std::unique_ptr<Device> device = create_cpu_device();
  CommOptions co;
  co.timeout = std::chrono::seconds(20);
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, create_gloo_communicator(store, rank, 2, *device, co));
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->create_stream("calibration"));
  std::vector<float> buffer(static_cast<size_t>(o.large_bytes / 4), 1.0f);
  double result[2] = {0, 0};
  const int64_t sizes[2] = {o.small_bytes, o.large_bytes};
  for (int s = 0; s < 2; ++s) {
    std::vector<double> times;
    for (int i = 0; i < 12; ++i) {
      ZDP_RETURN_IF_ERROR(comm->barrier(*stream));
      ZDP_RETURN_IF_ERROR(stream->synchronize(co.timeout));
      const auto t = Clock::now();
      ZDP_RETURN_IF_ERROR(comm->all_reduce(buffer.data(), buffer.data(), sizes[s] / 4, DType::kF32, ReduceOp::kSum, *stream));
      ZDP_RETURN_IF_ERROR(stream->synchronize(co.timeout));
      if (i >= 2) times.push_back(since(t));
    }
    // The best of the runs: the link when both ranks are scheduled (a busy machine only adds
    // scheduling delays, which would otherwise pass for latency).
    result[s] = *std::min_element(times.begin(), times.end());
  }
  return std::make_pair(result[0], result[1]);
}

// Median seconds of one micro-batch of the config's model (forward and backward) on a
// one-rank CPU engine, on random tokens / features: what one rank computes a micro-batch.
// The engine's step after it is not timed: the plan counts compute per micro-batch, and
// the step's optimizer was counted accum_steps times, whole at every stage.
StatusOr<double> time_model_micro(const Config& config) {
  Config c = config;
  c.zero.stage = 0;
  c.zero.accumulate = GradAccumulation::kLocal;  // one micro-batch; "sharded" needs stage 2-3
  c.train.global_batch = c.train.micro_batch;
  c.train.accum_steps = 1;
  c.optim.warmup_steps = 0;
  c.optim.lr_scaling = LrScalingRule::kNone;
  InMemoryStore store;
  std::unique_ptr<Device> device = create_cpu_device();
  CommOptions co;
  co.timeout = std::chrono::seconds(60);
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, create_gloo_communicator(store, 0, 1, *device, co));
  LaunchEnv env;
  env.origin = "dp-launch plan --calibrate";
  Context ctx = Context::assemble(env, c, std::make_unique<PrefixStore>("calibrate", store), std::move(device),
                                  std::move(comm), co.timeout);
  ZDP_ASSIGN_OR_RETURN(EngineOptions options, EngineOptions::from(c, 1));
  ZDP_ASSIGN_OR_RETURN(const trainer::ModelSpec spec, trainer::model_spec(c));
  options.nested_layer_scopes = spec.nested_layer_scopes;  // as dp-train runs it
  Engine engine(ctx, options);
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<trainer::Ops> ops, trainer::Ops::create(ctx.device(), c.model.dtype));
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<trainer::Model> model, trainer::make_model(c, *ops));
  ZDP_RETURN_IF_ERROR(model->register_params(engine));
  ZDP_RETURN_IF_ERROR(engine.finalize());
  ops->set_stream(engine.compute_stream());

  trainer::Batch batch;
  batch.count = c.train.micro_batch;
  std::mt19937 rng(1);
  const int64_t tokens = batch.count * (c.model.kind == ModelKind::kGpt ? c.model.seq_len : 1);
  std::uniform_int_distribution<int32_t> token(0, c.model.vocab_size - 1);
  for (int64_t i = 0; i < tokens; ++i) batch.labels.push_back(token(rng));
  if (c.model.kind == ModelKind::kGpt) {
    batch.tokens = batch.labels;
  } else {
    std::normal_distribution<float> feature(0.0f, 1.0f);
    for (int64_t i = 0; i < batch.count * c.model.d_model; ++i) batch.features.push_back(feature(rng));
    batch.targets.assign(static_cast<size_t>(batch.count * c.model.vocab_size), 0.0f);
  }
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) {  // the first warms up
    const auto t = Clock::now();
    ZDP_RETURN_IF_ERROR(model->train_micro(engine, batch).status().with_context("calibration micro-batch"));
    if (i > 0) times.push_back(since(t));  // CPU: the compute stream is this thread, done here
    ZDP_RETURN_IF_ERROR(engine.step().status().with_context("calibration step"));
  }
  return median(times);
}

// The store key where calibration peer `rank` leaves "<small_s> <large_s>".
std::string result_key(int rank) { return "calibration/rank" + std::to_string(rank); }

// Both ranks of the link measurement as fresh processes (`<this program> calibrate-peer`,
// posix_spawn): a fork of this process, which runs the store server's threads and maybe
// an OpenMP pool, could hang on a lock one of them held (docs/design.md, "Fork safety").
// Fresh processes also create their Gloo communicators as the first of their process,
// so their rendezvous keys agree. Returns each rank's (small, large) best seconds.
StatusOr<std::array<std::pair<double, double>, 2>> time_link(const CalibrateOptions& o) {
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreServer> server, TcpStoreServer::start(TcpStoreServerOptions{}));
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreClient> store,
                       TcpStoreClient::connect("127.0.0.1", server->port(), std::chrono::seconds(10)));
  std::string program = o.peer_program;
  if (program.empty()) {
    std::error_code ec;
    program = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) return Status(StatusCode::kInternal, "calibration: cannot find this program (/proc/self/exe): " + ec.message());
  }
  std::fflush(nullptr);
  std::array<pid_t, 2> pids{-1, -1};
  auto stop_peers = [&pids] {
    for (pid_t& pid : pids) {
      if (pid <= 0) continue;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      pid = -1;
    }
  };
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> args = {program, "calibrate-peer", "--rank", std::to_string(r),
                                     "--port", std::to_string(server->port()), "--small-bytes",
                                     std::to_string(o.small_bytes), "--large-bytes", std::to_string(o.large_bytes)};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int err = ::posix_spawn(&pids[static_cast<size_t>(r)], program.c_str(), nullptr, nullptr, argv.data(), environ);
    if (err != 0) {
      pids[static_cast<size_t>(r)] = -1;
      stop_peers();
      return Status(StatusCode::kInternal, "calibration: cannot run " + program + " calibrate-peer: " + std::strerror(err));
    }
  }
  // The peers' own timeouts (connect 10 s, collectives 20 s each) end them well before this.
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  for (int running = 2; running > 0;) {
    for (int r = 0; r < 2; ++r) {
      const pid_t pid = pids[static_cast<size_t>(r)];
      int status = 0;
      if (pid <= 0) continue;
      const pid_t waited = ::waitpid(pid, &status, WNOHANG);
      if (waited < 0 && errno != EINTR) {  // ECHILD: reaped by the kernel, its exit unknown
        const int err = errno;
        stop_peers();
        return Status(StatusCode::kInternal, "calibration all-reduce: cannot wait for rank " + std::to_string(r) +
                                                 " (pid " + std::to_string(pid) + "): " + std::strerror(err));
      }
      if (waited != pid) continue;
      pids[static_cast<size_t>(r)] = -1;
      --running;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {  // the first failure is the cause
        stop_peers();
        return Status(StatusCode::kInternal,
                      "calibration all-reduce: rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") failed (" +
                          (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                             : "signal " + std::to_string(WTERMSIG(status))) +
                          "; its error is above)");
      }
    }
    if (running > 0 && Clock::now() >= deadline) {
      stop_peers();
      return Status(StatusCode::kInternal, "calibration all-reduce: the 2 ranks still ran after 120 s, killed");
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::array<std::pair<double, double>, 2> times{};
  for (int r = 0; r < 2; ++r) {
    auto& t = times[static_cast<size_t>(r)];
    StatusOr<std::string> value = store->get(result_key(r), std::chrono::seconds(1));
    if (!value.ok() || std::sscanf(value->c_str(), "%lf %lf", &t.first, &t.second) != 2) {
      return Status(StatusCode::kInternal, "calibration all-reduce: rank " + std::to_string(r) + " left no times");
    }
  }
  return times;
}

}  // namespace

Status run_calibration_peer(const CalibrationPeer& peer) {
  set_process_identity(peer.rank, 2);
  CalibrateOptions o;
  o.small_bytes = peer.small_bytes;
  o.large_bytes = peer.large_bytes;
  if (peer.rank < 0 || peer.rank > 1 || peer.port <= 0 || peer.port > 65535 || o.small_bytes < 4 ||
      o.large_bytes <= o.small_bytes || o.large_bytes > (int64_t{1} << 30)) {
    return Status(StatusCode::kInvalidArgument, "calibrate-peer: rank " + std::to_string(peer.rank) + ", port " +
                                                    std::to_string(peer.port) + ", sizes " + std::to_string(o.small_bytes) +
                                                    " and " + std::to_string(o.large_bytes) + " bytes are not valid");
  }
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreClient> store,
                       TcpStoreClient::connect("127.0.0.1", peer.port, std::chrono::seconds(10)));
  ZDP_ASSIGN_OR_RETURN(const auto t, all_reduce_rank(*store, peer.rank, o));
  char text[64];
  std::snprintf(text, sizeof(text), "%.9g %.9g", t.first, t.second);
  return store->set(result_key(peer.rank), text);
}

std::string model_timing_refusal(const Config& config, int64_t memory_bytes, double gemm_flops_per_s,
                                 double max_seconds) {
  if (config.model.dtype != DType::kF32) {
    return std::string("model.dtype = \"") + to_string(config.model.dtype) + "\" computes on GPUs only";
  }
  StatusOr<trainer::ModelSpec> spec = trainer::model_spec(config);
  if (!spec.ok()) return "its model cannot be built: " + spec.status().message();
  // fp32 on one rank: parameters, gradients, the master and AdamW's two moments' worth.
  const double bytes = 16.0 * static_cast<double>(spec->psi) + static_cast<double>(spec->activation_bytes);
  if (bytes > static_cast<double>(memory_bytes) / 4) {
    return fmt("its states and activations (%.1f GiB on one rank) exceed a quarter of this machine's memory",
               bytes / (1 << 30));
  }
  const double seconds =
      5 * spec->flops_per_sample * static_cast<double>(config.train.micro_batch) / std::max(gemm_flops_per_s, 1.0);
  if (seconds > max_seconds) {
    return fmt("its 5 micro-batches would take about %.0f s at the GEMM's rate (more than %.0f s)", seconds,
               max_seconds);
  }
  return "";
}

StatusOr<Calibration> calibrate(const CalibrateOptions& o) {
  const auto start = Clock::now();
  Calibration c;
  ZDP_ASSIGN_OR_RETURN(c.gemm_flops_per_s, time_gemm(o));
  if (o.config != nullptr) {
    c.model_skipped = model_timing_refusal(*o.config, o.memory_bytes, c.gemm_flops_per_s, o.max_model_seconds);
  }
  if (o.config != nullptr && c.model_skipped.empty()) {
    const LogLevel level = log_threshold();
    set_log_threshold(LogLevel::kWarn);  // not the one-rank engine's start-up table
    StatusOr<double> micro = time_model_micro(*o.config);
    set_log_threshold(level);
    ZDP_ASSIGN_OR_RETURN(c.micro_s, std::move(micro));
    ZDP_ASSIGN_OR_RETURN(const trainer::ModelSpec spec, trainer::model_spec(*o.config));
    c.model_flops_per_s = spec.flops_per_sample * static_cast<double>(o.config->train.micro_batch) / c.micro_s;
  }
  c.gemm = "sgemm " + std::to_string(o.rows) + " x " + std::to_string(o.in) + " x " + std::to_string(o.out) + ", " +
           std::to_string(o.threads) + (o.threads == 1 ? " thread" : " threads");

  ZDP_ASSIGN_OR_RETURN(const auto times, time_link(o));
  c.small_s = std::max(times[0].first, times[1].first);
  c.large_s = std::max(times[0].second, times[1].second);
  // Ring all-reduce on K = 2: 2 steps of n / 2 bytes, t(n) = 2 alpha + n / beta.
  const double dn = static_cast<double>(o.large_bytes - o.small_bytes);
  const double slope = (c.large_s - c.small_s) / dn;  // 1 / beta
  if (!(slope > 0)) {
    return Status(StatusCode::kInternal, "calibration all-reduce: " + std::to_string(o.large_bytes) + " bytes took " +
                                             std::to_string(c.large_s * 1e3) + " ms, no longer than " +
                                             std::to_string(o.small_bytes) + " bytes (" + std::to_string(c.small_s * 1e3) +
                                             " ms): the machine is too busy to measure; give --link");
  }
  c.link.beta_bytes_per_s = 1.0 / slope;
  c.link.alpha_s = std::max(0.0, (c.small_s - static_cast<double>(o.small_bytes) * slope) / 2.0);
  c.link.origin = "calibrated (2-rank Gloo all-reduce over loopback)";
  c.seconds = since(start);
  return c;
}

}  // namespace zdp::launcher
