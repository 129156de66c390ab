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

// Stage 3's gathers as the engine issues them (engine/src/param_gatherer.cc), over one
// step: each micro-batch's layer scopes in the trainer's order (stage3_scopes). Entering
// a group gathers it unless a buffer still holds it, then prefetches the next `prefetch`
// groups in the scope's direction while a buffer is free; leaving its last scope releases
// its buffer, lent again least recently released first (the pool grows by one when every
// buffer is held, as the engine's). Groups gathered before the step are stale (the
// optimizer changed them). A gather waits for the compute issued before it and for the
// stream; a scope's compute waits for its group's gather.
struct ScopeEvent {
  enum Kind { kEnter, kExit, kCompute } kind;
  int group = 0;
  int direction = 1;  // kEnter: +1 forward, -1 backward (where prefetching goes)
  double seconds = 0;  // kCompute
  bool last_backward = false;  // in the last micro-batch's backward (its stream is shared)
};
struct Stage3Gathers {
  std::vector<int64_t> count;  // gathers of each group in the step
  double exposed_s = 0;        // compute's wait for them
  double last_pass_s = 0;      // the gathers issued in the last backward
  double last_exposed_s = 0;   // of exposed_s, the last backward's
};
Stage3Gathers simulate_stage3_gathers(const std::vector<ScopeEvent>& events, const std::vector<double>& gather_s,
                                      int prefetch, int slots) {
  const int G = static_cast<int>(gather_s.size());
  Stage3Gathers out;
  out.count.assign(static_cast<size_t>(G), 0);
  struct Slot {
    int key = -1;
    bool held = false;
    uint64_t released_at = 0;
  };
  std::vector<Slot> pool(static_cast<size_t>(std::max(1, slots)));
  std::vector<double> ready(static_cast<size_t>(G), 0);
  std::vector<int> depth(static_cast<size_t>(G), 0);
  uint64_t clock = 1;
  double stream = 0, compute = 0, busy = 0;
  const auto find = [&](int g) {
    for (size_t i = 0; i < pool.size(); ++i) {
      if (pool[i].key == g) return static_cast<int>(i);
    }
    return -1;
  };
  const auto gather = [&](int g, bool prefetching, bool last) {
    int pick = -1;
    for (size_t i = 0; i < pool.size(); ++i) {
      if (!pool[i].held && (pick < 0 || pool[i].released_at < pool[static_cast<size_t>(pick)].released_at)) {
        pick = static_cast<int>(i);
      }
    }
    if (pick < 0) {
      if (prefetching) return;
      pool.push_back(Slot{});
      pick = static_cast<int>(pool.size()) - 1;
    }
    pool[static_cast<size_t>(pick)] = Slot{g, true, 0};
    stream = std::max(stream, compute) + gather_s[static_cast<size_t>(g)];
    ready[static_cast<size_t>(g)] = stream;
    ++out.count[static_cast<size_t>(g)];
    if (last) out.last_pass_s += gather_s[static_cast<size_t>(g)];
  };
  double last_begin = -1, last_busy = 0;
  for (const ScopeEvent& e : events) {
    if (e.last_backward && last_begin < 0) last_begin = compute, last_busy = busy;
    const size_t g = static_cast<size_t>(e.group);
    if (e.kind == ScopeEvent::kCompute) {
      compute += e.seconds;
      busy += e.seconds;
    } else if (e.kind == ScopeEvent::kEnter) {
      if (depth[g]++ == 0) {
        const int cached = find(e.group);
        if (cached >= 0) {
          pool[static_cast<size_t>(cached)].held = true;
        } else {
          gather(e.group, false, e.last_backward);
        }
        compute = std::max(compute, ready[g]);
      }
      for (int k = 1; k <= prefetch; ++k) {
        const int next = e.group + e.direction * k;
        if (next < 0 || next >= G) break;
        const int held = find(next);
        if (held >= 0) {
          pool[static_cast<size_t>(held)].held = true;
        } else {
          gather(next, true, e.last_backward);
        }
      }
    } else if (--depth[g] == 0) {
      const int slot = find(e.group);
      if (slot >= 0) pool[static_cast<size_t>(slot)].held = false, pool[static_cast<size_t>(slot)].released_at = clock++;
    }
  }
  out.exposed_s = compute - busy;
  if (last_begin >= 0) out.last_exposed_s = (compute - last_begin) - (busy - last_busy);
  return out;
}

