// Fuzz target: a rank's measurements as rank 0 reads them from the store at the end of a
// profiling run (profile/src/profile_json.h rank_from_json). Input: the value's text.
// Properties: no crash, exception or sanitizer report; what is accepted names parts and
// collective ops inside their enums (the summary and the trace index arrays by them), has
// finite times, and encodes to text that decodes to the same profile.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "profile/src/profile_json.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zdp::profile;
  const std::string text(reinterpret_cast<const char*>(data), size);
  zdp::StatusOr<RankProfile> p = rank_from_json(text, "fuzz rank's measurements");
  if (!p.ok()) return 0;
  require(p->rank >= 0);
  for (const StepProfile& s : p->steps) {
    require(std::isfinite(s.begin) && std::isfinite(s.end));
    for (double part : s.parts) require(std::isfinite(part));
    for (const Span& sp : s.spans) {
      require(static_cast<int>(sp.part) >= 0 && static_cast<int>(sp.part) < kNumStepParts);
    }
    for (const CollectiveTiming& c : s.collectives) {
      require(static_cast<int>(c.op) < zdp::kNumCollectiveOps && c.bytes >= 0);
    }
  }
  zdp::StatusOr<RankProfile> again = rank_from_json(rank_to_json(*p), "fuzz (re-encoded)");
  require(again.ok() && again->rank == p->rank && again->host == p->host && again->steps.size() == p->steps.size());
  for (size_t i = 0; i < p->steps.size(); ++i) {
    const StepProfile &a = p->steps[i], &b = again->steps[i];
    require(a.step == b.step && a.begin == b.begin && a.end == b.end && a.parts == b.parts &&
            a.spans.size() == b.spans.size() && a.collectives.size() == b.collectives.size());
  }
  return 0;
}
