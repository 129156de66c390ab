// The `dp-launch plan` command: reads the config, finds this machine's numbers (or takes
// them from the flags, or measures them with --calibrate), prints the plan and writes
// plan.jsonl (see plan_command.h).
#include "planner/plan_command.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <thread>

#include "core/internal/cli_parse.h"
#include "core/internal/cli_range.h"
#include "core/internal/usable_cpus.h"
#include "core/internal/usable_memory.h"
#include "runtime/internal/config_limits.h"
#include "planner/format_numbers.h"
#include "planner/gpu_step_model.h"
#include "planner/json_lines.h"
#include "planner/kernel_profile_file.h"
#include "planner/plan_calibrate.h"
#include "planner/plan_plot.h"
#include "planner/plan_report.h"
#include "planner/profile_compare.h"
#include "planner/profile_diff.h"
#include "trainer/models/model_spec.h"
#include "zdp/config.h"
#include "zdp/device.h"

namespace zdp::launcher {
namespace {

// Used when neither --link nor --calibrate gives the link: loopback TCP between CPU ranks,
// and an NVLink-class link between GPUs. Order-of-magnitude numbers, and labelled so.
// The GPU latencies are per ring hop, as NCCL's own tuning model prices a ring with the
// Simple protocol that large buckets take (src/graph/tuning.cc hwLat: 3.4 us a hop over
// NVLink, 14 us over the network in NCCL 2.2x; plan_cost.h counts the hops as it does).
constexpr double kCpuAlphaS = 50e-6, kCpuBeta = 2e9;
constexpr double kGpuAlphaS = 3.4e-6, kGpuBeta = 100e9;
constexpr double kInterNodeAlphaS = 14e-6;
// And for compute without --flops or --calibrate: one CPU rank's OpenBLAS, and about 40%
// of an H100's dense bf16 peak.
constexpr double kCpuFlops = 20e9, kGpuFlops = 400e12;
// A model the per-kernel step model does not cover, on a --gpu part: this share of its peak.
constexpr double kAssumedGpuEfficiency = 0.4;
// Of a GPU's memory, what zdp's buffers cannot have: the CUDA context (a few hundred MiB
// with lazy module loading), the library handles and NCCL's channel buffers. Assumed.
constexpr int64_t kCudaReservedBytes = int64_t{1} << 30;

void say(const std::string& line) { std::fprintf(stderr, "dp-launch plan: %s\n", line.c_str()); }

}  // namespace

int64_t parse_byte_size(const std::string& text) {
  // A plain decimal number first: stod alone would also take " 8", "+8", "0x10", "inf".
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.')) return -1;
  if (text.size() > 1 && (text[1] == 'x' || text[1] == 'X')) return -1;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    return -1;
  }
  std::string unit = text.substr(used);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const std::pair<const char*, double> units[] = {{"", 1},     {"b", 1},          {"kb", 1e3},       {"mb", 1e6},
                                                  {"gb", 1e9}, {"tb", 1e12},      {"kib", 1024.0},   {"mib", 1048576.0},
                                                  {"gib", 1073741824.0},          {"tib", 1099511627776.0}};
  for (const auto& [name, scale] : units) {
    // Past 2^62 bytes (4 EiB) is no device's memory, and the cast would overflow.
    if (unit == name && value >= 0 && value * scale <= 0x1p62) return static_cast<int64_t>(value * scale);
  }
  return -1;
}

