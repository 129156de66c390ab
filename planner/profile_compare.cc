// Prediction against measurement, region by region (profile_compare.h).
#include "planner/profile_compare.h"

#include <algorithm>
#include <cstdio>

#include "planner/format_numbers.h"

namespace zdp::launcher {
namespace {

using trainer::KernelRegion;
using trainer::kNumKernelRegions;
using trainer::region_name;

constexpr int kMemoryClass = 3;  // after the ComputeClass values
// A region measured faster than its work at this multiple of the datasheet's rate is refused.
constexpr double kMaxDatasheetMultiple = 4.0;
// The measured regions may exceed the measured step by this factor (the two are timed by
// different clocks over different steps), no more.
constexpr double kRegionsOverStep = 1.1;
// The other end: kernels the model calls compute- or memory-bound (launch-bound ones are
// left out) that reached less than this share of the datasheet's rate, as a class, are
// not a GPU's measurement either (regions 1e6 times too slow were taken: "0.0%"
// efficiencies and a predicted step of 2e9 ms).
constexpr double kMinImpliedEfficiency = 1e-3;

int64_t dtype_bytes(const std::string& dtype) { return dtype == "fp32" ? 4 : (dtype == "bf16" || dtype == "fp16" ? 2 : 0); }

Status check_same(const char* field, int64_t planned, int64_t measured, const MeasuredKernels& m) {
  if (planned == measured) return Status::Ok();
  return Status(StatusCode::kInvalidArgument,
                m.dir + "/kernels.json profiled another run: " + field + " is " + std::to_string(measured) +
                    " there and " + std::to_string(planned) + " in the config (plan the config that ran)");
}

void set_class(GpuEfficiency& e, int c, double v) {
  switch (c) {
    case 0: e.matmul = v; break;
    case 1: e.attention_matmul = v; break;
    case 2: e.fused_attention = v; break;
    default: e.memory = v; break;
  }
}

double get_class(const GpuEfficiency& e, int c) {
  return c < kMemoryClass ? compute_efficiency(e, static_cast<ComputeClass>(c)) : e.memory;
}

}  // namespace

const char* efficiency_class_name(int c) {
  static const char* const names[kNumEfficiencyClasses] = {"matmul", "attention GEMMs", "fused attention", "memory"};
  return c >= 0 && c < kNumEfficiencyClasses ? names[c] : "?";
}

StatusOr<ProfileComparison> compare_with_profile(GptShape shape, const GpuSpec& gpu, const GpuEfficiency& assumed,
                                                 const MeasuredKernels& m) {
  if (m.device_kind != "cuda") {
    return Status(StatusCode::kInvalidArgument,
                  m.dir + "/kernels.json was measured on " + m.device_kind + " ranks ('" + m.device +
                      "'): the GPU step model predicts a GPU; compare a profile of a GPU run");
  }
  ZDP_RETURN_IF_ERROR(check_same("model.n_layers", shape.layers, m.layers, m));
  ZDP_RETURN_IF_ERROR(check_same("model.d_model", shape.d_model, m.d_model, m));
  ZDP_RETURN_IF_ERROR(check_same("model.n_heads", shape.heads, m.heads, m));
  ZDP_RETURN_IF_ERROR(check_same("model.vocab_size", shape.vocab, m.vocab, m));
  ZDP_RETURN_IF_ERROR(check_same("model.seq_len", shape.seq, m.seq, m));
  ZDP_RETURN_IF_ERROR(check_same("train.micro_batch", shape.micro_batch, m.micro_batch, m));
  ZDP_RETURN_IF_ERROR(check_same("bytes per element of model.dtype", shape.elem_bytes, dtype_bytes(m.dtype), m));
  shape.accum_steps = m.accum_steps;
  shape.fused_attention = m.fused_attention;
  // The engine's rows priced for the profile's rank: its world size and stage slice the
  // statistics and the optimizer, and every bucket's launches stay whole (scaling one
  // GPU's rows by 1/K scaled the launches too).
  shape.world = std::max<int64_t>(1, m.world_size);
  shape.stage = static_cast<int>(m.zero_stage);
  // ... and on the buckets, reduce dtype and accumulation the profiled engine ran (a
  // profile of version 1-2 records none: the config's stand in).
  if (m.has_engine) {
    // The buckets hold every parameter once, padded within a world size's quantum each
    // (the engine's layout; generous: 4096 elements a rank): buckets of another model
    // priced AdamW on a tenth of it.
    int64_t elems = 0;
    for (int64_t b : m.buckets) elems += b;
    const int64_t slack = static_cast<int64_t>(m.buckets.size()) * std::max<int64_t>(1, m.world_size) * 4096;
    if (shape.params > 0 && (elems < shape.params || elems - shape.params > slack)) {
      return Status(StatusCode::kInvalidArgument,
                    m.dir + "/kernels.json profiled another run: its engine's " + std::to_string(m.buckets.size()) +
                        " buckets hold " + std::to_string(elems) + " elements, and the config's model has " +
                        std::to_string(shape.params) + " parameters (plan the config that ran)");
    }
    shape.buckets = m.buckets;
    shape.reduce_bytes = dtype_bytes(m.reduce_dtype);
    shape.sharded_accumulation = m.sharded_accumulation;
    shape.deterministic = m.deterministic;
    shape.dgelu_epilogue = m.dgelu_epilogue;
  }

  ProfileComparison c;
  c.gpu = gpu.name;
  c.assumed = assumed;
  c.predicted = predict_gpt_step(shape, gpu, assumed);
  std::array<double, kNumKernelRegions> measured{};
  std::array<bool, kNumKernelRegions> have{};
  for (int r = 0; r < kNumKernelRegions; ++r) {
    measured[static_cast<size_t>(r)] = m.seconds[static_cast<size_t>(r)];
    have[static_cast<size_t>(r)] = m.present[static_cast<size_t>(r)];
  }
  // The optimizer and the gradient norm are the engine's, not model regions: the
  // profile's optimizer and norm parts (the latter with its all-reduce's latency, nothing
  // on one GPU). The gradient accumulation is the model's kGradHandoff region (a profile
  // of an older build has none: unmeasured).
  const auto adam = static_cast<size_t>(KernelRegion::kAdamW);
  const auto norm = static_cast<size_t>(KernelRegion::kGradNorm);
  if (m.optimizer_s >= 0) measured[adam] = m.optimizer_s, have[adam] = true;
  if (m.norm_s >= 0) measured[norm] = m.norm_s, have[norm] = true;

  // One row per region, in the order its first kernel runs; every row the profile's rank's
  // own (the engine's priced at its world and stage above).
  std::array<int, kNumKernelRegions> row_of;
  row_of.fill(-1);
  for (const KernelCost& k : c.predicted.kernels) {
    const auto r = static_cast<size_t>(k.region);
    if (row_of[r] < 0) {
      row_of[r] = static_cast<int>(c.rows.size());
      RegionComparison row;
      row.region = k.region;
      row.measured_s = have[r] ? measured[r] : -1;
      row.measured_entries = r == adam || r == norm ? 1 : m.entries[r];
      c.rows.push_back(row);
    }
    RegionComparison& row = c.rows[static_cast<size_t>(row_of[r])];
    row.predicted_s += k.time_s;
    row.predicted_launches += k.calls;
    row.flops += k.flops * static_cast<double>(k.calls);
    row.bytes += k.bytes * static_cast<double>(k.calls);
  }
  const double peak = shape.elem_bytes >= 4 ? gpu.fp32_flops : gpu.bf16_flops;
  for (RegionComparison& row : c.rows) {
    const double flops_s = row.flops / peak, bytes_s = row.bytes / gpu.hbm_bytes_per_s;
    row.compute_bound = flops_s > bytes_s;
    if (row.measured_s < 0) continue;
    // A time the GPU cannot have measured: its work at four times the datasheet's rate
    // (caches may beat the byte count, never by that much) or nothing at all.
    if (row.measured_s * kMaxDatasheetMultiple < std::max(flops_s, bytes_s)) {
      return Status(StatusCode::kInvalidArgument,
                    m.dir + "/kernels.json: region '" + region_name(row.region) + "' took " +
                        fmt("%.3g ms", row.measured_s * 1e3) + " per step, less than a quarter of its work at the " +
                        gpu.name + " datasheet's rate (" + fmt("%.3g ms", std::max(flops_s, bytes_s) * 1e3) +
                        "): not a measurement of this model on this GPU");
    }
    c.predicted_regions_s += row.predicted_s;
    c.measured_regions_s += row.measured_s;
  }
  // The regions run one after another on the compute stream inside the step.
  if (m.step_s > 0 && c.measured_regions_s > kRegionsOverStep * m.step_s) {
    return Status(StatusCode::kInvalidArgument,
                  m.dir + ": the regions of kernels.json add up to " + fmt("%.3f ms", c.measured_regions_s * 1e3) +
                      " per step, more than the whole step profile.jsonl measured (" + fmt("%.3f ms", m.step_s * 1e3) +
                      "): the two files are not of one run");
  }
  for (int r = 0; r < kNumKernelRegions; ++r) {
    if (have[static_cast<size_t>(r)] && row_of[static_cast<size_t>(r)] < 0) {
      c.unpredicted.push_back(region_name(static_cast<KernelRegion>(r)));
    }
  }
  c.measured_step_s = m.step_s;

  // Each kernel's share of its region's measured time is its share of the region's
  // predicted time; its work (FLOPs if compute-bound, bytes if memory-bound) over that time
  // and the datasheet rate is the efficiency it reached. Launch-bound kernels say nothing.
  std::array<double, kNumEfficiencyClasses> work{}, seconds{};
  for (const KernelCost& k : c.predicted.kernels) {
    const auto r = static_cast<size_t>(k.region);
    const RegionComparison& row = c.rows[static_cast<size_t>(row_of[r])];
    if (row.measured_s <= 0 || row.predicted_s <= 0 || k.bound == "launch") continue;
    const double t = row.measured_s * k.time_s / row.predicted_s;
    const double calls = static_cast<double>(k.calls);
    if (k.bound == "compute") {
      const auto cls = static_cast<size_t>(k.compute);
      work[cls] += k.flops * calls / peak;
      seconds[cls] += t;
    } else {
      work[kMemoryClass] += k.bytes * calls / gpu.hbm_bytes_per_s;
      seconds[kMemoryClass] += t;
    }
  }
  c.calibrated = assumed;
  for (int cls = 0; cls < kNumEfficiencyClasses; ++cls) {
    const auto i = static_cast<size_t>(cls);
    c.implied[i] = seconds[i] > 0 ? work[i] / seconds[i] : -1;
    if (c.implied[i] >= 0 && c.implied[i] < kMinImpliedEfficiency) {
      return Status(StatusCode::kInvalidArgument,
                    m.dir + "/kernels.json: its " + efficiency_class_name(cls) + " kernels took " +
                        fmt("%.3g ms", seconds[i] * 1e3) + " per step for work of " + fmt("%.3g ms", work[i] * 1e3) +
                        " at the " + gpu.name + " datasheet's rate (" + fmt("%.2g%%", 100 * c.implied[i]) +
                        " of it): not a measurement of this model on this GPU");
    }
    // Above 100% the byte or FLOP count overstates the work (caches, fusion); the model
    // cannot run faster than the datasheet, so the calibration stops there.
    if (c.implied[i] > 0) set_class(c.calibrated, cls, std::min(1.0, c.implied[i]));
  }
  c.recalibrated = predict_gpt_step(shape, gpu, c.calibrated);
  return c;
}

std::string profile_differences(const GptShape& shape, const std::string& dtype, const MeasuredKernels& m) {
  std::string notes;
  if (m.fused_attention != shape.fused_attention) {
    notes += std::string("  note: the profile ran ") + (m.fused_attention ? "fused" : "batched") +
             " attention and this config plans " + (shape.fused_attention ? "fused" : "batched") +
             ": its attention efficiency below stays the assumed one\n";
  }
  if (m.dtype != dtype) {
    notes += "  note: the profile ran " + m.dtype + " and this config is " + dtype +
             " (the same peak; their kernels may differ)\n";
  }
  if (!m.has_engine) return notes;
  auto on_off = [](bool b) { return b ? "on" : "off"; };
  if (m.dgelu_epilogue != shape.dgelu_epilogue) {
    notes += std::string("  note: the profiled GPU ran fc proj's GELU backward ") +
             (m.dgelu_epilogue ? "in the DGELU epilogue" : "as a kernel after the GEMM") +
             " (timed at first use) and this config plans it " +
             (shape.dgelu_epilogue ? "in the epilogue" : "as a kernel") + "\n";
  }
  if (m.deterministic != shape.deterministic) {
    notes += std::string("  note: the profile ran with train.deterministic ") + on_off(m.deterministic) +
             " and this config has it " + on_off(shape.deterministic) +
             " (the engine's folds and the attention backward differ)\n";
  }
  if (dtype_bytes(m.reduce_dtype) != shape.reduce_bytes) {
    notes += "  note: the profile reduced gradients in " + m.reduce_dtype + " and this config in " +
             std::to_string(shape.reduce_bytes * 8) + "-bit (the engine's rows read other bytes)\n";
  }
  if (m.sharded_accumulation != shape.sharded_accumulation) {
    notes += std::string("  note: the profile accumulated ") + (m.sharded_accumulation ? "sharded" : "locally") +
             " and this config " + (shape.sharded_accumulation ? "sharded" : "locally") + " (zero.accumulate)\n";
  }
  return notes;
}

std::string format_comparison(const ProfileComparison& c, const MeasuredKernels& m, const GpuSpec& gpu) {
  std::string out = "GPU step model vs MEASURED (dp-launch plan --from-profile " + m.dir + "): rank 0 of a run on " +
                    m.device + ", " + std::to_string(m.steps) + " measured steps, " + m.dtype + ", " +
                    (m.fused_attention ? "fused" : "batched") + " attention, " + std::to_string(m.accum_steps) +
                    " micro-batch(es) per step, " +
                    (m.version == 1 ? std::string("read as one rank's (a version 1 kernels.json records no world size)")
                                    : std::to_string(m.world_size) + " rank(s) at stage " + std::to_string(m.zero_stage)) +
                    (m.zero_stage >= 1 && m.world_size > 1 ? " (the optimizer row: one rank's 1/K of the update)" : "") +
                    "\n";
  char line[320];
  std::snprintf(line, sizeof(line), "  %-38s %8s %8s %12s %12s %9s  %s\n", "region", "launches", "entered", "predicted ms",
                "measured ms", "meas/pred", "achieved");
  out += line;
  const double peak = m.dtype == "fp32" ? gpu.fp32_flops : gpu.bf16_flops;
  for (const RegionComparison& r : c.rows) {
    std::string measured = "-", ratio = "-",
                achieved = r.region == trainer::KernelRegion::kGradHandoff ? "not timed by this profile's build"
                                                                           : "not measured";
    if (r.measured_s >= 0) {
      measured = fmt("%.3f", r.measured_s * 1e3);
      if (r.predicted_s > 0) ratio = fmt("%.2fx", r.measured_s / r.predicted_s);
      if (r.measured_s > 0) {
        achieved = r.compute_bound ? fmt("%.0f TFLOP/s (%.0f%% of peak)", r.flops / r.measured_s / 1e12,
                                         100 * r.flops / r.measured_s / peak)
                                   : fmt("%.2f TB/s (%.0f%% of HBM)", r.bytes / r.measured_s / 1e12,
                                         100 * r.bytes / r.measured_s / gpu.hbm_bytes_per_s);
      }
      if (r.region == trainer::KernelRegion::kAdamW) achieved += "; the profile's optimizer part";
      if (r.region == trainer::KernelRegion::kGradNorm) achieved += "; the profile's norm part";
    }
    std::snprintf(line, sizeof(line), "  %-38s %8lld %8.1f %12.3f %12s %9s  %s\n", trainer::region_name(r.region),
                  static_cast<long long>(r.predicted_launches), r.measured_entries, r.predicted_s * 1e3,
                  measured.c_str(), ratio.c_str(), achieved.c_str());
    out += line;
  }
  for (const std::string& name : c.unpredicted) out += "  " + name + ": measured, but the prediction has no kernel for it\n";
  out += fmt("  regions measured: predicted %.3f ms, measured %.3f ms (%.2fx)\n", c.predicted_regions_s * 1e3,
             c.measured_regions_s * 1e3, c.predicted_regions_s > 0 ? c.measured_regions_s / c.predicted_regions_s : 0.0);
  if (c.measured_step_s >= 0) {
    out += fmt("  step: predicted %.3f ms (kernels + launch waits), measured %.3f ms (rank 0's mean, profile.jsonl); "
               "%.3f ms of it outside the measured regions (the engine's work, communication waits, gaps)\n",
               c.predicted.step_s * 1e3, c.measured_step_s * 1e3,
               (c.measured_step_s - c.measured_regions_s) * 1e3);
    if (m.exposed_comm_s > 0) out += fmt("  of which exposed communication %.3f ms\n", m.exposed_comm_s * 1e3);
  } else {
    out += "  step: no profile.jsonl step lines of rank 0 in " + m.dir + " (the measured step and the optimizer are unknown)\n";
  }
  out += "  efficiency implied by the measurement (the work at the datasheet rate over the measured time), assumed "
         "before:\n   ";
  for (int cls = 0; cls < kNumEfficiencyClasses; ++cls) {
    const double v = c.implied[static_cast<size_t>(cls)];
    out += std::string(" ") + efficiency_class_name(cls) + " " +
           (v > 0 ? fmt("%.1f%%", 100 * v) : std::string("n/a")) + fmt(" (%.0f%%)", 100 * get_class(c.assumed, cls)) +
           (cls + 1 < kNumEfficiencyClasses ? ";" : "\n");
  }
  // Every class n/a (launch-bound kernels only, or no regions): nothing was calibrated, and
  // saying "calibrated prediction" of the assumed one claimed a calibration that did not happen.
  if (!c.any_calibrated()) {
    return out + fmt("  nothing calibrated (no efficiency class measured): the world-size table below uses the "
                     "assumed efficiencies (step %.1f ms, MFU %.1f%%)\n",
                     c.predicted.step_s * 1e3, 100 * c.predicted.mfu);
  }
  out += fmt("  calibrated prediction: step %.1f ms, %.0f tokens/s, ", c.recalibrated.step_s * 1e3,
             c.recalibrated.tokens_per_s) +
         fmt("MFU %.1f%% (assumed efficiencies: %.1f ms, MFU %.1f%%); the world-size table below uses it\n",
             100 * c.recalibrated.mfu, c.predicted.step_s * 1e3, 100 * c.predicted.mfu);
  return out;
}

}  // namespace zdp::launcher
