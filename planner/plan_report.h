// `dp-launch plan`: for the model of a config, the bytes per rank by category at stages
// 0-3 and several world sizes (plan_memory: what the engine will allocate, to the byte,
// plus the model's activation buffers), the communication per step, a predicted step time
// (plan_cost.h), which stages fit the device and the one to use. Pure: the caller gives
// the machine's numbers (device memory, link, FLOP/s) and where each came from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/plan_cost.h"
#include "trainer/models/model_spec.h"
#include "zdp/config.h"
#include "zdp/memory_plan.h"

namespace zdp::launcher {

struct PlannerInputs {
  std::vector<int> worlds;        // world sizes to plan; the configured one first
  DeviceKind device = DeviceKind::kCpu;
  int64_t device_memory = 0;      // bytes one rank may use
  std::string memory_origin;      // "this machine's RAM", "--device-memory", ...
  LinkModel link;                 // link.origin says calibrated / given / assumed
  // Two levels (--gpu): `link` inside a node of ranks_per_node ranks, inter_link between
  // nodes; ranks_per_node 0 = every rank on `link`.
  LinkModel inter_link;
  int ranks_per_node = 0;
  LinkTiers links() const { return LinkTiers{link, inter_link, ranks_per_node, device == DeviceKind::kCuda}; }
  double flops_per_s = 1;         // one rank's sustained compute at the configured world size
  std::string flops_origin;
  // The optimizer step over all parameters on one device (StepWork::optimizer_s); 0: not
  // modelled (CPU plans, models without a per-kernel model).
  double optimizer_s = 0;
  std::string optimizer_origin;
  // GPU plans (--gpu): the engine's kernels priced per world size and stage
  // (StepWork::gpu, engine_kernels.h) in place of optimizer_s's shares.
  const GpuSpec* gpu = nullptr;
  GpuEfficiency gpu_eff;
  EngineKernelShape engine;
  // CPU ranks on one node share its cores: with cpu_cores > 0, flops_per_s was measured
  // (or assumed) with flops_threads threads. A world of K ranks runs min(K, node_ranks) of
  // them on each node like this one (larger worlds are more such nodes, as the memory per
  // rank assumes: this machine's RAM / node_ranks), each with cores / those ranks threads,
  // or a share of the cores when they outnumber them: rank_flops_per_s(K).
  int cpu_cores = 0;
  int flops_threads = 1;
  int node_ranks = 1;
  double rank_flops_per_s(int world_size) const;
  // One rank's peak FLOP/s for MFU (--gpu: the part's dense peak for the config's dtype;
  // else profile.peak_tflops); 0: no MFU.
  double peak_flops_per_s = 0;
  // The rate is the GPU step model's model FLOPs over its predicted time (--gpu on a GPT):
  // the model FLOPs count attention whole, fused attention computes its causal half, so
  // that rate may pass the peak at long sequences and is not refused for it.
  bool model_flops_rate = false;
};

// Tokens per second and MFU of a planned step (the per-world rows): the global batch's
// tokens over the step, and its model FLOPs (ModelSpec::flops_per_sample, the count
// dp-train's console and the profile use) over the step and K peaks; MFU -1 without a peak.
struct StepRates {
  double tokens_per_s = 0;
  double mfu = -1;
};
StepRates step_rates(const trainer::ModelSpec& model, int64_t global_batch, int world_size, double step_s,
                     double peak_flops_per_s);

struct StagePlan {
  int stage = 0;
  GradAccumulation accumulate = GradAccumulation::kLocal;  // zero.accumulate as planned (local at 0-1)
  MemoryPlan memory;              // the engine's buffers
  int64_t formula_bytes = 0;      // the ZeRO formula (docs/design.md "Memory per rank"; model states, no padding)
  int64_t activations = 0;        // the model's activation and scratch buffers
  int64_t library_workspace = 0;  // GPUs: cuBLASLt's and cuDNN's fused-attention workspaces
  int64_t total = 0;              // memory.total() + activations + library_workspace
  bool fits = false;
  StepPrediction time;
  // The same stage with the compute dtype's ring collectives, when the config quantizes
  // (stages 1-3): what compression is compared with. step_s 0 when not planned.
  StepPrediction uncompressed;
};

struct WorldPlan {
  int world_size = 1;
  double flops_per_s = 0;         // one rank's compute rate at this world size
  int64_t global_batch = 0;       // world_size x micro_batch x accum_steps
  int64_t accum_steps = 1;
  std::vector<StagePlan> stages;  // 0..3
  int recommended = -1;           // -1: no stage fits
  std::string reason;
};

struct PlanReport {
  std::string config_path;
  trainer::ModelSpec model;
  int64_t micro_batch = 1;
  std::vector<WorldPlan> worlds;
};

// Every world size keeps the config's per-rank micro-batch and accumulation (the global
// batch grows with K), as `dp-launch scale` runs them. kInvalidArgument when the config's
// model or engine options are refused.
StatusOr<PlanReport> build_plan_report(const Config& config, const std::string& config_path, const PlannerInputs& in);

// The console table: a header with the model and the assumptions, then per world size one
// row per stage (MiB per rank by category, fits, MiB sent per step, predicted ms) and the
// recommendation.
std::string format_plan(const PlanReport& report, const PlannerInputs& in);

// The same as JSON lines: {"kind": "model"}, {"kind": "assumptions"}, one {"kind":
// "stage"} per world size and stage, one {"kind": "recommendation"} per world size.
std::vector<nlohmann::json> plan_json(const PlanReport& report, const PlannerInputs& in);

}  // namespace zdp::launcher
