// engine_kernels (engine_kernels.h).
#include "planner/engine_kernels.h"

#include <string>

namespace zdp::launcher {

using trainer::KernelRegion;

std::vector<KernelCost> engine_kernels(const EngineKernelShape& s, const GpuSpec& gpu, const GpuEfficiency& eff) {
  std::vector<KernelCost> out;
  if (s.bucket_elems.empty()) return out;
  const double e = static_cast<double>(s.compute_bytes), r = static_cast<double>(s.reduce_bytes);
  const double K = static_cast<double>(s.world);
  const int64_t B = static_cast<int64_t>(s.bucket_elems.size());
  // `repeat` launches of each bucket, `bytes_per_elem` of its (share of) elements each:
  // timed bucket by bucket, so that small buckets cost a launch, not their bytes.
  auto row = [&](KernelRegion region, const std::string& name, int64_t repeat, double bytes_per_elem, double share,
                 int extra_launches_per_bucket = 0) {
    if (repeat <= 0) return;
    KernelCost k;
    k.name = name;
    k.region = region;
    k.per_step = true;
    k.issue_s = eff.host_kernel_s;
    k.calls = repeat * B * (1 + extra_launches_per_bucket);
    double bytes = 0, time = 0;
    std::string bound;
    for (const int64_t n : s.bucket_elems) {
      const double b = bytes_per_elem * static_cast<double>(n) * share;
      bytes += b;
      time += kernel_time_s(0, b, 1.0, 1.0, gpu, eff, &bound) + extra_launches_per_bucket * eff.launch_s;
    }
    k.time_s = static_cast<double>(repeat) * time;
    k.bytes = static_cast<double>(repeat) * bytes / static_cast<double>(k.calls);
    // The bound of the whole row: memory when its bytes outweigh its launches.
    k.bound = time > static_cast<double>(B * (1 + extra_launches_per_bucket)) * eff.launch_s + 1e-15 ? "memory"
                                                                                                        : "launch";
    out.push_back(k);
  };
  const int64_t A = s.accum_steps;
  if (s.deterministic) {
    // The folds run on the communication stream.
  } else if (s.sharded_accumulation && s.stage >= 2) {
    if (s.reduce_bytes != s.compute_bytes) {
      row(KernelRegion::kGradHandoff, "grad cast to the reduce dtype", A, e + r, 1.0);
    }
  } else if (A >= 2) {
    row(KernelRegion::kGradHandoff, "grad accumulate: copy into fp32", 1, e + 4, 1.0);
    row(KernelRegion::kGradHandoff, "grad accumulate: add into fp32", A - 2, e + 8, 1.0);
    row(KernelRegion::kGradHandoff, "grad + accumulation -> reduce dtype", 1, e + 4 + r, 1.0);
  } else if (s.reduce_bytes != s.compute_bytes) {
    row(KernelRegion::kGradHandoff, "grad cast to the reduce dtype", 1, e + r, 1.0);
  }
  // What the statistics and the optimizer read of the reduced gradient: the reduce dtype,
  // or fp32 where sharded accumulation sums into the fp32 shard (GradReducer::reduced_dtype).
  const double g = s.sharded_accumulation && s.stage >= 2 && A > 1 ? 4.0 : r;
  // The statistics read each bucket's reduced slice (1/K of it, at every stage) and fold
  // the blocks' partials in a second launch.
  row(KernelRegion::kGradNorm, "grad norm statistics (slice + fold)", 1, g, 1.0 / K, 1);
  KernelCost decide;
  decide.name = "step decision + its copy to the host";
  decide.region = KernelRegion::kGradNorm;
  decide.per_step = true;
  decide.issue_s = eff.host_kernel_s;
  decide.calls = 2;
  decide.time_s = 2 * eff.launch_s;
  decide.bound = "launch";
  out.push_back(decide);
  // The optimizer: master and moments read and written (8 bytes each), the gradient read
  // at the reduce dtype, the compute-dtype parameters written.
  const double state = 8.0 * static_cast<double>(1 + s.optimizer_moments);
  row(KernelRegion::kAdamW, s.adamw ? region_name(KernelRegion::kAdamW) : "sgd (per bucket, once per step)", 1,
      state + g + e, s.stage >= 1 ? 1.0 / K : 1.0);
  return out;
}

EngineKernelTimes engine_kernel_times(const EngineKernelShape& s, const GpuSpec& gpu, const GpuEfficiency& eff) {
  EngineKernelTimes t;
  for (const KernelCost& k : engine_kernels(s, gpu, eff)) {
    t.total_s += k.time_s;
    if (k.region == KernelRegion::kAdamW) t.optimizer_s += k.time_s;
  }
  return t;
}

}  // namespace zdp::launcher
