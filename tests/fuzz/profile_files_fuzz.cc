// Fuzz target: what `dp-launch plan --from-profile DIR` reads (planner/kernel_profile_file.h):
// kernels.json and profile.jsonl, as anything may have left them in DIR. Input: a first
// byte choosing the file (even: kernels.json, odd: profile.jsonl), then its text.
// Properties: no crash, exception or sanitizer report; what is accepted is in the ranges
// the planner divides and indexes by (the model's sizes at least 1, times finite and not
// negative, a region at most once).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "planner/kernel_profile_file.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

bool finite_non_negative(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  zdp::launcher::MeasuredKernels m;
  if (data[0] % 2 == 0) {
    if (!zdp::launcher::parse_kernel_times(text, "fuzz/kernels.json", &m).ok()) return 0;
    require(m.layers >= 1 && m.d_model >= 1 && m.heads >= 1 && m.vocab >= 1 && m.seq >= 1 && m.micro_batch >= 1 &&
            m.accum_steps >= 1 && m.steps >= 1);
    require(m.device.size() <= 256 && m.device_kind.size() <= 256 && m.dtype.size() <= 256);
    for (size_t r = 0; r < m.present.size(); ++r) {
      require(m.present[r] || (m.seconds[r] == 0 && m.entries[r] == 0));
      require(finite_non_negative(m.seconds[r]) && finite_non_negative(m.entries[r]));
    }
  } else {
    if (!zdp::launcher::parse_profile_steps(text, "fuzz/profile.jsonl", &m).ok()) return 0;
    if (m.profile_steps == 0) {
      require(m.step_s < 0 && m.optimizer_s < 0 && m.exposed_comm_s < 0);
    } else {
      require(m.profile_steps > 0 && finite_non_negative(m.step_s) && finite_non_negative(m.optimizer_s) &&
              finite_non_negative(m.exposed_comm_s));
    }
  }
  return 0;
}
