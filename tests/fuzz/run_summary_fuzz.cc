// Fuzz target: a run's train_summary.json as `dp-launch scale` reads it
// (planner/run_summary_file.h). Input: the file's text. Properties: no crash, exception or
// sanitizer report (UBSan: no float converted to an int out of its range); what is
// accepted is a point the scale report can divide by.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "planner/run_summary_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  zdp::StatusOr<zdp::launcher::ScalePoint> p = zdp::launcher::parse_run_summary(text, "fuzz/train_summary.json");
  if (!p.ok()) return 0;
  const bool ok = p->world_size >= 1 && p->stage >= 0 && p->stage <= 3 && p->global_batch >= 1 && p->steps >= 0 &&
                  std::isfinite(p->step_time_s) && p->step_time_s >= 0 && std::isfinite(p->samples_per_s) &&
                  std::isfinite(p->tokens_per_s) && !std::isinf(p->final_loss);  // NaN: null, no finite loss
  if (!ok) std::abort();
  return 0;
}
