// engine.memory(): the bytes of the engine's own buffers per category, next to the ZeRO
// formula for the same parameter count (zero_memory.h) and to the plan of this layout
// (memory_plan_of_layout: the sizes the parts allocated, what `dp-launch plan` prints), so
// the start-up log shows that the gap to the formula is only padding, copies and buffers.
#include <cstdio>

#include "engine/src/buffer_plan.h"
#include "engine/src/engine_impl.h"
#include "engine/src/zero_memory.h"

namespace zdp {
namespace {

constexpr MemCategory kCategories[] = {MemCategory::kParams, MemCategory::kGrads, MemCategory::kOptimizer,
                                       MemCategory::kBuckets, MemCategory::kWorkspace};

// The formula's rows in our categories: master, m and v are the optimizer's.
int64_t formula_bytes(const ZeroMemory& z, MemCategory c) {
  switch (c) {
    case MemCategory::kParams: return static_cast<int64_t>(z.params);
    case MemCategory::kGrads: return static_cast<int64_t>(z.grads);
    case MemCategory::kOptimizer: return static_cast<int64_t>(z.master + z.m + z.v);
    default: return 0;  // the formula has no staging buffers or workspace
  }
}

}  // namespace

MemoryReport Engine::Impl::memory_report() const {
  MemoryReport report;
  report.stage = opt.zero.stage;
  report.world_size = env.world;
  // Nothing measured once the context is gone: its device went with it.
  if (!finalized || env.ctx_life.expired()) return report;
  report.params = layout.payload_elems();
  report.padded_elems = layout.total_elems();

  int64_t measured[kNumMemCategories] = {};
  params->count_memory(measured);
  grads->count_memory(measured);
  state->count_memory(measured);
  quant->count_memory(measured);

  const int c = static_cast<int>(dtype_size(opt.compute_dtype));
  const StatusOr<ZeroMemory> formula =
      zero_memory_formula(report.params, env.world, opt.zero.stage, c, optimizer_moments(opt.optim));
  const StatusOr<MemoryPlan> plan = memory_plan_of_layout(layout, opt, env.device.kind());
  MemoryReport::Row total{"total"};
  for (MemCategory cat : kCategories) {
    MemoryReport::Row row{to_string(cat), measured[static_cast<int>(cat)]};
    row.formula = formula.ok() ? formula_bytes(*formula, cat) : 0;
    row.planned = plan.ok() ? plan->bytes(cat) : 0;
    total.measured += row.measured;
    total.formula += row.formula;
    total.planned += row.planned;
    report.rows.push_back(row);
  }
  report.rows.push_back(total);
  return report;
}

std::string MemoryReport::table() const {
  constexpr double kMiB = 1024.0 * 1024.0;
  char line[200];
  std::snprintf(line, sizeof(line),
                "memory per rank: stage %d, %d ranks, Psi = %lld parameters (%lld with padding)\n"
                "  %-10s %14s %14s %14s %14s\n",
                stage, world_size, static_cast<long long>(params), static_cast<long long>(padded_elems), "category",
                "measured MiB", "formula MiB", "planned MiB", "gap MiB");
  std::string out = line;
  for (const Row& r : rows) {
    std::snprintf(line, sizeof(line), "  %-10s %14.3f %14.3f %14.3f %+14.3f\n", r.category.c_str(), r.measured / kMiB,
                  r.formula / kMiB, r.planned / kMiB, (r.measured - r.formula) / kMiB);
    out += line;
  }
  out +=
      "  (formula: the ZeRO table of docs/design.md; planned: every buffer finalize() allocates, as dp-launch plan\n"
      "   prints it (the CUDA decay table and step decision aside); gap = measured - formula: padding, copies, buffers, workspace)\n";
  return out;
}

}  // namespace zdp
