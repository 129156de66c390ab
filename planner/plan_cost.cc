// The alpha-beta collective model and the step-time prediction (see plan_cost.h).
#include "planner/plan_cost.h"

#include <algorithm>
#include <cmath>
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

// Ranks per node and nodes of a world of K on `links` (one node: g = K, n = 1).
struct Tiers {
  int g = 1, n = 1;
};
Tiers tiers_of(int K, const LinkTiers& links) {
  if (links.ranks_per_node <= 0 || K <= links.ranks_per_node) return {K, 1};
  return {links.ranks_per_node, (K + links.ranks_per_node - 1) / links.ranks_per_node};
}

// One pass of the hierarchical ring (plan_cost.h).
double tiered_pass_s(double bytes, int K, const LinkTiers& links) {
  if (K <= 1) return 0;
  const Tiers t = tiers_of(K, links);
  const double intra = (t.g - 1) * (links.intra.alpha_s + bytes / t.g / links.intra.beta_bytes_per_s);
  const double inter = (t.n - 1) * (links.inter.alpha_s + bytes / t.g / t.n / links.inter.beta_bytes_per_s);
  return intra + inter;
}

}  // namespace

double tiered_reduce_scatter_s(double bytes, int world_size, const LinkTiers& links) {
  return tiered_pass_s(bytes, world_size, links);
}

double tiered_all_reduce_s(double bytes, int world_size, const LinkTiers& links) {
  if (world_size <= 1) return 0;
  const Tiers t = tiers_of(world_size, links);
  if (t.n <= 1) return 2 * tiered_pass_s(bytes, world_size, links);
  // Inside each node the ring's reduce-scatter and all-gather; between nodes, on the
  // node's 1/g, NCCL's ring or its double binary tree, whichever is faster: the tree's
  // latency grows with log2(nodes), the ring's with nodes (at 512 nodes a ring of 10
  // buckets spent 200 ms on latency alone), for about the same bytes.
  const double intra = 2 * (t.g - 1) * (links.intra.alpha_s + bytes / t.g / links.intra.beta_bytes_per_s);
  const double chunk = bytes / t.g;
  const double ring = 2 * (t.n - 1) * (links.inter.alpha_s + chunk / t.n / links.inter.beta_bytes_per_s);
  const double tree = 2 * (std::ceil(std::log2(static_cast<double>(t.n))) * links.inter.alpha_s +
                           chunk / links.inter.beta_bytes_per_s);
  return intra + std::min(ring, tree);
}

double tiered_all_to_all_s(double intra_chunk, double inter_chunk, int world_size, const LinkTiers& links) {
  if (world_size <= 1) return 0;
  const Tiers t = tiers_of(world_size, links);
  const double intra = (t.g - 1) * (links.intra.alpha_s + intra_chunk / links.intra.beta_bytes_per_s);
  const double inter = (world_size - t.g) * (links.inter.alpha_s + inter_chunk / links.inter.beta_bytes_per_s);
  return std::max(intra, inter);
}

double tiered_ring_inter_bytes(double bytes, int world_size, const LinkTiers& links) {
  const Tiers t = tiers_of(world_size, links);
  return t.n > 1 ? static_cast<double>(t.n - 1) / t.n * bytes / t.g : 0.0;
}

double ring_reduce_scatter_s(double bytes, int world_size, const LinkModel& link) {
  return ring_s(bytes, world_size, world_size - 1, link);
}

double ring_all_gather_s(double bytes, int world_size, const LinkModel& link) {
  return ring_s(bytes, world_size, world_size - 1, link);
}

double ring_all_reduce_s(double bytes, int world_size, const LinkModel& link) {
  return ring_s(bytes, world_size, 2 * (world_size - 1), link);
}