void add_plan_options(CLI::App& cmd, PlanArgs& a) {
  // An empty value (a script's unset $DIR) read as "not given": a comparison silently did not happen.
  const CLI::Validator given = non_empty();
  cmd.add_option("config", a.config_path, "the job's TOML config")->required();
  cmd.add_option("--set", a.sets, "override one key: --set section.key=value (repeatable)");
  cmd.add_option("--world", a.worlds, "more world sizes to plan, e.g. --world 8,64 (the configured one comes first)")
      ->delimiter(',')
      ->check(integer_range(1, int64_t{1} << 20));
  cmd.add_option("--device-memory", a.device_memory,
                 "memory one rank may use, e.g. 80GiB (default: the GPU's memory, or this machine's memory (its cgroup's limit where lower) / local ranks)")
      ->check(given);
  cmd.add_option("--link", a.link, "the link between ranks as GB/s,alpha_us, e.g. 100,10 (default: assumed, or --calibrate)")
      ->check(given);
  cmd.add_option("--flops", a.gflops, "one rank's sustained GFLOP/s (default: assumed, or --calibrate)")
      ->check(finite_range(1e-3, 1e9));  // up to an exaFLOP/s a rank
  cmd.add_option("--gpu", a.gpu,
                 "plan for this GPU from any machine (" + known_gpu_names() +
                     "): its memory, NVLink, and a per-kernel predicted step time and MFU for GPT configs")
      ->check(given);
  cmd.add_option("--gpus-per-node", a.gpus_per_node,
                 "with --gpu: ranks sharing a node's NVLink; more ranks meet over the inter-node link (default: a "
                 "multi-node config's launch.nproc_per_node, else the GPU table's node, 8)")
      ->check(zdp::integer_range(1, 1024));
  cmd.add_option("--nodes", a.nodes, "with --gpu: also plan this many nodes of --gpus-per-node ranks")
      ->check(zdp::integer_range(1, 1 << 20));
  cmd.add_option("--from-profile", a.from_profile,
                 "a GPT run profiled with profile.kernels = true: its kernels.json and profile.jsonl beside the "
                 "per-kernel prediction, the efficiencies they imply, and the plan with those (--gpu defaults to "
                 "the profile's GPU)")
      ->check(given);
  cmd.add_option("--baseline", a.baseline,
                 "with --from-profile: another profiled run of the same config on the same kind of device (e.g. "
                 "before a change); both runs' regions side by side, their ratio and which moved by 3% or more (two "
                 "CPU runs too, without --gpu)")
      ->check(given);
  cmd.add_flag("--calibrate", a.calibrate,
               "measure this machine (CPU ranks): one rank's GEMM rate and a 2-rank Gloo all-reduce over loopback (a few s)");
}

