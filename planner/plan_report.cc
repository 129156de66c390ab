// The planner's report: per world size and stage, memory (plan_memory + activations),
// communication and predicted step time, and the console table (the JSON lines:
// plan_report_json.cc).
#include "planner/plan_report.h"

#include <algorithm>
#include <cstdio>

#include "kernels/gemm.h"
#include "planner/format_numbers.h"
#include "kernels/quantize.h"
#include "zdp/comm.h"

namespace zdp::launcher {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), bytes >= 100 * kMiB ? "%.0f" : "%.2f", bytes / kMiB);
  return buf;
}

// Predicted steps within this fraction of the fastest count as equal: the lower stage is
// recommended (less memory traffic, simpler), unless a higher one is faster by more.
constexpr double kStepTie = 0.01;

// The lowest stage that fits whose predicted step is within kStepTie of the fastest that
// fits. A higher stage can be faster by its sharded optimizer step (GPU plans model it) or
// by sending less: stage 0 all-reduces in the reduce dtype (fp32 by default) what the
// reduce-scatter and all-gather of stages 1-2 send partly in the compute dtype (bf16).
// `compressed`: the config quantizes its communication, which stage 0 cannot (it is
// planned uncompressed), so the recommendation starts at stage 1.
std::string recommend(WorldPlan& w, int64_t memory, bool compressed) {
  const auto eligible = [&](const StagePlan& s) { return s.fits && !(compressed && s.stage == 0); };
  const StagePlan* lowest = nullptr;
  const StagePlan* fastest = nullptr;
  for (const StagePlan& s : w.stages) {
    if (!eligible(s)) continue;
    if (lowest == nullptr) lowest = &s;
    if (fastest == nullptr || s.time.step_s < fastest->time.step_s) fastest = &s;
  }
  if (lowest == nullptr) {
    // The stage that comes closest (stage 3 is not always the smallest: its gathered layer
    // groups can outweigh what sharding saves on a small model).
    const StagePlan* smallest = &w.stages[0];
    for (const StagePlan& s : w.stages) {
      if (s.total < smallest->total) smallest = &s;
    }
    if (compressed && smallest->fits) {
      return "none with compressed communication: only stage 0 fits in " + format_bytes(memory) +
             " per rank, and it all-reduces uncompressed; leave out zero.reduce_dtype/zero.gather_dtype's "
             "quantization to run it, or use more ranks.";
    }
    return "none: no stage fits in " + format_bytes(memory) + " per rank (the smallest, stage " +
           std::to_string(smallest->stage) + ", needs " + format_bytes(smallest->total) +
           "); use more ranks, a smaller train.micro_batch, or a device with more memory.";
  }
  const StagePlan* pick = lowest;
  for (const StagePlan& s : w.stages) {
    if (eligible(s) && s.time.step_s <= fastest->time.step_s * (1 + kStepTie)) {
      pick = &s;
      break;
    }
  }
  const StagePlan& s = *pick;
  w.recommended = s.stage;
  char t[200];
  if (pick != lowest) {
    std::snprintf(t, sizeof(t), " (predicted %.1f ms per step; stage %d %.1f ms, stage 3 %.1f ms).",
                  s.time.step_s * 1e3, lowest->stage, lowest->time.step_s * 1e3, w.stages[3].time.step_s * 1e3);
    // Say what makes it faster: its share of the optimizer step, its communication (stage
    // 0's fp32 all-reduce of bf16 gradients sends more than a reduce-scatter's), or both.
    const bool less_optimizer = s.time.optimizer_s < lowest->time.optimizer_s;
    const bool less_waiting = s.time.exposed_comm_s < lowest->time.exposed_comm_s;
    const std::string because = less_optimizer && less_waiting ? "its 1/K share of the optimizer step and less exposed communication"
                                : less_optimizer                ? "its 1/K share of the optimizer step, with its communication"
                                                                : "less exposed communication";
    return "stage " + std::to_string(s.stage) + ", the lowest stage that fits within 1% of the fastest (" +
           format_bytes(s.total) + " of " + format_bytes(memory) + " per rank): faster than stage " +
           std::to_string(lowest->stage) + " by " + because + t;
  }
  std::string why = "stage " + std::to_string(s.stage) + ", the lowest stage " +
                    (compressed ? "with compressed communication " : "") + "that fits (" + format_bytes(s.total) +
                    " of " + format_bytes(memory) + " per rank";
  if (s.stage > 0 && !(compressed && s.stage == 1)) {
    why += "; stage " + std::to_string(s.stage - 1) + " needs " + format_bytes(w.stages[s.stage - 1].total);
  }
  why += compressed ? "): stage 0 all-reduces uncompressed; no stage above it is more than 1% faster"
                    : "): no stage above it is more than 1% faster";
  if (s.stage == 3) return why + ".";
  std::snprintf(t, sizeof(t), " (predicted %.1f ms per step, stage 3 %.1f ms)", s.time.step_s * 1e3,
                w.stages[3].time.step_s * 1e3);
  return why + t + ".";
}