StepPrediction predict_step(const StepWork& w, const LinkTiers& links) {
  StepPrediction p;
  const int K = w.world_size;
  const Tiers tiers = tiers_of(K, links);
  // One exchange of a buffer of `elems` elements: its time, adding what it sends.
  auto exchange = [&](double elems, bool all_to_all, double bytes_inter, double bytes_intra, int passes) {
    if (all_to_all) {
      const double ci = elems / K * bytes_intra, ce = elems / K * bytes_inter;
      p.sent_bytes += (tiers.g - 1) * ci + (K - tiers.g) * ce;
      p.inter_sent_bytes += (K - tiers.g) * ce;
      return tiered_all_to_all_s(ci, ce, K, links);
    }
    const double bytes = elems * bytes_inter;
    p.sent_bytes += passes * (K > 1 ? static_cast<double>(K - 1) / K : 0.0) * bytes;
    p.inter_sent_bytes += passes * tiered_ring_inter_bytes(bytes, K, links);
    return passes == 2 ? tiered_all_reduce_s(bytes, K, links) : passes * tiered_pass_s(bytes, K, links);
  };
  const double micro_s = w.flops_per_micro / w.flops_per_s;
  p.optimizer_s = w.stage >= 1 && K > 1 ? w.optimizer_s / K : w.optimizer_s;
  p.compute_s = micro_s * static_cast<double>(w.accum_steps) + p.optimizer_s;
  const double backward_s = micro_s * 2.0 / 3.0;

  // Gradient reductions during the backward of each micro-batch that reduces (the last,
  // or all of them with sharded accumulation), last bucket first. Times count from the
  // start of the last backward: micro-batch m's starts (accum_steps - 1 - m) micro_s earlier.
  const int64_t reducing = (w.sharded_accumulation && w.stage >= 2) || w.deterministic
                               ? std::max<int64_t>(1, w.accum_steps)
                               : 1;
  double total_elems = 0;
  for (int64_t e : w.bucket_elems) total_elems += static_cast<double>(e);
  double stream_free = -std::numeric_limits<double>::infinity();
  double last_reduce_s = 0;  // the reductions of the last micro-batch's backward
  for (int64_t m = reducing - 1; m >= 0; --m) {  // m micro-batches before the last
    const double backward_begin = -static_cast<double>(m) * micro_s;
    double covered = 0;
    for (size_t i = w.bucket_elems.size(); i-- > 0;) {
      const double elems = static_cast<double>(w.bucket_elems[i]);
      const double t = w.deterministic
                           ? exchange(elems * K, false, w.leaf_bytes, w.leaf_bytes, 1)  // the ranks' leaves gathered
                           : exchange(elems, w.stage >= 1 && w.reduce_all_to_all, w.reduce_bytes, w.reduce_bytes_intra,
                                      w.stage == 0 ? 2 : 1);
      p.reduce_s += t;
      if (m == 0) last_reduce_s += t;
      covered += static_cast<double>(w.bucket_elems[i]);
      const double ready = w.overlap && total_elems > 0 ? backward_s * covered / total_elems : backward_s;
      stream_free = std::max(stream_free, backward_begin + ready) + t;
    }
  }
  const double reduce_exposed = std::max(0.0, stream_free - backward_s);

  double gather_exposed = 0;
  if (w.stage == 1 || w.stage == 2) {
    for (int64_t e : w.bucket_elems) {
      p.gather_s += exchange(static_cast<double>(e), w.gather_all_to_all, w.gather_bytes, w.gather_bytes_intra, 1);
    }
    gather_exposed = p.gather_s;
  } else if (w.stage == 3) {
    double elems = 0;
    for (int64_t e : w.group_elems) elems += static_cast<double>(e);
    std::vector<double> gather, forward, backward;
    const double sent = p.sent_bytes, inter = p.inter_sent_bytes;
    for (int64_t e : w.group_elems) {
      gather.push_back(exchange(static_cast<double>(e), w.gather_all_to_all, w.gather_bytes, w.gather_bytes_intra, 1));
      const double share = elems > 0 ? static_cast<double>(e) / elems : 0.0;
      forward.push_back(micro_s / 3.0 * share);
      backward.push_back(backward_s * share);
    }
    // Every group is gathered twice (forward, backward) in every micro-batch.
    const double times = 2.0 * static_cast<double>(w.accum_steps);
    p.sent_bytes = sent + times * (p.sent_bytes - sent);
    p.inter_sent_bytes = inter + times * (p.inter_sent_bytes - inter);
    const double passes = static_cast<double>(w.accum_steps);
    double one_pass = 0;
    for (double g : gather) one_pass += g;
    p.gather_s = 2.0 * passes * one_pass;
    std::vector<double> gather_rev(gather.rbegin(), gather.rend()), backward_rev(backward.rbegin(), backward.rend());
    const double backward_gathers = exposed_gathers(gather_rev, backward_rev);
    gather_exposed = passes * (exposed_gathers(gather, forward) + backward_gathers);
    // The gathers and the reductions share one communication stream: in the last
    // backward it carries a pass of gathers and that micro-batch's reductions, and what
    // of both does not fit in the backward is exposed, however each alone would hide.
    const double shared = std::max(0.0, one_pass + last_reduce_s - backward_s);
    if (shared > reduce_exposed + backward_gathers) gather_exposed += shared - (reduce_exposed + backward_gathers);
  }

  p.small_s = tiered_all_reduce_s(0, K, links);
  p.exposed_comm_s = reduce_exposed + gather_exposed + p.small_s;
  p.step_s = p.compute_s + p.exposed_comm_s;
  return p;
}

}  // namespace zdp::launcher
