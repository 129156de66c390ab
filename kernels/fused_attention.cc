// What every build has of kernels/fused_attention.h: the shape checks and the build flag.
#include "kernels/fused_attention.h"

#include <limits>

namespace zdp::kernels {

std::string describe(const FusedAttentionShape& s) {
  return std::string("fused attention ") + to_string(s.dtype) + " batch " + std::to_string(s.batch) + " x seq " +
         std::to_string(s.seq) + " x " + std::to_string(s.heads) + " heads x hd " + std::to_string(s.head_dim);
}

Status check_fused_attention_shape(const FusedAttentionShape& s) {
  auto bad = [&](const std::string& why) { return Status(StatusCode::kInvalidArgument, describe(s) + ": " + why); };
  if (s.batch < 1 || s.seq < 1 || s.heads < 1 || s.head_dim < 1) return bad("every dimension must be positive");
  if (s.dtype != DType::kBF16 && s.dtype != DType::kF16) return bad("bf16 or fp16 only (cuDNN has no fp32 fused attention)");
  // The largest tensor (qkv) must be addressable with the int64 strides cuDNN takes and
  // must not overflow here: 2^62 elements is far beyond any GPU.
  const int64_t limit = int64_t{1} << 62;
  if (s.batch > limit / s.seq || s.batch * s.seq > limit / (3 * s.heads) || s.batch * s.seq * 3 * s.heads > limit / s.head_dim) {
    return bad("too many elements");
  }
  return Status::Ok();
}

int64_t fused_attention_workspace_estimate(const FusedAttentionShape& s, bool deterministic) {
  const int64_t bh = s.batch * s.heads;
  const int64_t softmax_sums = bh * s.seq * 4;
  if (!deterministic) return softmax_sums + bh * s.seq * s.head_dim * 4;
  const int64_t padded = (s.seq + 63) / 64 * 64;
  return softmax_sums + bh * padded * padded * 2;
}

// ZDP_HAVE_CUDNN: 0 or 1 from kernels/CMakeLists.txt (this file only).
bool fused_attention_built() { return ZDP_HAVE_CUDNN != 0; }

}  // namespace zdp::kernels
