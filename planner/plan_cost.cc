// The alpha-beta collective model and the step-time prediction (see plan_cost.h).
#include "planner/plan_cost.h"

#include <algorithm>
#include <limits>

namespace zdp::launcher {
namespace {

// `steps` ring steps, each one message of bytes / K.
double ring_s(double bytes, int world_size, int steps, const LinkModel& link) {
  if (world_size <= 1) return 0;
  return steps * (link.alpha_s + bytes / world_size / link.beta_bytes_per_s);
}

// Stage 3: one pass over the layer groups in `order`, each gathered before its compute
// and prefetched one group ahead: the first gather is exposed, each later one only by
// what the previous group's compute does not cover.
double exposed_gathers(const std::vector<double>& gather_s, const std::vector<double>& compute_s) {
  double exposed = 0;
  for (size_t i = 0; i < gather_s.size(); ++i) {
    exposed += i == 0 ? gather_s[i] : std::max(0.0, gather_s[i] - compute_s[i - 1]);
  }
  return exposed;
}

}  // namespace

double ring_reduce_scatter_s(double bytes, int world_size, const LinkModel& link) {
  return ring_s(bytes, world_size, world_size - 1, link);
}

double ring_all_gather_s(double bytes, int world_size, const LinkModel& link) {
  return ring_s(bytes, world_size, world_size - 1, link);
}

double ring_all_reduce_s(double bytes, int world_size, const LinkModel& link) {
  return ring_s(bytes, world_size, 2 * (world_size - 1), link);
}

StepPrediction predict_step(const StepWork& w, const LinkModel& link) {
  StepPrediction p;
  const int K = w.world_size;
  const double ring = K > 1 ? static_cast<double>(K - 1) / K : 0.0;
  const double micro_s = w.flops_per_micro / w.flops_per_s;
  p.compute_s = micro_s * static_cast<double>(w.accum_steps);
  const double backward_s = micro_s * 2.0 / 3.0;

  // Gradient reductions during the backward of each micro-batch that reduces (the last,
  // or all of them with sharded accumulation), last bucket first. Times count from the
  // start of the last backward: micro-batch m's starts (accum_steps - 1 - m) micro_s earlier.
  const int64_t reducing = w.sharded_accumulation && w.stage >= 2 ? std::max<int64_t>(1, w.accum_steps) : 1;
  double total_elems = 0;
  for (int64_t e : w.bucket_elems) total_elems += static_cast<double>(e);
  double stream_free = -std::numeric_limits<double>::infinity();
  for (int64_t m = reducing - 1; m >= 0; --m) {  // m micro-batches before the last
    const double backward_begin = -static_cast<double>(m) * micro_s;
    double covered = 0;
    for (size_t i = w.bucket_elems.size(); i-- > 0;) {
      const double bytes = static_cast<double>(w.bucket_elems[i]) * w.reduce_bytes;
      const double t = w.stage == 0 ? ring_all_reduce_s(bytes, K, link) : ring_reduce_scatter_s(bytes, K, link);
      p.reduce_s += t;
      p.sent_bytes += (w.stage == 0 ? 2 * ring : ring) * bytes;
      covered += static_cast<double>(w.bucket_elems[i]);
      const double ready = w.overlap && total_elems > 0 ? backward_s * covered / total_elems : backward_s;
      stream_free = std::max(stream_free, backward_begin + ready) + t;
    }
  }
  const double reduce_exposed = std::max(0.0, stream_free - backward_s);

  double gather_exposed = 0;
  if (w.stage == 1 || w.stage == 2) {
    for (int64_t e : w.bucket_elems) {
      const double bytes = static_cast<double>(e) * w.gather_bytes;
      p.gather_s += ring_all_gather_s(bytes, K, link);
      p.sent_bytes += ring * bytes;
    }
    gather_exposed = p.gather_s;
  } else if (w.stage == 3) {
    double elems = 0;
    for (int64_t e : w.group_elems) elems += static_cast<double>(e);
    std::vector<double> gather, forward, backward;
    for (int64_t e : w.group_elems) {
      const double bytes = static_cast<double>(e) * w.gather_bytes;
      gather.push_back(ring_all_gather_s(bytes, K, link));
      const double share = elems > 0 ? static_cast<double>(e) / elems : 0.0;
      forward.push_back(micro_s / 3.0 * share);
      backward.push_back(backward_s * share);
      p.sent_bytes += 2.0 * static_cast<double>(w.accum_steps) * ring * bytes;
    }
    const double passes = static_cast<double>(w.accum_steps);
    double one_pass = 0;
    for (double g : gather) one_pass += g;
    p.gather_s = 2.0 * passes * one_pass;
    std::vector<double> gather_rev(gather.rbegin(), gather.rend()), backward_rev(backward.rbegin(), backward.rend());
    gather_exposed = passes * (exposed_gathers(gather, forward) + exposed_gathers(gather_rev, backward_rev));
  }

  p.small_s = ring_all_reduce_s(0, K, link);
  p.exposed_comm_s = reduce_exposed + gather_exposed + p.small_s;
  p.step_s = p.compute_s + p.exposed_comm_s;
  return p;
}

}  // namespace zdp::launcher
