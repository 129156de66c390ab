// The ZeRO memory formula (engine/src/zero_memory.h): the per-rank memory table, the
// closed form for any Psi, K, stage and compute dtype, and its errors. What the engine
// really allocates is checked against it in buffer_plan_test.
#include "engine/src/zero_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace zdp {
namespace {

// ---- Memory per rank: docs/design.md's formula (what the engine allocates: buffer_plan_test) -------

TEST(ZeroMemory, DesignTable) {
  // docs/design.md: 2Psi + 2Psi + 12Psi | 2Psi + 2Psi + 12Psi/K | 2Psi + 14Psi/K | 16Psi/K; Psi = 1000, K = 4.
  const ZeroMemory s0 = *zero_memory_formula(1000, 4, 0, 2);
  EXPECT_EQ(s0.params, 2000);
  EXPECT_EQ(s0.grads, 2000);
  EXPECT_EQ(s0.master, 4000);
  EXPECT_EQ(s0.m, 4000);
  EXPECT_EQ(s0.v, 4000);
  EXPECT_EQ(s0.total(), 16000);
  const ZeroMemory s1 = *zero_memory_formula(1000, 4, 1, 2);
  EXPECT_EQ(s1.params, 2000);
  EXPECT_EQ(s1.grads, 2000);
  EXPECT_EQ(s1.master + s1.m + s1.v, 3000);
  EXPECT_EQ(s1.total(), 7000);
  const ZeroMemory s2 = *zero_memory_formula(1000, 4, 2, 2);
  EXPECT_EQ(s2.params, 2000);
  EXPECT_EQ(s2.grads, 500);
  EXPECT_EQ(s2.total(), 5500);
  const ZeroMemory s3 = *zero_memory_formula(1000, 4, 3, 2);
  EXPECT_EQ(s3.params, 500);
  EXPECT_EQ(s3.total(), 4000);
}

TEST(ZeroMemory, FormulaForAnyPsiKAndComputeDtype) {
  for (int64_t psi : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{1'500'000'000}}) {
    for (int k = 1; k <= 8; ++k) {
      for (int c : {2, 4}) {
        const double p = static_cast<double>(psi);
        const double expected[4] = {(2 * c + 12) * p, 2 * c * p + 12 * p / k, c * p + (c + 12) * p / k,
                                    (2 * c + 12) * p / k};
        for (int stage = 0; stage < 4; ++stage) {
          const StatusOr<ZeroMemory> m = zero_memory_formula(psi, k, stage, c);
          ASSERT_TRUE(m.ok()) << m.status().to_string();
          EXPECT_DOUBLE_EQ(m->total(), expected[stage])
              << "psi " << psi << " K " << k << " stage " << stage << " c " << c;
        }
      }
    }
  }
}

TEST(ZeroMemory, FormulaErrors) {
  EXPECT_NE(zero_memory_formula(10, 2, 4, 2).status().message().find("ZeRO stage must be 0, 1, 2 or 3, got 4"),
            std::string::npos);
  EXPECT_NE(zero_memory_formula(10, 2, 1, 3)
                .status()
                .message()
                .find("compute_bytes must be 2 (bf16/fp16) or 4 (fp32), got 3"),
            std::string::npos);
  EXPECT_NE(zero_memory_formula(-1, 2, 1, 2).status().message().find("psi must be >= 0, got -1"), std::string::npos);
  EXPECT_NE(zero_memory_formula(10, 0, 1, 2).status().message().find("world_size must be >= 1, got 0"),
            std::string::npos);
}

}  // namespace
}  // namespace zdp