int run_plan(const PlanArgs& a) {
  StatusOr<Config> config = load_config(a.config_path, a.sets);
  if (!config.ok()) {
    say("invalid configuration:\n" + config.status().message());
    return 2;
  }
  if (a.calibrate && (!a.link.empty() || a.gflops > 0)) {
    say("--calibrate measures the link and the compute rate that --link and --flops give: use one or the other");
    return 2;
  }
  // --from-profile: read and checked before anything is planned; its GPU is the default.
  std::string gpu_name = a.gpu;
  MeasuredKernels measured;
  std::string diffed;        // --baseline's table
  bool cpu_profile = false;  // --from-profile of CPU ranks: no step model, only --baseline's table
  if (!a.baseline.empty() && a.from_profile.empty()) {
    say("--baseline " + a.baseline + " is compared with the run of --from-profile DIR: give both");
    return 2;
  }
  if (!a.from_profile.empty()) {
    if (config->model.kind != ModelKind::kGpt) {
      say("--from-profile compares the GPT step model with a profile; " + a.config_path + " has model.kind = \"" +
          to_string(config->model.kind) + "\"");
      return 2;
    }
    StatusOr<MeasuredKernels> m = read_measured_kernels(a.from_profile);
    if (!m.ok()) {
      say("--from-profile " + a.from_profile + ": " + m.status().message());
      return 2;
    }
    measured = std::move(*m);
    // A CPU profile has no GPU step model to meet, but two CPU runs side by side
    // (--baseline) are as telling as two GPU runs.
    cpu_profile = measured.device_kind != "cuda";
    if (cpu_profile && (a.baseline.empty() || !a.gpu.empty())) {
      say("--from-profile " + a.from_profile + ": its kernels.json was measured on " + measured.device_kind +
          " ranks ('" + measured.device + "'); the GPU step model predicts a GPU: compare a profile of a GPU run, " +
          "or two CPU runs side by side: " + (a.gpu.empty() ? "" : "without --gpu, ") + "--baseline DIR0");
      return 2;
    }
    if (!a.baseline.empty()) {
      StatusOr<MeasuredKernels> b = read_measured_kernels(a.baseline);
      if (!b.ok()) {
        say("--baseline " + a.baseline + ": " + b.status().message());
        return 2;
      }
      StatusOr<ProfileDiff> d = diff_profiles(measured, *b);
      if (!d.ok()) {
        say("--baseline " + a.baseline + ": " + d.status().message());
        return 2;
      }
      diffed = format_profile_diff(*d, measured, *b) + "\n";
    }
    const std::string measured_gpu = cpu_profile ? "" : gpu_name_of_device(measured.device);
    if (!a.gpu.empty() && !cpu_profile && measured_gpu != a.gpu) {
      // The efficiencies a profile implies are the measured times over --gpu's datasheet:
      // another part's (an H200 run read against an A100) gave "matmul 297%".
      if (!measured_gpu.empty()) {
        say("--from-profile " + a.from_profile + " was measured on '" + measured.device + "' (" + measured_gpu +
            "), not on --gpu " + a.gpu + ": its efficiencies are that GPU's; leave out --gpu, or give --gpu " +
            measured_gpu);
        return 2;
      }
      say("note: --from-profile " + a.from_profile + " was measured on '" + measured.device +
          "', which the GPU table does not know: its efficiencies are read against --gpu " + a.gpu +
          "'s datasheet, so they are only as right as that part is like it");
    }
    if (gpu_name.empty() && !cpu_profile) gpu_name = measured_gpu;
    if (gpu_name.empty() && !cpu_profile) {
      say("--from-profile " + a.from_profile + ": the profile's device '" + measured.device +
          "' is not a GPU this planner knows (" + known_gpu_names() + "); give --gpu");
      return 2;
    }
  }
  const GpuSpec* spec = nullptr;
  if (!gpu_name.empty()) {
    spec = find_gpu(gpu_name);
    if (!spec) {
      say("--gpu '" + gpu_name + "' is not a GPU this planner knows (" + known_gpu_names() + ")");
      return 2;
    }
    if (config->launch.backend == Backend::kGloo) {
      say(std::string(a.gpu.empty() ? "a profile of a GPU (" + gpu_name + ")" : "--gpu " + gpu_name) +
          " with launch.backend = \"gloo\" in " + a.config_path +
          ": Gloo ranks run on CPUs; use a nccl config (or --set launch.backend=nccl)");
      return 2;
    }
    if (a.calibrate) {
      say("--calibrate measures this machine's CPU ranks; it does not combine with --gpu");
      return 2;
    }
  } else if (a.gpus_per_node > 0 || a.nodes > 0) {
    say("--gpus-per-node and --nodes need --gpu (its table gives the NVLink and inter-node links)");
    return 2;
  }
  // With --gpu, "auto" ranks per node are the planned node's GPUs.
  const int gpus_per_node = spec ? (a.gpus_per_node > 0 ? a.gpus_per_node : spec->gpus_per_node) : 0;
  const int cuda_devices = spec ? gpus_per_node : cuda_device_count();
  const int local = resolve_nproc_per_node(config->launch, cuda_devices);
  if (spec && local > gpus_per_node) {
    say(a.config_path + ": launch.nproc_per_node = " + std::to_string(local) + " ranks on a node of " +
        std::to_string(gpus_per_node) + " " + spec->name + " GPUs (" +
        (a.gpus_per_node > 0 ? "--gpus-per-node" : "the GPU table's node") + "): one rank per GPU");
    return 2;
  }
  const int64_t configured_world = int64_t{local} * config->launch.nnodes;
  if (const std::string excess = config_internal::world_size_excess(configured_world); !excess.empty()) {
    say(a.config_path + ": " + std::to_string(local) + " ranks per node x launch.nnodes (" +
        std::to_string(config->launch.nnodes) + ")" + excess);
    return 2;
  }
  const int configured = static_cast<int>(configured_world);
  // The configured job as dp-launch would refuse it (a global batch that the world does not
  // divide was planned as a smaller one; the mlp in 16-bit as if dp-train could run it).
  Status valid = validate_for_world(*config, configured);
  if (valid.ok()) valid = check_model_support(*config);
  if (!valid.ok()) {
    say("invalid configuration for its " + std::to_string(configured) + " ranks:\n" + valid.message());
    return 2;
  }
  const bool gpu = cuda_devices > 0 && config->launch.backend != Backend::kGloo;

  PlannerInputs in;
  in.device = gpu ? DeviceKind::kCuda : DeviceKind::kCpu;
  in.worlds.push_back(configured);
  for (int k : a.worlds) {
    if (std::find(in.worlds.begin(), in.worlds.end(), k) == in.worlds.end()) in.worlds.push_back(k);
  }

  if (!a.device_memory.empty()) {
    in.device_memory = parse_byte_size(a.device_memory);
    if (in.device_memory <= 0) {
      say("--device-memory '" + a.device_memory + "' is not a size such as 80GiB, 512MiB or 1.5TB");
      return 2;
    }
    in.memory_origin = "--device-memory";
  } else if (spec) {
    in.device_memory = static_cast<int64_t>(spec->memory_bytes) - kCudaReservedBytes;
    in.memory_origin = "--gpu " + spec->name + ": " + spec->description + ", " +
                       format_bytes(static_cast<int64_t>(spec->memory_bytes)) + " as nvidia-smi counts it, less " +
                       format_bytes(kCudaReservedBytes) + " assumed for the CUDA context and NCCL";
  } else if (gpu) {
    StatusOr<int64_t> bytes = cuda_device_memory(0);
    if (!bytes.ok()) {
      say("cannot read the GPU's memory (give --device-memory): " + bytes.status().message());
      return 2;
    }
    in.device_memory = *bytes - kCudaReservedBytes;
    in.memory_origin = "cuda:0's memory, " + format_bytes(*bytes) + ", less " + format_bytes(kCudaReservedBytes) +
                       " assumed for the CUDA context and NCCL";
  } else {
    const int64_t ram = usable_memory_bytes();  // the cgroup's limit where it is lower
    in.device_memory = ram / local;
    in.memory_origin = "this machine's memory, " + format_bytes(ram) + ", / " + std::to_string(local) + " local ranks";
  }

  in.link = {gpu ? kGpuAlphaS : kCpuAlphaS, gpu ? kGpuBeta : kCpuBeta,
             gpu ? "assumed: an NVLink-class link, NCCL's 3.4 us a ring hop; give --link" : "assumed: loopback TCP; --calibrate measures it"};
  in.flops_per_s = gpu ? kGpuFlops : kCpuFlops;
  in.flops_origin = gpu ? "assumed: ~40% of an H100's bf16 peak; give --flops" : "assumed; --calibrate measures it";
  std::string gpu_table;
  if (spec) {
    in.link = {kGpuAlphaS, spec->nvlink_bytes_per_s, "--gpu " + spec->name + ": NVLink, one direction per GPU (datasheet); NCCL's 3.4 us a ring hop"};
    // Ranks per node for every planned world: --gpus-per-node when given; else a job of
    // several nodes keeps its configured ranks per node (which may leave GPUs of a node
    // idle: the links are shared by the ranks that run), and a one-node config (a job on
    // one GPU planned for a cluster) the table's node of G GPUs. The config's own ranks
    // per node were used for every world: gpt2-124m's one planned each rank as a node of
    // its own, over InfiniBand, and --gpus-per-node did nothing.
    in.ranks_per_node = a.gpus_per_node > 0 ? a.gpus_per_node : config->launch.nnodes > 1 ? local : spec->gpus_per_node;
    in.inter_link = {kInterNodeAlphaS, spec->internode_bytes_per_s,
                     "--gpu " + spec->name + ": one InfiniBand NIC per GPU, one direction (datasheet); NCCL's 14 us a ring hop"};
    const int64_t nodes_world = static_cast<int64_t>(a.nodes) * in.ranks_per_node;
    if (const std::string excess = config_internal::world_size_excess(nodes_world); !excess.empty()) {
      say("--nodes " + std::to_string(a.nodes) + " x " + std::to_string(in.ranks_per_node) + " GPUs per node" + excess);
      return 2;
    }
    if (a.nodes > 0 &&
        std::find(in.worlds.begin(), in.worlds.end(), static_cast<int>(nodes_world)) == in.worlds.end()) {
      in.worlds.push_back(static_cast<int>(nodes_world));
    }
    if (config->model.kind == ModelKind::kGpt) {
      StatusOr<trainer::ModelSpec> model = trainer::model_spec(*config);
      if (!model.ok()) {
        say("cannot plan " + a.config_path + ":\n" + model.status().message());
        return 2;
      }
      const ModelConfig& m = config->model;
      GptShape shape;
      shape.layers = m.n_layers, shape.d_model = m.d_model, shape.heads = m.n_heads, shape.vocab = m.vocab_size;
      shape.seq = m.seq_len, shape.micro_batch = config->train.micro_batch, shape.accum_steps = 1;
      shape.elem_bytes = static_cast<int64_t>(dtype_size(m.dtype)), shape.params = model->psi;
      // As the engine sizes the optimizer's state (engine/src/buffer_plan.cc optimizer_moments).
      shape.adamw = config->optim.name == OptimizerKind::kAdamW;
      shape.optimizer_moments = shape.adamw ? 2 : (config->optim.beta1 != 0.0 ? 1 : 0);
      shape.fused_attention = model->fused_attention;  // plans_fused_attention (trainer/models/model.h)
      shape.dgelu_epilogue = plans_dgelu_epilogue(config->train.deterministic, m.d_model);
      // The engine's kernels of one GPU (engine_kernels.h) on the config's bucket layout there.
      shape.reduce_bytes = static_cast<int64_t>(dtype_size(config->zero.reduce_dtype)), shape.stage = config->zero.stage;
      shape.sharded_accumulation = config->zero.accumulate == GradAccumulation::kSharded;
      shape.deterministic = config->train.deterministic;
      if (StatusOr<EngineOptions> one = EngineOptions::from(*config, 1); one.ok()) {
        one->nested_layer_scopes = model->nested_layer_scopes;
        if (StatusOr<MemoryPlan> layout = plan_memory(model->params, *one, 1, DeviceKind::kCuda); layout.ok()) {
          shape.buckets = layout->bucket_elems;
        }
      }
      GpuEfficiency eff;
      std::string compared, calibrated_from;
      if (!a.from_profile.empty()) {
        StatusOr<ProfileComparison> c = compare_with_profile(shape, *spec, eff, measured);
        if (!c.ok()) {
          say("--from-profile " + a.from_profile + ": " + c.status().message());
          return 2;
        }
        compared = format_comparison(*c, measured, *spec);
        // What the calibration cannot carry over to this config (it predicts the config's
        // path with the efficiencies of the profile's).
        compared += profile_differences(shape, to_string(m.dtype), measured) + "\n";
        eff = c->calibrated;
        if (c->any_calibrated()) calibrated_from = ", efficiencies calibrated from " + a.from_profile;
      }
      const GpuStepPrediction micro = predict_gpt_step(shape, *spec, eff);
      in.peak_flops_per_s = config->model.dtype == DType::kF32 ? spec->fp32_flops : spec->bf16_flops;
      shape.accum_steps = std::max<int64_t>(1, config->train.global_batch / (config->train.micro_batch * configured));
      gpu_table = format_gpu_step(predict_gpt_step(shape, *spec), *spec, GpuEfficiency{}) + "\n" + compared;
      // The world-size table's compute rate: the model's FLOPs over the predicted time of a
      // micro-batch without the optimizer step, which the table adds once per step (a 1/K
      // shard of it at stages 1-3), so that at one rank it repeats the per-kernel step.
      double optimizer_s = 0;
      for (const KernelCost& k : micro.kernels) {
        if (k.per_step) optimizer_s += k.time_s;
      }
      in.flops_per_s = micro.model_flops / (micro.step_s - optimizer_s);
      in.optimizer_s = engine_kernel_times(engine_shape(shape), *spec, eff).optimizer_s;
      in.gpu = spec, in.gpu_eff = eff, in.engine = engine_shape(shape), in.model_flops_rate = true;
      in.optimizer_origin =
          "--gpu " + spec->name + ": the per-kernel model's optimizer" + calibrated_from + ", the table above";
      in.flops_origin = "predicted per kernel for one " + spec->name + calibrated_from + " (the table above)";
    } else {
      // 40% of the part's peak for the config's dtype (a flat 400 TFLOP/s was 20x an
      // A100's fp32 peak, and made communication look like the whole step).
      const double peak = config->model.dtype == DType::kF32 ? spec->fp32_flops : spec->bf16_flops;
      in.flops_per_s = kAssumedGpuEfficiency * peak;
      in.peak_flops_per_s = peak;
      char origin[160];
      std::snprintf(origin, sizeof(origin), "assumed: %.0f%% of --gpu %s's %s peak (the per-kernel model covers GPT "
                    "configs only; give --flops)", kAssumedGpuEfficiency * 100, spec->name.c_str(),
                    config->model.dtype == DType::kF32 ? "fp32" : "bf16/fp16");
      in.flops_origin = origin;
    }
  }
  // profile.peak_tflops, as dp-train's console takes it: the rows' MFU (a CPU has no known peak).
  if (config->profile.peak_tflops > 0) in.peak_flops_per_s = config->profile.peak_tflops * 1e12;
  const int cores = usable_cpu_cores();  // the affinity mask and CPU quota, not the host
  if (!gpu && config->launch.nnodes == 1) {
    in.cpu_cores = cores;
    in.flops_threads = std::max(1, cores / local);
    in.node_ranks = local;
  }
  if (a.calibrate) {
    if (gpu) {
      say("--calibrate measures CPU ranks (OpenBLAS, Gloo over loopback); for GPU ranks give --link and --flops");
      return 2;
    }
    CalibrateOptions co;
    co.threads = std::max(1, cores / local);
    co.rows = config->train.micro_batch * (config->model.kind == ModelKind::kGpt ? config->model.seq_len : 1);
    co.in = config->model.d_model;
    co.out = 4 * static_cast<int64_t>(config->model.d_model);
    // Timed on this machine: its memory bounds the model (model_timing_refusal).
    co.config = &*config;
    co.memory_bytes = usable_memory_bytes();
    StatusOr<Calibration> cal = calibrate(co);
    if (!cal.ok()) {
      say("calibration failed: " + cal.status().message());
      return 1;
    }
    in.link = cal->link;
    in.link.origin += fmt(", %.0f us at 4 KiB", cal->small_s * 1e6) + fmt(", %.2f ms at 32 MiB", cal->large_s * 1e3);
    if (cal->model_flops_per_s > 0) {
      in.flops_per_s = cal->model_flops_per_s;
      in.flops_origin = "calibrated: micro-batches of this model on one CPU rank, " +
                        fmt("%.1f ms each", cal->micro_s * 1e3) + "; a bare " + cal->gemm + " reaches " +
                        fmt("%.3g GFLOP/s", cal->gemm_flops_per_s / 1e9);
    } else {
      in.flops_per_s = cal->gemm_flops_per_s;
      in.flops_origin = "calibrated: " + cal->gemm + " (GEMM only: an upper bound on the model's rate" +
                        (cal->model_skipped.empty() ? "" : "; the model not timed: " + cal->model_skipped) + ")";
    }
    in.flops_origin += fmt("; calibration took %.1f s", cal->seconds);
  }
  if (!a.link.empty()) {
    double gbps = 0, alpha_us = -1;
    char extra = 0;
    // Written so that NaN fails: 1 MB/s to 1 PB/s and up to 1 s per message bound what a
    // link can be (1e-300 GB/s printed 300-digit times that overran the table's lines).
    if (std::sscanf(a.link.c_str(), "%lf,%lf%c", &gbps, &alpha_us, &extra) != 2 || !(gbps >= 1e-3 && gbps <= 1e6) ||
        !(alpha_us >= 0 && alpha_us <= 1e6)) {
      say("--link '" + a.link + "' is not GB/s,alpha_us with GB/s in [0.001, 1e6] and alpha_us in [0, 1e6] (e.g. "
          "100,10: 100 GB/s and 10 us per message)");
      return 2;
    }
    in.link = {alpha_us * 1e-6, gbps * 1e9, "--link"};
  }
  // CPU ranks: a world past this node's ranks is more nodes like it (as the memory per rank
  // assumes), over the same link for want of another: the ring costs what a flat one did,
  // and the compressed exchanges (zero.compress = "inter-node") and the bytes across nodes
  // are priced per node (every rank was one node's: no inter-node bytes, no difference).
  if (!gpu) {
    in.ranks_per_node = local;
    in.inter_link = in.link;
    in.inter_link.origin = "assumed: the link above between nodes too";
  }
  if (a.gflops > 0) {
    in.flops_per_s = a.gflops * 1e9;
    in.flops_origin = "--flops";
    in.cpu_cores = 0;  // as given, at every world size
  }

  StatusOr<PlanReport> report = build_plan_report(*config, a.config_path, in);
  if (!report.ok()) {
    say("cannot plan " + a.config_path + ":\n" + report.status().message());
    return 2;
  }
  gpu_table += diffed;  // after the step model's comparison, where there is one
  return publish_report("dp-launch plan", gpu_table + format_plan(*report, in), config->launch.log_dir, "plan.jsonl",
                        plan_json(*report, in), {"plan.svg", plan_svg(*report, in)});
}

}  // namespace zdp::launcher