// One step's layer scopes: per micro-batch, groups 0..G-1 forward and G-1..0 backward, each
// scope holding its group's share of the compute; or dp-train's GPT's (trainer/models/
// gpt.cc): the head's group (G-1) entered for the backward with the tied embedding's (0)
// nested inside it for the LM head's forward and backward (their shares), the blocks
// (1..G-2) forward and backward, the embedding's lookups (nothing) at either end.
std::vector<ScopeEvent> stage3_scopes(const StepWork& w, const std::vector<double>& forward,
                                      const std::vector<double>& backward) {
  const int G = static_cast<int>(forward.size());
  std::vector<ScopeEvent> ev;
  auto scope = [&](int g, int dir, double seconds, bool last) {
    ev.push_back({ScopeEvent::kEnter, g, dir, 0, last});
    ev.push_back({ScopeEvent::kCompute, g, dir, seconds, last});
    ev.push_back({ScopeEvent::kExit, g, dir, 0, last});
  };
  for (int64_t m = 0; m < w.accum_steps; ++m) {
    const bool last = m + 1 == w.accum_steps;
    if (w.gpt_scopes && G >= 3) {
      scope(0, 1, 0, false);
      for (int g = 1; g < G - 1; ++g) scope(g, 1, forward[static_cast<size_t>(g)], false);
      const double head = forward[0] + forward[static_cast<size_t>(G - 1)] + backward[0] +
                          backward[static_cast<size_t>(G - 1)];
      ev.push_back({ScopeEvent::kEnter, G - 1, -1, 0, last});
      ev.push_back({ScopeEvent::kEnter, 0, 1, 0, last});
      ev.push_back({ScopeEvent::kCompute, 0, 1, head, last});
      ev.push_back({ScopeEvent::kExit, G - 1, -1, 0, last});
      ev.push_back({ScopeEvent::kExit, 0, 1, 0, last});
      for (int g = G - 2; g >= 1; --g) scope(g, -1, backward[static_cast<size_t>(g)], last);
      scope(0, -1, 0, last);
    } else {
      for (int g = 0; g < G; ++g) scope(g, 1, forward[static_cast<size_t>(g)], false);
      for (int g = G - 1; g >= 0; --g) scope(g, -1, backward[static_cast<size_t>(g)], last);
    }
  }
  return ev;
}

// Ranks per node and nodes of a world of K on `links` (one node: g = K, n = 1).
struct Tiers {
  int g = 1, n = 1;
};
Tiers tiers_of(int K, const LinkTiers& links) {
  if (links.ranks_per_node <= 0 || K <= links.ranks_per_node) return {K, 1};
  return {links.ranks_per_node, (K + links.ranks_per_node - 1) / links.ranks_per_node};
}

