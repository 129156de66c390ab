// cuDNN's fused attention on the emulated GPU: the contract checked at the call, the
// FlashAttention-2 arithmetic queued on the stream (see the header).
#include "testing/simt/cudnn_attention_emulation.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "testing/simt/emulated_gpu_device.h"

namespace zdp::kernels {
namespace {

std::atomic<int64_t> g_forward_runs{0}, g_backward_runs{0};

constexpr int64_t kKeyTile = 8;    // keys per dQ partial sum (the order of their adds varies)
constexpr uintptr_t kAlign = 16;   // bytes: every tensor's address and row stride

// A tensor as the checks see it: its bytes, and its row stride where it has rows.
struct Range {
  const char* name;
  const void* p;
  int64_t bytes;
  int64_t row_elements = 0;  // between consecutive tokens (0: packed, no rows)
};

// A [batch, heads, seq, hd] view of a row-major [batch x seq, row] buffer of 16-bit values.
struct View {
  const FusedAttentionShape* s;
  char* base;
  int64_t row;  // elements between consecutive tokens
  int64_t at(int64_t b, int64_t h, int64_t t, int64_t c) const { return (b * s->seq + t) * row + h * s->head_dim + c; }
  // The bytes from the first element to one past the last.
  int64_t extent_bytes() const { return ((s->batch * s->seq - 1) * row + s->heads * s->head_dim) * 2; }
  Range range(const char* name) const { return {name, base, extent_bytes(), row}; }
  float get(int64_t i) const {
    uint16_t h;
    std::memcpy(&h, base + 2 * i, 2);
    return s->dtype == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
  void put(int64_t i, float v) const {
    const uint16_t h = s->dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
    std::memcpy(base + 2 * i, &h, 2);
  }
};

float round_io(DType t, float v) { return t == DType::kF16 ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v)); }

bool overlap(const Range& a, const Range& b) {
  const auto x = reinterpret_cast<uintptr_t>(a.p), y = reinterpret_cast<uintptr_t>(b.p);
  return x < y + static_cast<uintptr_t>(b.bytes) && y < x + static_cast<uintptr_t>(a.bytes);
}

// The checks at the call: each tensor in one allocation of an emulated device, it and its
// rows aligned; no output sharing bytes with an input, nor the workspace with anything.
Status check_tensors(const std::string& what, const std::vector<Range>& inputs, const std::vector<Range>& outputs,
                     const Range& workspace) {
  std::vector<Range> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  for (const Range& r : all) {
    if (!testing::in_emulated_allocation(r.p, static_cast<size_t>(r.bytes))) {
      return Status(StatusCode::kInternal, what + ": " + r.name + " (" + std::to_string(r.bytes) +
                                               " bytes) is not inside one allocation of the emulated GPU");
    }
    if (reinterpret_cast<uintptr_t>(r.p) % kAlign != 0 || (r.row_elements * 2) % static_cast<int64_t>(kAlign) != 0) {
      return Status(StatusCode::kInternal, what + ": " + r.name + " or its row stride is not 16-byte aligned");
    }
  }
  for (const Range& o : outputs) {
    for (const Range& in : inputs) {
      if (overlap(o, in)) return Status(StatusCode::kInternal, what + ": output " + o.name + " shares memory with input " + in.name);
    }
  }
  if (workspace.bytes > 0) {
    if (!testing::in_emulated_allocation(workspace.p, static_cast<size_t>(workspace.bytes)) ||
        reinterpret_cast<uintptr_t>(workspace.p) % kAlign != 0) {
      return Status(StatusCode::kInternal, what + ": the workspace is not an aligned range of one allocation");
    }
    for (const Range& r : all) {
      if (overlap(workspace, r)) return Status(StatusCode::kInternal, what + ": the workspace shares memory with " + r.name);
    }
  }
  return Status::Ok();
}

// The scaled, masked scores of query i (keys 0..i) in fp32.
void scores(const View& q, const View& k, int64_t b, int64_t h, int64_t i, float scale, std::vector<float>* out) {
  const int64_t hd = q.s->head_dim;
  out->assign(static_cast<size_t>(i + 1), 0.0f);
  for (int64_t j = 0; j <= i; ++j) {
    double dot = 0;
    for (int64_t c = 0; c < hd; ++c) dot += static_cast<double>(q.get(q.at(b, h, i, c))) * k.get(k.at(b, h, j, c));
    (*out)[static_cast<size_t>(j)] = static_cast<float>(dot) * scale;
  }
}

void run_forward(const FusedAttentionShape& s, float scale, View q, View k, View v, View o, float* stats) {
  std::vector<float> sc;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        scores(q, k, b, h, i, scale, &sc);
        const float m = *std::max_element(sc.begin(), sc.end());
        double sum = 0;
        std::vector<float> p(sc.size());
        for (size_t j = 0; j < sc.size(); ++j) {
          const float e = std::exp(sc[j] - m);
          sum += e;
          p[j] = round_io(s.dtype, e);  // P V takes the 16-bit probabilities
        }
        const float l = static_cast<float>(sum);
        stats[(b * s.heads + h) * s.seq + i] = m + std::log(l);
        for (int64_t c = 0; c < s.head_dim; ++c) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += static_cast<double>(p[static_cast<size_t>(j)]) * v.get(v.at(b, h, j, c));
          o.put(o.at(b, h, i, c), static_cast<float>(acc) / l);
        }
      }
    }
  }
}

