// In builds without CUDA every CUDA entry point of kernels/ exists and answers kUnavailable
// with a message saying why, so engine code compiles once and fails clearly.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/attention_softmax.h"
#include "kernels/cast.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/fold.h"
#include "kernels/fused_attention.h"
#include "kernels/gemm.h"
#include "kernels/grad_check.h"
#include "kernels/quantize.h"
#include "kernels/layernorm.h"
#include "kernels/sgd.h"
#include "zdp/build_config.h"

namespace zdp::kernels {
namespace {

TEST(KernelsWithoutCuda, CudaEntryPointsAreUnavailable) {
  if (ZDP_HAVE_CUDA) GTEST_SKIP() << "this build has CUDA: scripts/test.sh runs this test in a second build without it";
  const Status st = adamw_update_cuda(AdamWArgs{}, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("ZDP_CUDA=ON"), std::string::npos) << st.message();
  EXPECT_EQ(sgd_update_cuda(SgdArgs{}, nullptr).code(), StatusCode::kUnavailable);
  EXPECT_EQ(cast_cuda(CastArgs{}, nullptr).code(), StatusCode::kUnavailable);
  EXPECT_EQ(quantize_cuda(QuantizeArgs{}, nullptr).code(), StatusCode::kUnavailable);
  EXPECT_EQ(dequant_sum_cuda(DequantSumArgs{}, nullptr).code(), StatusCode::kUnavailable);
  EXPECT_EQ(dequantize_cuda(DequantizeArgs{}, nullptr).code(), StatusCode::kUnavailable);
  EXPECT_EQ(scale_cuda(ScaleArgs{}, nullptr).code(), StatusCode::kUnavailable);
  EXPECT_EQ(grad_check_cuda(GradCheckArgs{}, nullptr, 0, nullptr).code(), StatusCode::kUnavailable);
  EXPECT_EQ(make_cublaslt_gemm(nullptr, 0).status().code(), StatusCode::kUnavailable);
  // Arithmetic, the same as in a CUDA build: 256 chunk partials, one fold, 16 bytes.
  EXPECT_EQ(grad_check_workspace_bytes(1 << 20), 8 * (256 + 1) + 16);
  EXPECT_EQ(fold_cuda(FoldArgs{}, nullptr).code(), StatusCode::kUnavailable);
}

// dp-train's layer kernels: each names itself and says why.
TEST(KernelsWithoutCuda, LayerKernelsAreUnavailableNamingThemselves) {
  if (ZDP_HAVE_CUDA) GTEST_SKIP() << "this build has CUDA: scripts/test.sh runs this test in a second build without it";
  const std::vector<std::pair<const char*, Status>> calls = {
      {"layernorm_forward_cuda", layernorm_forward_cuda(LayerNormArgs{}, nullptr)},
      {"layernorm_backward_cuda", layernorm_backward_cuda(LayerNormBackwardArgs{}, nullptr)},
      {"add_cuda", add_cuda(AddArgs{}, nullptr)},
      {"gelu_forward_cuda", gelu_forward_cuda(GeluArgs{}, nullptr)},
      {"gelu_backward_cuda", gelu_backward_cuda(GeluArgs{}, nullptr)},
      {"squared_error_cuda", squared_error_cuda(SquaredErrorArgs{}, nullptr)},
      {"causal_softmax_forward_cuda", causal_softmax_forward_cuda(CausalSoftmaxArgs{}, nullptr)},
      {"causal_softmax_backward_cuda", causal_softmax_backward_cuda(CausalSoftmaxBackwardArgs{}, nullptr)},
      {"cross_entropy_cuda", cross_entropy_cuda(CrossEntropyArgs{}, nullptr)},
      {"embedding_forward_cuda", embedding_forward_cuda(EmbeddingArgs{}, nullptr)},
      {"embedding_backward_cuda", embedding_backward_cuda(EmbeddingBackwardArgs{}, nullptr)},
  };
  for (const auto& [name, st] : calls) {
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << name;
    EXPECT_EQ(st.message(), std::string(name) + ": this zdp build has no CUDA (configure with ZDP_CUDA=ON)");
  }
}

// Fused attention: not built, and asking for it says why (dp-train's "auto" then runs
// attention batched; "fused" stops with this message).
TEST(KernelsWithoutCuda, FusedAttentionIsUnavailable) {
  if (ZDP_HAVE_CUDA) GTEST_SKIP() << "this build has CUDA: scripts/test.sh runs this test in a second build without it";
  EXPECT_FALSE(fused_attention_built());
  const StatusOr<std::unique_ptr<FusedAttention>> made = make_cudnn_attention(false);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(made.status().message(), "fused attention: this zdp build has no CUDA (configure with ZDP_CUDA=ON)");
  // The shape check is the same in every build.
  EXPECT_TRUE(check_fused_attention_shape({2, 64, 3, 64, DType::kBF16}).ok());
  EXPECT_EQ(check_fused_attention_shape({2, 64, 3, 64, DType::kF32}).message(),
            "fused attention fp32 batch 2 x seq 64 x 3 heads x hd 64: bf16 or fp16 only (cuDNN has no fp32 fused attention)");
  EXPECT_EQ(check_fused_attention_shape({2, 0, 3, 64, DType::kBF16}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zdp::kernels
