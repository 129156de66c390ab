// In builds without CUDA every CUDA entry point of kernels/ exists and answers kUnavailable
// with a message saying why, so engine code compiles once and fails clearly.
#include <gtest/gtest.h>

#include "kernels/adamw.h"
#include "kernels/cast.h"
#include "kernels/gemm.h"
#include "kernels/grad_check.h"
#include "kernels/sgd.h"
#include "zdp/build_config.h"

namespace zdp::kernels {
namespace {

TEST(KernelsWithoutCuda, CudaEntryPointsAreUnavailable) {
  if (ZDP_HAVE_CUDA) GTEST_SKIP() << "this build has CUDA (tests/gpu/ covers the launchers)";
  const Status st = adamw_update_cuda(AdamWArgs{}, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("ZDP_CUDA=ON"), std::string::npos) << st.message();
  EXPECT_EQ(sgd_update_cuda(SgdArgs{}, nullptr).code(), StatusCode::kUnavailable);
  EXPECT_EQ(cast_cuda(CastArgs{}, nullptr).code(), StatusCode::kUnavailable);
  EXPECT_EQ(scale_cuda(ScaleArgs{}, nullptr).code(), StatusCode::kUnavailable);
  EXPECT_EQ(grad_check_cuda(GradCheckArgs{}, nullptr, 0, nullptr).code(), StatusCode::kUnavailable);
  EXPECT_EQ(make_cublaslt_gemm(nullptr, 0).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace zdp::kernels