struct BackwardViews {
  View q, k, v, o, dout, dq, dk, dv;
};

void run_backward(const FusedAttentionShape& s, float scale, const BackwardViews& t, const float* stats, char* workspace,
                  bool deterministic, int64_t call) {
  const int64_t S = s.seq, hd = s.head_dim, bh = s.batch * s.heads;
  const int64_t padded = (S + 63) / 64 * 64;
  float* dot_do_o = reinterpret_cast<float*>(workspace);  // D, [batch, heads, seq]
  float* dq_acc = dot_do_o + bh * S;                      // default: [batch, heads, seq, hd] fp32
  char* ds_scratch = workspace + bh * S * 4;              // deterministic: [batch, heads, padded, padded] 16-bit
  std::vector<float> sc, p(static_cast<size_t>(S * S)), ds(static_cast<size_t>(S * S));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t bhi = b * s.heads + h;
      for (int64_t i = 0; i < S; ++i) {
        double acc = 0;
        for (int64_t c = 0; c < hd; ++c) acc += static_cast<double>(t.dout.get(t.dout.at(b, h, i, c))) * t.o.get(t.o.at(b, h, i, c));
        dot_do_o[bhi * S + i] = static_cast<float>(acc);
      }
      // P and dS of every unmasked (query i, key j), in fp32.
      for (int64_t i = 0; i < S; ++i) {
        scores(t.q, t.k, b, h, i, scale, &sc);
        for (int64_t j = 0; j <= i; ++j) {
          const float pij = std::exp(sc[static_cast<size_t>(j)] - stats[bhi * S + i]);
          double dp = 0;
          for (int64_t c = 0; c < hd; ++c) dp += static_cast<double>(t.dout.get(t.dout.at(b, h, i, c))) * t.v.get(t.v.at(b, h, j, c));
          p[static_cast<size_t>(i * S + j)] = pij;
          ds[static_cast<size_t>(i * S + j)] = pij * (static_cast<float>(dp) - dot_do_o[bhi * S + i]);
        }
      }
      // dV and dK per key, over the queries that see it, in query order (one block a key tile).
      for (int64_t j = 0; j < S; ++j) {
        for (int64_t c = 0; c < hd; ++c) {
          double av = 0, ak = 0;
          for (int64_t i = j; i < S; ++i) {
            av += static_cast<double>(round_io(s.dtype, p[static_cast<size_t>(i * S + j)])) * t.dout.get(t.dout.at(b, h, i, c));
            ak += static_cast<double>(round_io(s.dtype, ds[static_cast<size_t>(i * S + j)])) * t.q.get(t.q.at(b, h, i, c));
          }
          t.dv.put(t.dv.at(b, h, j, c), static_cast<float>(av));
          t.dk.put(t.dk.at(b, h, j, c), static_cast<float>(ak) * scale);
        }
      }
      // dQ through the workspace.
      for (int64_t i = 0; i < S; ++i) {
        for (int64_t c = 0; c < hd; ++c) {
          float total = 0;
          if (deterministic) {
            View scratch{&s, ds_scratch, padded};  // row i of this (b, h)'s padded x padded block
            const int64_t row0 = (bhi * padded + i) * padded;
            double acc = 0;
            for (int64_t j = 0; j <= i; ++j) {
              if (c == 0) scratch.put(row0 + j, ds[static_cast<size_t>(i * S + j)]);
              acc += static_cast<double>(scratch.get(row0 + j)) * t.k.get(t.k.at(b, h, j, c));
            }
            total = static_cast<float>(acc);
          } else {
            float& a = dq_acc[(bhi * S + i) * hd + c];
            a = 0;
            const int64_t tiles = i / kKeyTile + 1;
            for (int64_t u = 0; u < tiles; ++u) {
              const int64_t tile = (call + i + u) % tiles;  // the adds' order: another each call
              float partial = 0;
              for (int64_t j = tile * kKeyTile; j <= std::min(i, tile * kKeyTile + kKeyTile - 1); ++j) {
                partial += round_io(s.dtype, ds[static_cast<size_t>(i * S + j)]) * t.k.get(t.k.at(b, h, j, c));
              }
              a += partial;
            }
            total = a;
          }
          t.dq.put(t.dq.at(b, h, i, c), total * scale);
        }
      }
    }
  }
}