// Quantized communication as the engine runs it (engine/src/quantized_exchange.h): the
// gradient exchange is an all-to-all of chunks (fp32 to same-node peers with compress =
// "inter-node"); the gather a ring all-gather of chunks, or with "inter-node" an
// all-to-all (compute dtype to same-node peers). Bytes per element from the largest
// slice's chunk (scales and padding included).
void set_quantized_wire(StepWork& work, const ZeroConfig& zero, const std::vector<int64_t>& buckets, int K) {
  const int64_t slice = buckets.empty() ? 0 : *std::max_element(buckets.begin(), buckets.end()) / K;
  if (slice <= 0) return;
  const bool inter_node = zero.compress == CompressScope::kInterNode;
  auto per_elem = [&](WireQuant q) {
    return static_cast<double>(kernels::quant_chunk_bytes(slice, wire_bits(q))) / static_cast<double>(slice);
  };
  if (zero.reduce_quant != WireQuant::kNone) {
    work.reduce_all_to_all = true;
    work.reduce_bytes = per_elem(zero.reduce_quant);
    work.reduce_bytes_intra = inter_node ? 4.0 : work.reduce_bytes;
  }
  if (zero.gather_quant != WireQuant::kNone) {
    work.gather_all_to_all = inter_node;
    work.gather_bytes_intra = inter_node ? work.gather_bytes : per_elem(zero.gather_quant);
    work.gather_bytes = per_elem(zero.gather_quant);
  }
}

}  // namespace

double PlannerInputs::rank_flops_per_s(int world_size) const {
  if (cpu_cores <= 0 || world_size < 1) return flops_per_s;
  const double per_thread = flops_per_s / std::max(1, flops_threads);
  // The launcher gives each of K local ranks cores / K threads (at least one).
  const int here = std::min(world_size, std::max(1, node_ranks));
  const double share = here <= cpu_cores ? static_cast<double>(cpu_cores / here)
                                         : static_cast<double>(cpu_cores) / here;
  return per_thread * share;
}

