// The ZeRO memory formula and the per-rank bytes of a concrete Layout (see zero_memory.h).
#include "zero_memory.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace zdp {
namespace {

Status invalid(const std::string& message) { return Status(StatusCode::kInvalidArgument, message); }

Status check_common(int stage, int compute_bytes) {
  if (stage < 0 || stage > 3) return invalid("ZeRO stage must be 0, 1, 2 or 3, got " + std::to_string(stage));
  if (compute_bytes != 2 && compute_bytes != 4) {
    return invalid("compute_bytes must be 2 (bf16/fp16) or 4 (fp32), got " + std::to_string(compute_bytes));
  }
  return Status::Ok();
}

// Fills the categories from the full element count and one rank's share of it.
ZeroMemory by_stage(double full, double share, int stage, int compute_bytes) {
  const double c = compute_bytes;
  ZeroMemory mem;
  mem.params = c * (stage >= 3 ? share : full);
  mem.grads = c * (stage >= 2 ? share : full);
  const double opt = kMasterBytes * (stage >= 1 ? share : full);
  mem.master = opt;
  mem.m = opt;
  mem.v = opt;
  return mem;
}

}  // namespace

StatusOr<ZeroMemory> zero_memory_formula(int64_t psi, int world_size, int stage, int compute_bytes) {
  ZDP_RETURN_IF_ERROR(check_common(stage, compute_bytes));
  if (psi < 0) return invalid("parameter count psi must be >= 0, got " + std::to_string(psi));
  if (world_size < 1) return invalid("world_size must be >= 1, got " + std::to_string(world_size));
  const double full = static_cast<double>(psi);
  return by_stage(full, full / world_size, stage, compute_bytes);
}

StatusOr<ZeroMemory> zero_memory_of_layout(const Layout& layout, int stage, int compute_bytes, int prefetch_layers) {
  ZDP_RETURN_IF_ERROR(check_common(stage, compute_bytes));
  if (prefetch_layers < 0) return invalid("prefetch_layers must be >= 0, got " + std::to_string(prefetch_layers));
  if (stage == 3 && layout.options().boundary != BucketBoundary::kLayerGroups) {
    return invalid(
        "stage 3 gathers one layer group at a time and needs a layout cut at layer groups "
        "(BucketBoundary::kLayerGroups); this one is cut anywhere");
  }
  ZeroMemory mem = by_stage(static_cast<double>(layout.total_elems()), static_cast<double>(layout.shard_elems()), stage,
                            compute_bytes);
  if (stage >= 2)
    mem.grad_staging = static_cast<double>(compute_bytes) * static_cast<double>(layout.max_bucket_elems());
  if (stage == 3) {
    // Padded elements of each layer group, in order (its buckets hold nothing else).
    std::vector<int64_t> groups;
    const auto& params = layout.params();
    for (size_t i = 0; i < params.size(); ++i) {
      if (i > 0 && params[i].layer == params[i - 1].layer) continue;
      const auto [first, end] = layout.layer_buckets(params[i].layer);
      int64_t elems = 0;
      for (int b = first; b < end; ++b) elems += layout.buckets()[b].size;
      groups.push_back(elems);
    }
    // The largest run of 1 + prefetch_layers consecutive groups is resident at once.
    const size_t window = std::min(groups.size(), static_cast<size_t>(prefetch_layers) + 1);
    int64_t run = 0, largest = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      run += groups[i];
      if (i >= window) run -= groups[i - window];
      largest = std::max(largest, run);
    }
    mem.param_gather = static_cast<double>(compute_bytes) * static_cast<double>(largest);
  }
  return mem;
}

std::string describe_zero_memory(const ZeroMemory& formula, const ZeroMemory& layout) {
  struct Row {
    const char* name;
    double formula, layout;
  };
  const Row rows[] = {{"params", formula.params, layout.params},
                      {"grads", formula.grads, layout.grads},
                      {"master", formula.master, layout.master},
                      {"adam m", formula.m, layout.m},
                      {"adam v", formula.v, layout.v},
                      {"grad staging", formula.grad_staging, layout.grad_staging},
                      {"param gather", formula.param_gather, layout.param_gather},
                      {"total", formula.total(), layout.total()}};
  constexpr double kMiB = 1024.0 * 1024.0;
  std::string out = "memory per rank      formula (MiB)    layout (MiB)    gap (MiB)  (gap = padding and buckets)\n";
  char line[160];
  for (const Row& r : rows) {
    std::snprintf(line, sizeof(line), "  %-14s %16.3f %15.3f %+12.3f\n", r.name, r.formula / kMiB, r.layout / kMiB,
                  (r.layout - r.formula) / kMiB);
    out += line;
  }
  return out;
}

}  // namespace zdp