class EmulatedCudnnAttention final : public FusedAttention {
 public:
  explicit EmulatedCudnnAttention(bool deterministic) : deterministic_(deterministic) {}

  StatusOr<int64_t> prepare(const FusedAttentionShape& s) override {
    ZDP_RETURN_IF_ERROR(check_fused_attention_shape(s));
    if (s.head_dim > 256 || s.head_dim % 8 != 0) {
      return Status(StatusCode::kUnavailable, describe(s) + ": emulated cuDNN (Hopper): the head dim must be at most 256 "
                                                            "and a multiple of 8");
    }
    if (s.seq == 1) return Status(StatusCode::kUnavailable, describe(s) + ": emulated cuDNN: s_q = s_kv = 1 is not supported");
    return fused_attention_workspace_estimate(s, deterministic_);
  }

  Status forward(const FusedAttentionArgs& a, void* workspace, int64_t workspace_bytes, cudaStream_t stream) override {
    const FusedAttentionShape& s = a.shape;
    const std::string what = "emulated cuDNN: " + describe(s) + " forward";
    ZDP_ASSIGN_OR_RETURN(const int64_t need, prepare(s));
    ZDP_RETURN_IF_ERROR(check_workspace(what, need, workspace, workspace_bytes));
    if (!a.qkv || !a.out || !a.stats) return Status(StatusCode::kInvalidArgument, what + ": null buffer");
    const int64_t d = s.heads * s.head_dim;
    char* qkv = const_cast<char*>(static_cast<const char*>(a.qkv));
    const View q{&s, qkv, 3 * d}, k{&s, qkv + 2 * d, 3 * d}, v{&s, qkv + 4 * d, 3 * d}, o{&s, static_cast<char*>(a.out), d};
    const int64_t stats_bytes = s.batch * s.heads * s.seq * 4;
    ZDP_RETURN_IF_ERROR(check_tensors(what, {q.range("Q"), k.range("K"), v.range("V")},
                                      {o.range("O"), {"stats", a.stats, stats_bytes}}, {"workspace", workspace, need}));
    const FusedAttentionShape shape = s;
    const float scale = a.scale;
    float* stats = a.stats;
    ::zdp_emu::submit(stream, [=]() -> std::string {
      // The views point at the shape they were made with: rebuilt on the copy.
      const View rq{&shape, q.base, q.row}, rk{&shape, k.base, k.row}, rv{&shape, v.base, v.row}, ro{&shape, o.base, o.row};
      run_forward(shape, scale, rq, rk, rv, ro, stats);
      ++g_forward_runs;
      return "";
    });
    return Status::Ok();
  }