StatusOr<PlanReport> build_plan_report(const Config& config, const std::string& config_path, const PlannerInputs& in) {
  // A step computes at most at the rate it is given, so MFU <= rate / peak: a rate above the
  // peak printed MFU 153% (--flops on an H100), 1986% (a CPU's profile.peak_tflops = 0.001).
  // Each world size's rate (CPU ranks share a node's cores: fewer ranks, more threads each).
  for (const int K : in.worlds) {
    const double rate = in.rank_flops_per_s(K);
    if (in.peak_flops_per_s <= 0 || in.model_flops_rate || rate <= in.peak_flops_per_s) continue;
    const std::string peak = config.profile.peak_tflops > 0
                                 ? config.where("profile.peak_tflops") + ": profile.peak_tflops"
                                 : std::string("the GPU's datasheet");
    return Status(StatusCode::kInvalidArgument,
                  "the compute rate " + fmt("%.4g", rate / 1e9) + " GFLOP/s per rank at world size " +
                      std::to_string(K) + " (" + in.flops_origin + ") is above the peak " +
                      fmt("%.4g", in.peak_flops_per_s / 1e9) + " GFLOP/s that MFU divides by (" + peak +
                      "): every MFU would exceed 100%");
  }
  PlanReport report;
  report.config_path = config_path;
  ZDP_ASSIGN_OR_RETURN(report.model, trainer::model_spec(config));
  report.micro_batch = config.train.micro_batch;
  const int configured = in.worlds.empty() ? 1 : in.worlds.front();
  const int64_t accum = resolved_accum_steps(config.train, configured);
  const int c = static_cast<int>(dtype_size(config.model.dtype));
  const int r = static_cast<int>(dtype_size(config.zero.reduce_dtype));
  for (int K : in.worlds) {
    WorldPlan w;
    w.world_size = K;
    w.flops_per_s = in.rank_flops_per_s(K);
    w.accum_steps = accum;
    w.global_batch = K * config.train.micro_batch * accum;
    for (int stage = 0; stage <= 3; ++stage) {
      Config at = config;
      at.zero.stage = stage;
      at.train.global_batch = w.global_batch;
      at.train.accum_steps = accum;
      if (K != configured) {
        // The global batch here is the planner's (K x micro_batch x accum_steps): an error
        // names it so, not the line of the config that set the configured world's.
        at.origins.erase("train.global_batch");
        at.origins.erase("train.accum_steps");
        at.source = "world size " + std::to_string(K) + " (global batch " + std::to_string(K) + " x micro_batch " +
                    std::to_string(config.train.micro_batch) + " x accum_steps " + std::to_string(accum) + ")";
      }
      // zero.accumulate = "sharded" is a stage 2-3 choice: stages 0-1 are planned local.
      if (stage < 2) at.zero.accumulate = GradAccumulation::kLocal;
      // Quantized communication is a stage 1-3 choice: stage 0 is planned uncompressed.
      if (stage == 0) {
        at.zero.reduce_quant = at.zero.gather_quant = WireQuant::kNone;
        at.zero.error_feedback = true;
        at.zero.compress = CompressScope::kAll;
      }
      StatusOr<EngineOptions> eopts = EngineOptions::from(at, K);
      if (!eopts.ok()) {
        return eopts.status().with_context("planning stage " + std::to_string(stage) + " on " + std::to_string(K) +
                                           " ranks");
      }
      eopts->nested_layer_scopes = report.model.nested_layer_scopes;  // as dp-train sets it
      StagePlan s;
      s.stage = stage;
      s.accumulate = at.zero.accumulate;
      ZDP_ASSIGN_OR_RETURN(s.memory, plan_memory(report.model.params, *eopts, K, in.device));
      s.formula_bytes = s.memory.formula;
      s.activations = report.model.activation_bytes;
      s.library_workspace =
          in.device == DeviceKind::kCuda
              ? static_cast<int64_t>(kernels::kGemmWorkspaceBytes) + report.model.attention_workspace_bytes
              : 0;
      s.total = s.memory.total() + s.activations + s.library_workspace;
      s.fits = s.total <= in.device_memory;
      StepWork work;
      work.stage = stage;
      work.world_size = K;
      work.accum_steps = accum;
      work.overlap = config.zero.overlap;
      work.sharded_accumulation = at.zero.accumulate == GradAccumulation::kSharded;
      work.deterministic = config.train.deterministic;
      work.leaf_bytes = c;
      work.bucket_elems = s.memory.bucket_elems;
      work.bucket_ready = bucket_ready_fractions(s.memory.bucket_params, report.model.grad_ready);
      work.group_elems = s.memory.group_elems;
      work.prefetch_layers = eopts->zero.prefetch_layers;
      work.gather_slots = s.memory.gather_slots;
      work.gpt_scopes = config.model.kind == ModelKind::kGpt;
      work.reduce_bytes = work.reduce_bytes_intra = r;
      work.gather_bytes = work.gather_bytes_intra = c;
      work.flops_per_micro = report.model.flops_per_sample * static_cast<double>(config.train.micro_batch);
      work.flops_per_s = w.flops_per_s;
      work.optimizer_s = in.optimizer_s;
      work.gpu = in.gpu, work.gpu_eff = in.gpu_eff, work.engine = in.engine;
      const bool quantized = at.zero.reduce_quant != WireQuant::kNone || at.zero.gather_quant != WireQuant::kNone;
      if (quantized) s.uncompressed = predict_step(work, in.links());
      set_quantized_wire(work, at.zero, s.memory.bucket_elems, K);
      s.time = predict_step(work, in.links());
      w.stages.push_back(std::move(s));
    }
    w.reason = recommend(w, in.device_memory,
                         config.zero.reduce_quant != WireQuant::kNone || config.zero.gather_quant != WireQuant::kNone);
    report.worlds.push_back(std::move(w));
  }
  return report;
}

namespace {

// Per stage 1-3 of a config that quantizes: its step and inter-node bytes against the
// same stage uncompressed, and whether compression pays there.
std::string format_compression(const WorldPlan& w) {
  std::string out;
  char line[300];
  for (const StagePlan& s : w.stages) {
    if (s.uncompressed.step_s <= 0) continue;
    const double gain = s.time.step_s > 0 ? s.uncompressed.step_s / s.time.step_s : 0.0;
    std::snprintf(line, sizeof(line),
                  "  stage %d compressed vs uncompressed: step %.2f vs %.2f ms (%.2fx), comm %.2f vs %.2f ms, "
                  "inter-node MiB sent %s vs %s: %s\n",
                  s.stage, s.time.step_s * 1e3, s.uncompressed.step_s * 1e3, gain, s.time.exposed_comm_s * 1e3,
                  s.uncompressed.exposed_comm_s * 1e3, mib(s.time.inter_sent_bytes).c_str(),
                  mib(s.uncompressed.inter_sent_bytes).c_str(),
                  gain > 1.01 ? "compression pays" : (gain < 0.99 ? "compression costs" : "no difference"));
    out += line;
  }
  return out;
}

}  // namespace

