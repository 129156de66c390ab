// kernels/fold.h on the CPU: out = round_out(in + acc) element for element, in place over
// the input or over the fp32 accumulation, and the aliasing a GPU could not run.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/fold.h"

namespace zdp::kernels {
namespace {

TEST(FoldKernel, SumsIntoTheOutputTypeInPlaceOrNot) {
  const std::vector<float> in = {1.0f, -2.5f, 0x1p-9f, 3.0f};
  std::vector<float> acc = {0.5f, 0.25f, 1.0f, -3.0f};
  std::vector<Bf16> out(in.size());
  ASSERT_TRUE(fold_cpu({in.data(), DType::kF32, acc.data(), out.data(), DType::kBF16, 4}).ok());
  // 1 + 2^-9 rounds to 1 in bf16 (8 significant bits): one rounding, of the fp32 sum.
  const std::vector<float> want = {1.5f, -2.25f, 1.0f, 0.0f};
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(to_f32(out[i]), want[i]) << i;
  // In place over the fp32 accumulation (the engine's accumulation step).
  ASSERT_TRUE(fold_cpu({in.data(), DType::kF32, acc.data(), acc.data(), DType::kF32, 4}).ok());
  EXPECT_EQ(acc, (std::vector<float>{1.5f, -2.25f, 1.0f + 0x1p-9f, 0.0f}));
}

// A 16-bit output over the fp32 accumulation would make element k overwrite half of
// acc[k / 2] while another GPU thread may still read it: refused, on both devices alike.
TEST(FoldKernel, RefusesAHalfWidthOutputOverTheAccumulation) {
  std::vector<float> acc(4, 1.0f);
  const std::vector<Bf16> in(4, from_f32<Bf16>(1.0f));
  const Status s = fold_cpu({in.data(), DType::kBF16, acc.data(), acc.data(), DType::kBF16, 4});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("16-bit output"), std::string::npos) << s.to_string();
  EXPECT_EQ(acc, std::vector<float>(4, 1.0f));  // nothing written
}

}  // namespace
}  // namespace zdp::kernels
