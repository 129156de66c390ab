// Float64 references for causal attention tests, over the layout trainer/models/attention.h
// documents: qkv [batch x seq, 3 d] row-major, q, k, v of head h at columns h hd, d + h hd,
// 2d + h hd (d = heads x hd).
#pragma once

#include <cstdint>
#include <vector>

namespace zdp::testing {

// Query i's scores over keys 0..i (the causal mask) in head h of sample b, times `scale`.
inline std::vector<double> causal_scores(const std::vector<float>& qkv, int64_t seq, int64_t heads, int64_t hd,
                                         double scale, int64_t b, int64_t h, int64_t i) {
  const int64_t d = heads * hd;
  std::vector<double> out;
  for (int64_t j = 0; j <= i; ++j) {
    double dot = 0;
    for (int64_t c = 0; c < hd; ++c) {
      dot += static_cast<double>(qkv[static_cast<size_t>((b * seq + i) * 3 * d + h * hd + c)]) *
             qkv[static_cast<size_t>((b * seq + j) * 3 * d + d + h * hd + c)];
    }
    out.push_back(dot * scale);
  }
  return out;
}

}  // namespace zdp::testing
