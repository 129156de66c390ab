// The time half of `dp-launch plan`: an alpha-beta model of the ring collectives the
// engine issues per bucket, and a step-time prediction that adds compute and the part of
// the communication that overlap does not hide. Pure arithmetic (plan_cost_test checks
// it against hand-computed numbers).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "planner/engine_kernels.h"

namespace zdp::launcher {

// One link as the collectives see it: a message of n bytes between two ranks takes
// alpha + n / beta seconds.
struct LinkModel {
  double alpha_s = 0;          // latency per message
  double beta_bytes_per_s = 1; // bandwidth
  std::string origin;          // "calibrated ...", "--link", "assumed ..."
};

// Two levels of links: ranks_per_node (g) ranks share a node and its fast link (NVLink),
// nodes meet over the inter-node link (each GPU's NIC). ranks_per_node <= 0, or a world
// of at most g ranks, is one node: only `intra` is used.
struct LinkTiers {
  LinkModel intra;
  LinkModel inter;
  int ranks_per_node = 0;
  // NCCL's double binary tree is an all-reduce between nodes too (GPU ranks); Gloo's
  // ranks (CPU) all-reduce in zdp's ring only.
  bool tree = true;
};

// The ring collectives over two levels: for K = N x g ranks and a buffer of B bytes, the
// bytes as the hierarchical algorithm moves them (what NCCL's rings over one NIC per GPU
// reach too: each node's 1/g share through each of its g NICs), the latency as NCCL's
// tuning model counts a ring's (src/graph/tuning.cc: K - 1 hops a pass, N - 1 of them
// between nodes):
//   reduce-scatter = (K-N) a_intra + (g-1) B / (g b_intra) + (N-1) (a_inter + B / (g N b_inter))
// all-gather the same. All-reduce: the bytes inside the node twice, and the faster of the
// ring, 2 (K-N) a_intra + 2 (N-1) (a_inter + B / (g N b_inter)), and NCCL's double binary
// tree, 2 (g-1) a_intra + 2 (ceil(log2 N) a_inter + B / (g b_inter)). One node: the
// one-level ring below.
double tiered_reduce_scatter_s(double bytes, int world_size, const LinkTiers& links);
double tiered_all_reduce_s(double bytes, int world_size, const LinkTiers& links);
// The engine's all-to-all exchange (compressed communication): each rank sends g - 1
// chunks of `intra_chunk` bytes to its node's peers and K - g of `inter_chunk` to the
// others, at once, the two links in parallel:
//   max((g-1) (a_intra + intra_chunk / b_intra), (K-g) (a_inter + inter_chunk / b_inter)).
double tiered_all_to_all_s(double intra_chunk, double inter_chunk, int world_size, const LinkTiers& links);
// What crosses nodes per rank: a ring collective's (N-1)/N x B/g (per pass), an
// all-to-all's (K - g) x inter_chunk. Zero on one node.
double tiered_ring_inter_bytes(double bytes, int world_size, const LinkTiers& links);

// Ring algorithms over K ranks for a buffer of `bytes` (the whole buffer, as
// nccl-tests' size): reduce-scatter and all-gather take K - 1 steps of bytes / K each,
// all-reduce 2 (K - 1) such steps. Zero for K = 1 (the engine copies locally).
double ring_reduce_scatter_s(double bytes, int world_size, const LinkModel& link);
double ring_all_gather_s(double bytes, int world_size, const LinkModel& link);
double ring_all_reduce_s(double bytes, int world_size, const LinkModel& link);

// What one rank does in one optimizer step.
struct StepWork {
  int stage = 0;
  int world_size = 1;
  int64_t accum_steps = 1;
  bool overlap = true;                // reductions overlap the backward that produced them
  bool sharded_accumulation = false;  // stages 2-3 (zero.accumulate = "sharded"): every
                                      // micro-batch reduced, not only the last
  // train.deterministic: every micro-batch's bucket is all-gathered (K x the bucket, in the
  // compute dtype: leaf_bytes per element) instead of reduced (docs/design.md "Cost").
  bool deterministic = false;
  double leaf_bytes = 4;
  std::vector<int64_t> bucket_elems;  // padded, in layout order (backward runs them in reverse)
  // Per bucket in layout order, the fraction of a micro-batch's backward after which all
  // its parameters have their gradient (bucket_ready_fractions); empty: the share of the
  // elements backward has covered, last bucket first.
  std::vector<double> bucket_ready;
  std::vector<int64_t> group_elems;   // stage 3: padded elements per layer group, in order
  // Stage 3: layer groups gathered ahead of use (zero.prefetch_layers) and the buffers
  // that hold gathered groups (MemoryPlan::gather_slots; 0: 1 + min(prefetch, G - 1)).
  int prefetch_layers = 1;
  int gather_slots = 0;
  // dp-train's GPT's layer scopes (the tied embedding's group held inside the head's);
  // otherwise each group's scope forward, then backward (plan_cost.cc stage3_scopes).
  bool gpt_scopes = false;
  // Bytes per element on the wire: the reduce dtype's, or a quantized chunk's (scales and
  // padding included: ~1.02 for int8, ~0.52 for int4); the parameter gather's: the compute
  // dtype's, or int8's.
  double reduce_bytes = 4;
  double gather_bytes = 4;
  // Quantized (zero.reduce_dtype / gather_dtype int8, int4): the engine's exchange is an
  // all-to-all (the reduce; the gather with compress = "inter-node") or a ring all-gather
  // of the quantized chunks; reduce_bytes / gather_bytes are then the quantized bytes, and
  // these the bytes per element to same-node peers (the same, or fp32 / the compute
  // dtype's with compress = "inter-node").
  bool reduce_all_to_all = false;
  bool gather_all_to_all = false;
  double reduce_bytes_intra = 4;
  double gather_bytes_intra = 4;
  double flops_per_micro = 0;         // forward + backward of one micro-batch on one rank
  double flops_per_s = 1;             // one rank's sustained rate
  // The optimizer's step over all the parameters on one rank's device (0: not modelled).
  // A rank runs all of it at stage 0 and its 1/K shard at stages 1-3.
  double optimizer_s = 0;
  // GPU plans: the engine's own kernels (engine_kernels.h: accumulation and folds,
  // statistics and decision, the optimizer) priced at this world size, stage and
  // accumulation from bucket_elems, in place of optimizer_s. `engine` gives the dtypes
  // and the optimizer; its buckets, world, stage and accumulation come from this work.
  const GpuSpec* gpu = nullptr;
  GpuEfficiency gpu_eff;
  EngineKernelShape engine;
};

struct StepPrediction {
  double compute_s = 0;       // all micro-batches' forward + backward, and the rank's optimizer step
  double optimizer_s = 0;     // of it, the optimizer step over the rank's parameters
  double engine_s = 0;        // of it, the engine's own kernels (the optimizer's included; GPU plans)
  double reduce_s = 0;        // the gradient reductions, back to back
  double gather_s = 0;        // the parameter all-gathers, back to back
  double small_s = 0;         // the gradient-norm all-reduce (latency only)
  double exposed_comm_s = 0;  // what the step waits for beyond compute
  double step_s = 0;          // compute + exposed communication
  double sent_bytes = 0;      // bytes one rank sends per step (ring: (K-1)/K of each buffer per step)
  double inter_sent_bytes = 0;  // of them, what crosses nodes (two-level links only)
};

// The prediction, with these rules (the engine's schedule, simplified):
//  - forward is 1/3 and backward 2/3 of a micro-batch's compute (6 Psi = 2 + 4);
//  - stage 0 all-reduces each bucket, stages 1-3 reduce-scatter it; the reductions run on
//    one communication stream in backward order during the last micro-batch's backward,
//    bucket b becoming ready at its bucket_ready fraction of the backward (or when backward
//    has covered its share of the elements), issued strictly last bucket first as the
//    engine does: the time past the end of backward is exposed (everything, with overlap
//    off);
//  - sharded_accumulation (stages 2-3, accum_steps > 1): every micro-batch's backward
//    reduces the same way (accum_steps x the reduce-scatter volume); an earlier
//    micro-batch's reductions hide behind the compute that follows it (the stream is
//    serial: a backlog delays the later ones), only what runs past the last backward is
//    exposed;
//  - deterministic: every micro-batch's backward all-gathers each bucket from all K ranks
//    (a rank receives (K-1) x the bucket) in place of the reduction, hidden as sharded
//    accumulation's are;
//  - stages 1-2 all-gather every bucket's parameters after the optimizer: exposed;
//  - stage 3 gathers a layer group where its scope begins unless a buffer still holds it
//    (gather_slots buffers, lent again least recently released first: a group used at the
//    turn from forward to backward, or from one micro-batch to the next, is not gathered
//    again), and prefetches prefetch_layers groups ahead: a gather waits for the compute
//    issued before it, so it hides behind the groups before its own (prefetch 0: nothing
//    hides); in the last backward the gathers and the reductions share the one stream, so
//    at least their sum past the backward is exposed;
//  - one latency-bound all-reduce for the gradient norm;
//  - the optimizer step over the rank's parameters (all at stage 0, 1/K at stages 1-3)
//    after the last backward, where optimizer_s gives its time; on GPU plans the engine's
//    kernels instead (engine_kernels.h, priced per bucket at this K and stage: the
//    accumulation and folds whole at every stage, the statistics 1/K at every stage, the
//    optimizer as above); otherwise it is not modelled.
StepPrediction predict_step(const StepWork& work, const LinkTiers& links);

// Per bucket (MemoryPlan::bucket_params: its first and last parameter), the latest of its
// parameters' gradient ready fractions (trainer::ModelSpec::grad_ready, one per
// parameter). Empty when `param_ready` is (the model states none).
std::vector<double> bucket_ready_fractions(const std::vector<std::pair<int, int>>& bucket_params,
                                           const std::vector<double>& param_ready);
inline StepPrediction predict_step(const StepWork& work, const LinkModel& link) {
  return predict_step(work, LinkTiers{link, link, 0});
}

}  // namespace zdp::launcher
