// comm_bench's buffers per collective (bench/comm_bench.h collective_shape): an all-gather
// of world slices fills its whole output, at world sizes that do not divide the buffer
// too. Sized as the whole buffer, NCCL's check found the tail still poisoned at 3 GPUs and
// failed the run (the Gloo half sized it right by hand).
#include <gtest/gtest.h>

#include <vector>

#include "bench/comm_bench.h"

namespace zdp::bench {
namespace {

TEST(CommBenchShape, AnAllGatherFillsItsOutputAtEveryWorldSize) {
  for (int world : {1, 2, 3, 5, 6, 7, 8}) {
    const int64_t total = (int64_t{1} << 20) / 4;  // 1 MiB of fp32
    const CollectiveShape g = collective_shape("all_gather", total, world);
    // Each rank's input as comm_bench fills it; the gather concatenates them in rank order.
    std::vector<float> out(static_cast<size_t>(g.out), -1.0f);
    for (int r = 0; r < world; ++r) {
      std::vector<float> in(static_cast<size_t>(g.in));
      fill(in, 0, r * g.slice);
      std::copy(in.begin(), in.end(), out.begin() + r * g.slice);
    }
    int64_t wrong = 0;
    for (int64_t i = 0; i < g.out; ++i) wrong += out[static_cast<size_t>(i)] != static_cast<float>(i % 5 + 1);
    EXPECT_EQ(wrong, 0) << "world " << world;
    EXPECT_EQ(g.out, g.slice * world);
    const CollectiveShape s = collective_shape("reduce_scatter", total, world);
    EXPECT_EQ(s.in, s.slice * world);
    EXPECT_EQ(s.out, total / world);
    EXPECT_EQ(collective_shape("all_reduce", total, world).out, total);
  }
}

}  // namespace
}  // namespace zdp::bench