// One pass of the ring over two levels (plan_cost.h): the bytes as the hierarchy moves
// them, the latency of the K - 1 hops a chunk travels, N - 1 of them between nodes (NCCL's
// own tuning model).
double tiered_pass_s(double bytes, int K, const LinkTiers& links) {
  if (K <= 1) return 0;
  const Tiers t = tiers_of(K, links);
  const double intra = (K - t.n) * links.intra.alpha_s + (t.g - 1) * bytes / t.g / links.intra.beta_bytes_per_s;
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
  // latency grows with log2(nodes), the ring's with nodes (at 512 nodes of 8 H200s the
  // ring's latency is 2 (3584 x 3.4 us + 511 x 14 us) = 39 ms per bucket), for about
  // the same bytes.
  // The bytes inside the node as the hierarchy moves them, for either; the latency as
  // NCCL's tuning model counts it: the ring's 2 (K - 1) hops, 2 (N - 1) of them between
  // nodes, the tree's 2 (g - 1) inside and 2 ceil(log2 N) between.
  const double intra = 2 * (t.g - 1) * bytes / t.g / links.intra.beta_bytes_per_s;
  const double chunk = bytes / t.g;
  const double ring = 2 * (world_size - t.n) * links.intra.alpha_s +
                      2 * (t.n - 1) * (links.inter.alpha_s + chunk / t.n / links.inter.beta_bytes_per_s);
  const double tree = 2 * (t.g - 1) * links.intra.alpha_s +
                      2 * (std::ceil(std::log2(static_cast<double>(t.n))) * links.inter.alpha_s +
                           chunk / links.inter.beta_bytes_per_s);
  return intra + (links.tree ? std::min(ring, tree) : ring);
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
  if (w.gpu != nullptr && !w.bucket_elems.empty()) {
    EngineKernelShape e = w.engine;
    e.bucket_elems = w.bucket_elems, e.world = K, e.stage = w.stage, e.accum_steps = w.accum_steps;
    e.sharded_accumulation = w.sharded_accumulation, e.deterministic = w.deterministic;
    const EngineKernelTimes t = engine_kernel_times(e, *w.gpu, w.gpu_eff);
    p.optimizer_s = t.optimizer_s;
    p.engine_s = t.total_s;
  } else {
    p.optimizer_s = w.stage >= 1 && K > 1 ? w.optimizer_s / K : w.optimizer_s;
    p.engine_s = p.optimizer_s;
  }
  p.compute_s = micro_s * static_cast<double>(w.accum_steps) + p.engine_s;
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
      // The model's backward order where it states one, else the elements' share. A bucket
      // never starts before the one issued ahead of it (the stream is serial).
      const double fraction = w.bucket_ready.size() == w.bucket_elems.size()
                                  ? std::clamp(w.bucket_ready[i], 0.0, 1.0)
                                  : (total_elems > 0 ? covered / total_elems : 1.0);
      const double ready = w.overlap ? backward_s * fraction : backward_s;
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
    std::vector<double> gather, forward, backward, bytes, inter_bytes;
    const double sent = p.sent_bytes, inter = p.inter_sent_bytes;
    for (int64_t e : w.group_elems) {
      const double sent_before = p.sent_bytes, inter_before = p.inter_sent_bytes;
      gather.push_back(exchange(static_cast<double>(e), w.gather_all_to_all, w.gather_bytes, w.gather_bytes_intra, 1));
      bytes.push_back(p.sent_bytes - sent_before);
      inter_bytes.push_back(p.inter_sent_bytes - inter_before);
      const double share = elems > 0 ? static_cast<double>(e) / elems : 0.0;
      forward.push_back(micro_s / 3.0 * share);
      backward.push_back(backward_s * share);
    }
    // As the engine gathers: a group still held from the pass before is not gathered
    // again (the turn from forward to backward, and from one micro-batch to the next),
    // so not every group twice a micro-batch; prefetch_layers 0 hides nothing.
    const int G = static_cast<int>(gather.size());
    const int slots = w.gather_slots > 0 ? w.gather_slots : std::min(G, 1 + std::min(w.prefetch_layers, G - 1));
    const Stage3Gathers sim = simulate_stage3_gathers(stage3_scopes(w, forward, backward), gather,
                                                      std::max(0, w.prefetch_layers), slots);
    p.sent_bytes = sent, p.inter_sent_bytes = inter;
    for (int g = 0; g < G; ++g) {
      const double n = static_cast<double>(sim.count[static_cast<size_t>(g)]);
      p.sent_bytes += n * bytes[static_cast<size_t>(g)];
      p.inter_sent_bytes += n * inter_bytes[static_cast<size_t>(g)];
      p.gather_s += n * gather[static_cast<size_t>(g)];
    }
    gather_exposed = sim.exposed_s;
    // The gathers and the reductions share one communication stream: in the last
    // backward it carries that pass's gathers and the micro-batch's reductions, and what
    // of both does not fit in the backward is exposed, however each alone would hide.
    const double shared = std::max(0.0, sim.last_pass_s + last_reduce_s - backward_s);
    if (shared > reduce_exposed + sim.last_exposed_s) gather_exposed += shared - (reduce_exposed + sim.last_exposed_s);
  }

  p.small_s = tiered_all_reduce_s(0, K, links);
  p.exposed_comm_s = reduce_exposed + gather_exposed + p.small_s;
  // One communication stream carries every collective of the step, so the step is never
  // shorter than their sum. The stage-3 simulation keeps the gathers on a clock of their
  // own but for the last backward: with sharded accumulation the earlier micro-batches'
  // reduce-scatters delay the next forward's gathers too (gpt2-350m-zero3 at K = 512: 468
  // ms of collectives in a predicted 354 ms step).
  p.exposed_comm_s = std::max(p.exposed_comm_s, p.reduce_s + p.gather_s + p.small_s - p.compute_s);
  p.step_s = p.compute_s + p.exposed_comm_s;
  return p;
}

std::vector<double> bucket_ready_fractions(const std::vector<std::pair<int, int>>& bucket_params,
                                           const std::vector<double>& param_ready) {
  std::vector<double> out;
  if (param_ready.empty()) return out;
  for (const auto& [first, last] : bucket_params) {
    double ready = 0;
    for (int p = std::max(0, first); p <= last && p < static_cast<int>(param_ready.size()); ++p) {
      ready = std::max(ready, param_ready[static_cast<size_t>(p)]);
    }
    out.push_back(ready);
  }
  return out;
}

}  // namespace zdp::launcher
