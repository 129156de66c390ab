// make_cudnn_attention and make_cudnn_attention_plans in builds without the fused path (no
// CUDA, or CUDA without cuDNN or the cudnn-frontend headers at configure time):
// kUnavailable, saying which.
#include "kernels/fused_attention.h"
#include "zdp/build_config.h"

namespace zdp::kernels {

StatusOr<std::unique_ptr<FusedAttentionPlans>> make_cudnn_attention_plans(const FusedAttentionArgs&,
                                                                          const FusedAttentionBackwardArgs&, bool) {
  return make_cudnn_attention(false).status();
}

std::string cudnn_library_version() { return ""; }
void prepare_cudnn_environment() {}

StatusOr<std::unique_ptr<FusedAttention>> make_cudnn_attention(bool) {
  return Status(StatusCode::kUnavailable,
                ZDP_HAVE_CUDA ? "fused attention: this zdp build has no cuDNN fused attention (configure found no "
                                "cuDNN or no cudnn-frontend headers: pip install nvidia-cudnn-frontend, or set "
                                "ZDP_CUDNN_FRONTEND_INCLUDE; the configure output says which)"
                              : "fused attention: this zdp build has no CUDA (configure with ZDP_CUDA=ON)");
}

}  // namespace zdp::kernels