StepRates step_rates(const trainer::ModelSpec& model, int64_t global_batch, int world_size, double step_s,
                     double peak_flops_per_s) {
  StepRates r;
  if (step_s <= 0) return r;
  const double samples_per_s = static_cast<double>(global_batch) / step_s;
  r.tokens_per_s = samples_per_s * static_cast<double>(model.tokens_per_sample);
  if (peak_flops_per_s > 0 && world_size > 0) {
    r.mfu = model.flops_per_sample * samples_per_s / (static_cast<double>(world_size) * peak_flops_per_s);
  }
  return r;
}

std::string format_plan(const PlanReport& rep, const PlannerInputs& in) {
  std::string out;
  char line[400];
  const trainer::ModelSpec& m = rep.model;
  std::snprintf(line, sizeof(line), "dp-launch plan: %s\nmodel: %s\n  Psi = %lld parameters; %.3g GFLOP per sample "
                "(forward + backward); activations %s MiB per rank at micro_batch %lld\n",
                rep.config_path.c_str(), m.description.c_str(), static_cast<long long>(m.psi), m.flops_per_sample / 1e9,
                mib(static_cast<double>(m.activation_bytes)).c_str(), static_cast<long long>(rep.micro_batch));
  out += line;
  if (m.fused_attention) {
    out += "  attention: fused (cuDNN flash attention, no seq x seq probabilities kept): what a GPU build with "
           "cuDNN runs for this 16-bit config; --set model.attention=batched plans the fallback\n";
  }
  out += "assumptions:\n  device memory " + format_bytes(in.device_memory) + " per rank (" + in.memory_origin + ")\n";
  std::snprintf(line, sizeof(line), "  link alpha %.1f us, beta %.3g GB/s", in.link.alpha_s * 1e6,
                in.link.beta_bytes_per_s / 1e9);
  out += line + (" (" + in.link.origin + ")\n");
  const bool several_nodes = std::any_of(in.worlds.begin(), in.worlds.end(), [&](int K) { return K > in.ranks_per_node; });
  if (in.ranks_per_node > 0 && (in.device == DeviceKind::kCuda || several_nodes)) {
    std::snprintf(line, sizeof(line), "  nodes of %d ranks on that link; between nodes alpha %.1f us, beta %.3g GB/s",
                  in.ranks_per_node, in.inter_link.alpha_s * 1e6, in.inter_link.beta_bytes_per_s / 1e9);
    out += line + (" (" + in.inter_link.origin + ")\n");
  }
  std::snprintf(line, sizeof(line), "  compute %.3g GFLOP/s per rank", in.flops_per_s / 1e9);
  out += line + (" (" + in.flops_origin + ")\n");
  if (in.gpu != nullptr) {
    std::snprintf(line, sizeof(line), "  engine kernels per bucket at each world size and stage: gradient accumulation "
                  "and folds whole, statistics 1/K, the optimizer (%.2f ms on one GPU) 1/K at stages 1-3",
                  in.optimizer_s * 1e3);
    out += line + (" (" + in.optimizer_origin + ")\n");
  } else if (in.optimizer_s > 0) {
    std::snprintf(line, sizeof(line), "  optimizer %.2f ms per step over all parameters, a 1/K shard of it per rank at "
                  "stages 1-3", in.optimizer_s * 1e3);
    out += line + (" (" + in.optimizer_origin + ")\n");
  }
  if (in.cpu_cores > 0) {
    std::snprintf(line, sizeof(line),
                  "  CPU ranks share this node's %d cores: that rate is for %d thread(s) per rank, scaled to each "
                  "world size's share; world sizes above %d are planned as more nodes like this one\n",
                  in.cpu_cores, in.flops_threads, in.node_ranks);
    out += line;
  }
  for (const WorldPlan& w : rep.worlds) {
    std::snprintf(line, sizeof(line),
                  "\nworld size %d%s: global batch %lld = %d x micro_batch %lld x accum_steps %lld%s; %.3g GFLOP/s "
                  "per rank; MiB per rank\n",
                  w.world_size, &w == &rep.worlds.front() ? " (configured)" : "", static_cast<long long>(w.global_batch),
                  w.world_size, static_cast<long long>(rep.micro_batch), static_cast<long long>(w.accum_steps),
                  w.accum_steps > 1 && w.stages.back().accumulate == GradAccumulation::kSharded
                      ? " (sharded accumulation at stages 2-3)"
                      : "",
                  w.flops_per_s / 1e9);
    out += line;
    if (in.ranks_per_node > 0 && w.world_size > in.ranks_per_node && w.world_size % in.ranks_per_node != 0) {
      // dp-launch runs whole nodes (nproc_per_node x nnodes): this one cannot be launched.
      std::snprintf(line, sizeof(line),
                    "  note: %d ranks are not whole nodes of %d (dp-launch runs nproc_per_node x nnodes); planned "
                    "as %d nodes\n",
                    w.world_size, in.ranks_per_node, (w.world_size + in.ranks_per_node - 1) / in.ranks_per_node);
      out += line;
    }
    std::snprintf(line, sizeof(line), "  %-5s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %4s | %9s | %9s %9s %9s %11s %6s\n",
                  "stage", "params", "grads", "master", "adam m", "adam v", "buckets", "workspace", "activ.", "total",
                  "formula", "fits", "sent MiB", "compute", "comm", "step ms", "tokens/s", "MFU");
    out += line;
    for (const StagePlan& s : w.stages) {
      const MemoryPlan& p = s.memory;
      const StepRates rates = step_rates(rep.model, w.global_batch, w.world_size, s.time.step_s, in.peak_flops_per_s);
      char mfu[16] = "-";
      if (rates.mfu >= 0) std::snprintf(mfu, sizeof(mfu), "%.1f%%", rates.mfu * 100);
      std::snprintf(line, sizeof(line), "  %-5d %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %4s | %9s | %9.2f %9.2f %9.2f %11.4g %6s\n",
                    s.stage, mib(p.states.params).c_str(), mib(p.states.grads + p.states.reduce_copy + p.states.accum + p.states.error_feedback).c_str(),
                    mib(p.states.master).c_str(), mib(p.states.m).c_str(), mib(p.states.v).c_str(),
                    mib(p.bytes(MemCategory::kBuckets)).c_str(),
                    mib(static_cast<double>(p.buffers.workspace + s.library_workspace)).c_str(),
                    mib(s.activations).c_str(),
                    mib(s.total).c_str(), mib(s.formula_bytes).c_str(), s.fits ? "yes" : "NO",
                    mib(s.time.sent_bytes).c_str(), s.time.compute_s * 1e3, s.time.exposed_comm_s * 1e3,
                    s.time.step_s * 1e3, rates.tokens_per_s, mfu);
      out += line;
    }
    for (const StagePlan& s : w.stages) {
      if (s.memory.states.error_feedback == 0 && s.memory.buffers.wire == 0) continue;
      std::snprintf(line, sizeof(line),
                    "  compressed communication (stages 1-3; stage 0 is planned uncompressed): error feedback %s MiB "
                    "(in grads) and wire buffers %s MiB (in buckets) per rank at stage %d\n",
                    mib(s.memory.states.error_feedback).c_str(), mib(s.memory.buffers.wire).c_str(), s.stage);
      out += line;
      break;
    }
    out += format_compression(w);
    out += "  recommended: " + w.reason + "\n";
  }
  out += "\ncolumns: grads include the fp32 accumulation buffer when accum_steps > 1 with zero.accumulate = "
         "\"local\" (\"sharded\", stages 2-3: none, the owned shard is fp32) and a reduce-dtype copy at "
         "stages 0-1 (which holds the accumulation when it is fp32 and the compute dtype 16-bit); buckets = gradient staging (stages 2-3) + gathered layer groups (stage 3); workspace = the "
         "engine's, and on GPUs cuBLASLt's and cuDNN's fused attention's; formula = the "
         "ZeRO model states of docs/design.md (c Psi + c Psi + 12 Psi at stage 0 with AdamW, 8 Psi with "
         "SGD momentum, 4 Psi without; c = compute dtype bytes; no padding, accumulation or buffers: the "
         "padding, up to K x 32 elements per bucket, grows with K); adam m = "
         "AdamW's m or SGD's momentum buffer; sent = bytes one rank sends per step (ring, "
         "(K-1)/K of each buffer per pass); compute = every micro-batch's forward and backward, and the "
         "optimizer step where its time is modelled (the \"optimizer\" or \"engine kernels\" assumption above; "
         "otherwise it is not); "
         "comm = communication the step waits for beyond compute; tokens/s = the global batch's tokens over "
         "the step; MFU = its model FLOPs (the console's and the profile's count) over the step and K peaks "
         "(--gpu's dense peak for the dtype, or profile.peak_tflops; - without one).\n";
  return out;
}

}  // namespace zdp::launcher
