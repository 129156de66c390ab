// `dp-launch plan --calibrate`'s guard (planner/plan_calibrate.h model_timing_refusal):
// the model is timed on this machine only in fp32, within a quarter of its memory, and
// where its 5 micro-batches take at most the time allowed at the GEMM's rate; each
// refusal says which. (gpt2-124m in fp32 passed the old guard, 16 Psi against a GPU's
// memory, with 23 GiB of activations, and would have run for tens of minutes.)
#include "planner/plan_calibrate.h"

#include <gtest/gtest.h>

#include <string>

namespace zdp::launcher {
namespace {

Config gpt(int64_t d_model, int64_t seq, int64_t micro) {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = 2, c.model.d_model = d_model, c.model.n_heads = 4, c.model.vocab_size = 256;
  c.model.seq_len = seq, c.model.dtype = DType::kF32;
  c.train.micro_batch = micro;
  return c;
}

TEST(PlanCalibrate, TheModelIsTimedOnlyWhereThatIsSoundAndShort) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  const Config small = gpt(64, 32, 4);
  EXPECT_EQ(model_timing_refusal(small, 16 * kGiB, 20e9, 10), "");
  Config bf16 = small;
  bf16.model.dtype = DType::kBF16;
  EXPECT_EQ(model_timing_refusal(bf16, 16 * kGiB, 20e9, 10), "model.dtype = \"bf16\" computes on GPUs only");
  // Its states and activations over a quarter of the memory (here 1 MiB).
  EXPECT_NE(model_timing_refusal(small, int64_t{1} << 20, 20e9, 10).find("exceed a quarter of this machine's memory"),
            std::string::npos);
  // Longer than allowed at the GEMM's rate: 1 FLOP/s makes anything too long.
  EXPECT_NE(model_timing_refusal(small, 16 * kGiB, 1, 10).find("its 5 micro-batches would take about"),
            std::string::npos);
}

}  // namespace
}  // namespace zdp::launcher
