// The planner's two-level link model (plan_cost.h: NVLink inside a node, the inter-node
// link between nodes) and its pricing of compressed exchanges, against numbers computed
// by hand.
#include <gtest/gtest.h>

#include "planner/gpu_step_model.h"
#include "planner/plan_cost.h"

namespace zdp::launcher {
namespace {

// 4 ranks per node; 10 us and 100 GB/s inside, 20 us and 10 GB/s between nodes.
const LinkTiers kTiers{{10e-6, 100e9, "intra"}, {20e-6, 10e9, "inter"}, 4};

TEST(TieredCollectives, HierarchicalRingOverTwoLevels) {
  // 64 MB over 16 ranks = 4 nodes x 4: inside, the bytes 3 x 64 MB / 4 / 100 GB/s = 480 us
  // and the latency of the ring's 15 hops less the 3 between nodes, 12 x 10 us = 120 us
  // (NCCL's tuning model); across, on the node's quarter: 3 x (20 us + 64 MB / 16 / 10 GB/s
  // = 400 us) = 1260 us.
  EXPECT_NEAR(tiered_reduce_scatter_s(64e6, 16, kTiers), 600e-6 + 1260e-6, 1e-12);
  // All-reduce: the ring twice, 3720 us; the tree, 2 x (3 x 10 us + 480 us) inside and
  // 2 x (2 x 20 us + 16 MB / 10 GB/s) across = 4300 us: the ring.
  EXPECT_NEAR(tiered_all_reduce_s(64e6, 16, kTiers), 2 * (600e-6 + 1260e-6), 1e-12);
  // The hierarchy's latency (3 hops inside, 3 across a pass) was priced until NCCL's model
  // was read: 4096 ranks in 512 nodes of 8 have 3584 hops inside a pass, not 7.
  const LinkTiers eight{kTiers.intra, kTiers.inter, 8};
  EXPECT_NEAR(tiered_reduce_scatter_s(0, 4096, eight), 3584 * 10e-6 + 511 * 20e-6, 1e-12);
  EXPECT_NEAR(tiered_ring_inter_bytes(64e6, 16, kTiers), 0.75 * 16e6, 1e-6);  // (N-1)/N x B/g
  // One node (K <= 4): the one-level ring on the intra-node link, nothing crosses nodes.
  EXPECT_NEAR(tiered_reduce_scatter_s(64e6, 4, kTiers), ring_reduce_scatter_s(64e6, 4, kTiers.intra), 1e-15);
  EXPECT_EQ(tiered_ring_inter_bytes(64e6, 4, kTiers), 0.0);
  // No tiers: everything on the first link, as before.
  const LinkTiers flat{kTiers.intra, kTiers.inter, 0};
  EXPECT_NEAR(tiered_reduce_scatter_s(64e6, 16, flat), ring_reduce_scatter_s(64e6, 16, kTiers.intra), 1e-15);
  // Latency only: 2 x 3 x 10 us inside; between the 4 nodes NCCL's tree, 2 x log2(4) x
  // 20 us = 80 us, beats the ring's 2 x 3 x 20 us. With 64 MB the ring's bandwidth wins.
  EXPECT_NEAR(tiered_all_reduce_s(0, 16, kTiers), 60e-6 + 80e-6, 1e-15);
  // 512 nodes: the ring's 2 x 511 x 20 us (20 ms) of latency against the tree's 2 x 9 x 20 us.
  EXPECT_NEAR(tiered_all_reduce_s(0, 2048, kTiers), 60e-6 + 360e-6, 1e-12);
}

TEST(TieredCollectives, AllToAllUsesBothLinksAtOnce) {
  // 3 same-node chunks of 1 MB: 3 x (10 + 10) us = 60 us; 12 other-node chunks of 0.25 MB:
  // 12 x (20 + 25) us = 540 us; the slower link decides.
  EXPECT_NEAR(tiered_all_to_all_s(1e6, 0.25e6, 16, kTiers), 540e-6, 1e-12);
  EXPECT_NEAR(tiered_all_to_all_s(1e6, 0.25e6, 4, kTiers), 60e-6, 1e-12);  // one node
  EXPECT_EQ(tiered_all_to_all_s(1e6, 1e6, 1, kTiers), 0.0);
}

// One 16M-element bucket at stage 1 on 16 ranks in 4 nodes; compute 3 ms (backward 2 ms).
StepWork one_bucket() {
  StepWork w;
  w.stage = 1;
  w.world_size = 16;
  w.bucket_elems = {16000000};
  w.flops_per_micro = 3e9;
  w.flops_per_s = 1e12;
  return w;
}

TEST(TieredStep, CompressedExchangesAgainstTheFp32Ring) {
  // fp32: reduce-scatter and all-gather of 64 MB, 1.86 ms each; 60 MB sent per pass, 12 MB
  // of it across nodes.
  const StepPrediction fp32 = predict_step(one_bucket(), kTiers);
  EXPECT_NEAR(fp32.reduce_s, 1.86e-3, 1e-12);
  EXPECT_NEAR(fp32.gather_s, 1.86e-3, 1e-12);
  EXPECT_NEAR(fp32.sent_bytes, 2 * 60e6, 1e-3);
  EXPECT_NEAR(fp32.inter_sent_bytes, 2 * 12e6, 1e-3);
  // int8 everywhere (1 byte per value here): the gradient all-to-all sends 1M-element
  // chunks of 1 MB to all 15 peers: max(3 x 20 us, 12 x (20 + 100) us) = 1.44 ms; 12 MB
  // across nodes, as many as the fp32 ring's hierarchy: at 4 ranks per node, sending a
  // quarter of the bytes to every peer saves nothing over the ring's quarter of the data.
  StepWork all = one_bucket();
  all.reduce_all_to_all = true;
  all.reduce_bytes = all.reduce_bytes_intra = 1;
  const StepPrediction a = predict_step(all, kTiers);
  EXPECT_NEAR(a.reduce_s, 1.44e-3, 1e-12);
  EXPECT_NEAR(a.sent_bytes - fp32.sent_bytes / 2, 15e6, 1e-3);  // the gather is still the fp32 ring
  EXPECT_NEAR(a.inter_sent_bytes - fp32.inter_sent_bytes / 2, 12e6, 1e-3);
  // inter-node: fp32 chunks (4 MB) to the 3 same-node peers, 3 x (10 + 40) us = 150 us,
  // in parallel with the same 1.44 ms across nodes; the gather too (compute dtype 4 bytes
  // inside, 1 byte outside): the same times; 3 x 4 + 12 x 1 MB sent per exchange.
  StepWork inter = all;
  inter.reduce_bytes_intra = 4;
  inter.gather_all_to_all = true;
  inter.gather_bytes = 1;
  inter.gather_bytes_intra = 4;
  const StepPrediction i = predict_step(inter, kTiers);
  EXPECT_NEAR(i.reduce_s, 1.44e-3, 1e-12);
  EXPECT_NEAR(i.gather_s, 1.44e-3, 1e-12);
  EXPECT_NEAR(i.sent_bytes, 2 * 24e6, 1e-3);
  EXPECT_NEAR(i.inter_sent_bytes, 2 * 12e6, 1e-3);
  // One rank per node (a NIC per rank, no NVLink): now the ring sends 15/16 of the buffer
  // across nodes and int8 saves 4x of it.
  const LinkTiers lone{kTiers.intra, kTiers.inter, 1};
  EXPECT_NEAR(predict_step(one_bucket(), lone).inter_sent_bytes, 2 * 60e6, 1e-3);
  EXPECT_NEAR(predict_step(inter, lone).inter_sent_bytes, 2 * 15e6, 1e-3);
}

TEST(TieredStep, GpuTableGivesNodesAndTheirLinks) {
  const GpuSpec* h200 = find_gpu("h200");
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(h200->gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(h200->internode_bytes_per_s, 50e9);  // 400 Gb/s NDR per GPU
  EXPECT_GT(h200->nvlink_bytes_per_s, 8 * h200->internode_bytes_per_s);
  EXPECT_DOUBLE_EQ(find_gpu("a100-80g")->internode_bytes_per_s, 25e9);  // 200 Gb/s HDR
}

}  // namespace
}  // namespace zdp::launcher
