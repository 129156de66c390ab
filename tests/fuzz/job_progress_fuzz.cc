// Fuzz target: the progress records ranks and the launcher exchange through the store
// (runtime/internal/job_progress.h). Input: a first byte choosing the record (even: the
// job's, odd: a rank's), then its text. Properties: no crash, exception or sanitizer
// report; an accepted record is bounded as the decoder promises and encodes to text that
// decodes again to the same step counts and phase.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/internal/job_progress.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    zdp::StatusOr<zdp::JobProgress> p = zdp::decode_job_progress(text);
    if (!p.ok()) return 0;
    require(p->step >= 0 && p->steps >= 0 && p->phase.size() <= 32);
    zdp::StatusOr<zdp::JobProgress> q = zdp::decode_job_progress(zdp::encode_progress(*p));
    require(q.ok() && q->step == p->step && q->steps == p->steps && q->phase == p->phase);
    (void)zdp::format_eta(p->eta_s);
  } else {
    zdp::StatusOr<zdp::RankProgress> p = zdp::decode_rank_progress(text);
    if (!p.ok()) return 0;
    require(p->phase.size() <= 32);
    zdp::StatusOr<zdp::RankProgress> q = zdp::decode_rank_progress(zdp::encode_progress(*p));
    require(q.ok() && q->step == p->step && q->phase == p->phase);
  }
  return 0;
}