  Status backward(const FusedAttentionBackwardArgs& a, void* workspace, int64_t workspace_bytes, cudaStream_t stream) override {
    const FusedAttentionShape& s = a.shape;
    const std::string what = "emulated cuDNN: " + describe(s) + " backward";
    ZDP_ASSIGN_OR_RETURN(const int64_t need, prepare(s));
    ZDP_RETURN_IF_ERROR(check_workspace(what, need, workspace, workspace_bytes));
    if (!a.qkv || !a.out || !a.dout || !a.stats || !a.dqkv) return Status(StatusCode::kInvalidArgument, what + ": null buffer");
    const int64_t d = s.heads * s.head_dim;
    char* qkv = const_cast<char*>(static_cast<const char*>(a.qkv));
    char* dqkv = static_cast<char*>(a.dqkv);
    BackwardViews t{{&s, qkv, 3 * d},
                    {&s, qkv + 2 * d, 3 * d},
                    {&s, qkv + 4 * d, 3 * d},
                    {&s, const_cast<char*>(static_cast<const char*>(a.out)), d},
                    {&s, const_cast<char*>(static_cast<const char*>(a.dout)), d},
                    {&s, dqkv, 3 * d},
                    {&s, dqkv + 2 * d, 3 * d},
                    {&s, dqkv + 4 * d, 3 * d}};
    const int64_t stats_bytes = s.batch * s.heads * s.seq * 4;
    // dQ, dK and dV interleave in dqkv: checked as one output, from dQ's first byte to dV's last.
    const int64_t dqkv_bytes = t.dv.extent_bytes() + 4 * d;
    ZDP_RETURN_IF_ERROR(check_tensors(what,
                                      {t.q.range("Q"), t.k.range("K"), t.v.range("V"), t.o.range("O"), t.dout.range("dO"),
                                       {"stats", a.stats, stats_bytes}},
                                      {{"dQ, dK, dV", dqkv, dqkv_bytes, 3 * d}}, {"workspace", workspace, need}));
    const FusedAttentionShape shape = s;
    const float scale = a.scale;
    const float* stats = a.stats;
    char* ws = static_cast<char*>(workspace);
    const bool deterministic = deterministic_;
    const int64_t call = calls_++;
    ::zdp_emu::submit(stream, [=]() -> std::string {
      BackwardViews r = t;
      for (View* v : {&r.q, &r.k, &r.v, &r.o, &r.dout, &r.dq, &r.dk, &r.dv}) v->s = &shape;
      run_backward(shape, scale, r, stats, ws, deterministic, call);
      ++g_backward_runs;
      return "";
    });
    return Status::Ok();
  }

 private:
  static Status check_workspace(const std::string& what, int64_t need, const void* workspace, int64_t bytes) {
    if (need > 0 && (workspace == nullptr || bytes < need)) {
      return Status(StatusCode::kInvalidArgument, what + ": needs " + std::to_string(need) + " bytes of workspace, got " +
                                                      std::to_string(workspace ? bytes : 0));
    }
    return Status::Ok();
  }

  bool deterministic_;
  int64_t calls_ = 0;  // backward calls: the default algorithm's order of dQ's adds
};

}  // namespace

// simt.h renames these two for the emulated sources (make_cudnn_attention_emu,
// fused_attention_built_emu).
StatusOr<std::unique_ptr<FusedAttention>> make_cudnn_attention(bool deterministic) {
  return std::unique_ptr<FusedAttention>(new EmulatedCudnnAttention(deterministic));
}
bool fused_attention_built() { return true; }

}  // namespace zdp::kernels

namespace zdp::testing {

CudnnAttentionRuns cudnn_attention_runs() { return {kernels::g_forward_runs.load(), kernels::g_backward_runs.load()}; }

}  // namespace zdp::testing
