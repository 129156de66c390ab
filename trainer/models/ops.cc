// Ops: GEMM-based linear layers and the dispatch of each fused kernel to its CPU or CUDA launcher.
#include "trainer/models/ops.h"

#include <chrono>
#include <string>

#include "kernels/bias_grad.h"
#include "zdp/log.h"

namespace zdp::trainer {

using kernels::Epilogue;
using kernels::GemmArgs;
using kernels::Transpose;

// Every fused kernel has the same two launchers; this picks one.
#define ZDP_OPS_DISPATCH(name, args) \
  return on_gpu() ? kernels::name##_cuda(args, cuda_stream()) : kernels::name##_cpu(args)

StatusOr<std::unique_ptr<Ops>> Ops::create(Device& device, DType dtype, bool deterministic, AttentionImpl attention) {
  std::unique_ptr<Ops> ops(new Ops(device, dtype, deterministic, attention));
  if (device.kind() == DeviceKind::kCpu) {
    if (dtype != DType::kF32) {
      return Status(StatusCode::kInvalidArgument, std::string("model.dtype = \"") + to_string(dtype) +
                                                      "\" needs a GPU: the CPU GEMM (OpenBLAS) computes in fp32; "
                                                      "use model.dtype = \"fp32\" on the CPU");
    }
    ops->gemm_ = kernels::make_cpu_gemm();
    // OpenBLAS 0.3.21 splits some shapes' sums by its thread count (docs/design.md,
    // deterministic mode: 748 of 1356 shapes differ at 1 vs 2 threads), and dp-launch
    // gives each rank cores / K threads: one thread makes a GEMM's bits the same at any K.
    if (deterministic) kernels::set_cpu_gemm_threads(1);
  } else {
    ZDP_ASSIGN_OR_RETURN(ops->gemm_workspace_,
                         device.allocate(kernels::kGemmWorkspaceBytes, MemCategory::kWorkspace));
    ZDP_ASSIGN_OR_RETURN(ops->gemm_, kernels::make_cublaslt_gemm(ops->gemm_workspace_.data(), kernels::kGemmWorkspaceBytes,
                                                                   deterministic));
  }
  return ops;
}

std::string Ops::arithmetic_libraries(bool fused_attention) const {
  if (!on_gpu()) return kernels::cpu_gemm_library();
  // "cuda:3 (NVIDIA H200)": the model, without the index that differs by rank.
  const std::string& name = device_.name();
  const size_t open = name.find('(');
  std::string text = open == std::string::npos ? name : name.substr(open + 1, name.size() - open - 2);
  text += ", " + kernels::gpu_gemm_library();
  if (fused_attention) {
    if (const std::string cudnn = kernels::cudnn_library_version(); !cudnn.empty()) text += ", " + cudnn;
  }
  return text;
}

StatusOr<DeviceBuffer> Ops::alloc(int64_t count, DType dtype) {
  return alloc_bytes(count * static_cast<int64_t>(dtype_size(dtype)));
}

StatusOr<DeviceBuffer> Ops::alloc_bytes(int64_t bytes) {
  return device_.allocate(allocation_bytes(bytes), MemCategory::kOther);
}

Status Ops::upload(void* dst, const void* src, size_t bytes) {
  if (!on_gpu()) return device_.memcpy(dst, src, bytes);
  if (!stream_) return Status(StatusCode::kInternal, "Ops: no stream set");
  if (!uploads_) uploads_ = std::make_unique<UploadRing>(device_);
  return uploads_->upload(*stream_, dst, src, bytes);
}

Status Ops::loss_sum(const float* losses, int64_t count, LossSumArgs sink) {
  sink.losses = losses;
  sink.count = count;
  return on_gpu() ? kernels::loss_sum_cuda(sink, cuda_stream()) : kernels::loss_sum_cpu(sink);
}

StatusOr<double> Ops::mean_loss(const float* losses, int64_t count) {
  std::vector<float> host(static_cast<size_t>(count));
  ZDP_RETURN_IF_ERROR(download(host.data(), losses, host.size() * sizeof(float)));
  double sum = 0;
  for (float v : host) sum += v;  // index order: what dp-train's losses have always been
  return sum / static_cast<double>(count);
}

Status Ops::download(void* dst, const void* src, size_t bytes) {
  if (!on_gpu()) return device_.memcpy(dst, src, bytes);
  if (!stream_) return Status(StatusCode::kInternal, "Ops: no stream set");
  ZDP_RETURN_IF_ERROR(stream_->memcpy_async(dst, src, bytes));
  return stream_->synchronize(host_wait_);
}

// A grown buffer replaces one that work already queued on the stream may still read: wait
// for that work (bounded) before freeing it, rather than count on cudaFree's implicit
// device-wide wait, which has no deadline and may not happen at all. Buffers grow only at
// the first use of a larger shape, never in a steady-state step.
Status Ops::release_after_queued_work(DeviceBuffer& old) {
  if (on_gpu() && !old.empty() && stream_) ZDP_RETURN_IF_ERROR(stream_->synchronize(host_wait_));
  old.reset();  // before the new one: the peak stays the larger
  return Status::Ok();
}

StatusOr<const void*> Ops::ones(int64_t rows) {
  if (rows > ones_rows_) {
    ZDP_RETURN_IF_ERROR(release_after_queued_work(ones_));
    ones_rows_ = 0;
    ZDP_ASSIGN_OR_RETURN(ones_, alloc(rows, dtype_));
    std::vector<uint16_t> half(static_cast<size_t>(rows));
    std::vector<float> full(static_cast<size_t>(rows), 1.0f);
    const void* src = full.data();
    if (dtype_ != DType::kF32) {  // 1.0 in bf16 is 0x3f80, in fp16 0x3c00
      half.assign(half.size(), dtype_ == DType::kBF16 ? 0x3f80 : 0x3c00);
      src = half.data();
    }
    ZDP_RETURN_IF_ERROR(device_.memcpy(ones_.data(), src, static_cast<size_t>(rows) * elem_bytes()));
    ones_rows_ = rows;
  }
  return static_cast<const void*>(ones_.data());
}

StatusOr<float*> Ops::scratch(int64_t floats) {
  if (floats > scratch_floats_) {
    ZDP_RETURN_IF_ERROR(release_after_queued_work(scratch_));
    scratch_floats_ = 0;
    ZDP_ASSIGN_OR_RETURN(scratch_, alloc(floats, DType::kF32));
    scratch_floats_ = floats;
  }
  return static_cast<float*>(scratch_.data());
}

StatusOr<std::string> Ops::fused_refusal(const kernels::FusedAttentionShape& s) {
  if (!on_gpu()) return std::string("the device is the CPU (fused attention is cuDNN's, on GPUs)");
  if (s.dtype == DType::kF32) return std::string("model.dtype is \"fp32\" (cuDNN's fused attention is bf16/fp16)");
  if (!kernels::fused_attention_built()) {
    return std::string("this zdp build has no cuDNN fused attention (see the configure output)");
  }
  if (!fused_) {
    StatusOr<std::unique_ptr<kernels::FusedAttention>> made = kernels::make_cudnn_attention(deterministic_);
    // kUnavailable: no libcudnn on this machine (a refusal); another code is an error.
    if (!made.ok() && made.status().code() == StatusCode::kUnavailable) return made.status().message();
    if (!made.ok()) return made.status();
    fused_ = std::move(*made);
  }
  StatusOr<int64_t> bytes = fused_->prepare(s);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kUnavailable) return "cuDNN refused it: " + bytes.status().message();
    return bytes.status();
  }
  if (*bytes > attention_workspace_bytes_) {
    ZDP_RETURN_IF_ERROR(release_after_queued_work(attention_workspace_));
    attention_workspace_bytes_ = 0;
    ZDP_ASSIGN_OR_RETURN(attention_workspace_, device_.allocate(*bytes, MemCategory::kWorkspace));
    attention_workspace_bytes_ = *bytes;
  }
  return std::string();
}

StatusOr<bool> Ops::use_fused_attention(const kernels::FusedAttentionShape& s) {
  if (attention_ == AttentionImpl::kBatched) return false;
  const auto key = std::make_tuple(s.batch, s.seq, s.heads, s.head_dim, static_cast<int>(s.dtype));
  auto it = fused_shapes_.find(key);
  if (it != fused_shapes_.end()) return it->second;
  ZDP_ASSIGN_OR_RETURN(const std::string refusal, fused_refusal(s));
  if (!refusal.empty()) {
    if (attention_ == AttentionImpl::kFused) {
      return Status(StatusCode::kInvalidArgument,
                    "model.attention = \"fused\" cannot run " + kernels::describe(s) + ": " + refusal);
    }
    // Expected on CPUs and in fp32: said once at debug level; a GPU's refusal is news.
    const bool expected = !on_gpu() || s.dtype == DType::kF32 || !kernels::fused_attention_built();
    if (expected) {
      ZDP_LOG(kDebug) << "attention: " << kernels::describe(s) << " runs as batched GEMMs: " << refusal;
    } else {
      ZDP_LOG(kWarn) << "attention: " << kernels::describe(s) << " runs as batched GEMMs: " << refusal;
    }
  } else {
    ZDP_LOG(kInfo) << "attention: " << kernels::describe(s) << " runs fused (cuDNN), workspace "
                   << attention_workspace_bytes_ << " bytes";
  }
  return fused_shapes_[key] = refusal.empty();
}

Status Ops::fused_attention(const kernels::FusedAttentionArgs& a) {
  if (!fused_) return Status(StatusCode::kInternal, "Ops::fused_attention before use_fused_attention");
  return fused_->forward(a, attention_workspace_.data(), attention_workspace_bytes_, cuda_stream());
}

Status Ops::fused_attention_backward(const kernels::FusedAttentionBackwardArgs& a) {
  if (!fused_) return Status(StatusCode::kInternal, "Ops::fused_attention_backward before use_fused_attention");
  return fused_->backward(a, attention_workspace_.data(), attention_workspace_bytes_, cuda_stream());
}

Status Ops::gemm_to(GemmArgs a, DType c_dtype) {
  a.ab_dtype = dtype_;
  a.c_dtype = c_dtype;
  return gemm_->run(a, cuda_stream());
}

Status Ops::weight_grad(const void* x, const void* dy, void* dw, DType dw_dtype, int64_t rows, int64_t in, int64_t out) {
  GemmArgs g;  // dW^T-as-stored (in x out) = x^T (in x rows) * dy (rows x out)
  g.b.trans = Transpose::kYes;
  g.m = in, g.n = out, g.k = rows;
  g.a.data = x, g.a.ld = in;
  g.b.data = dy, g.b.ld = out;
  g.c.data = dw, g.c.ld = in;
  return gemm_to(g, dw_dtype);
}

Status Ops::linear(const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t in, int64_t out,
                   const void* residual) {
  GemmArgs g;
  g.a.trans = Transpose::kYes;
  g.m = out, g.n = rows, g.k = in;
  g.a.data = w, g.a.ld = in;
  g.b.data = x, g.b.ld = in;
  g.c.data = y, g.c.ld = out;
  g.epilogue = b ? Epilogue::kBias : Epilogue::kNone;
  g.bias = b;
  if (residual != nullptr) g.c_in = residual, g.beta = 1.0f;
  return gemm(g);
}

Status Ops::linear_backward(const void* x, const void* w, const void* dy, void* dx, kernels::OutputMode dx_mode,
                            void* dw, void* db, int64_t rows, int64_t in, int64_t out) {
  if (dx != nullptr) {  // dx^T (in x rows) = W^T-as-stored (in x out) * dy^T (out x rows)
    GemmArgs g;
    g.m = in, g.n = rows, g.k = out;
    g.a.data = w, g.a.ld = in;
    g.b.data = dy, g.b.ld = out;
    g.c.data = dx, g.c.ld = in;
    g.beta = dx_mode == kernels::OutputMode::kAccumulate ? 1.0f : 0.0f;
    ZDP_RETURN_IF_ERROR(gemm(g));
  }
  if (dw != nullptr) ZDP_RETURN_IF_ERROR(weight_grad(x, dy, dw, dtype_, rows, in, out));
  if (db == nullptr) return Status::Ok();
  return bias_grad(dy, db, rows, out);
}

Status Ops::bias_grad(const void* dy, void* db, int64_t rows, int64_t out) {
  if (on_gpu()) {  // kernels/bias_grad.h says why not a GEMM (nor cuBLASLt's bias-gradient epilogues)
    kernels::BiasGradArgs a{rows, out, dtype_, dy, db, nullptr};
    const int64_t floats = kernels::bias_grad_partials_floats(rows, out);
    if (floats > 0) {
      ZDP_ASSIGN_OR_RETURN(a.partials, scratch(floats));
    }
    return kernels::bias_grad_cuda(a, cuda_stream());
  }
  ZDP_ASSIGN_OR_RETURN(const void* one, ones(rows));
  GemmArgs g;  // db (out x 1) = dy^T (out x rows) * ones (rows x 1)
  g.m = out, g.n = 1, g.k = rows;
  g.a.data = dy, g.a.ld = out;
  g.b.data = one, g.b.ld = rows;
  g.c.data = db, g.c.ld = out;
  return gemm(g);
}

StatusOr<bool> Ops::try_fused(const GemmArgs& g) {
  // Remembered per epilogue and shape: one shape without an algorithm (at an alignment,
  // say) leaves the others fused.
  const auto key = std::make_tuple(static_cast<int>(g.epilogue), g.m, g.n, g.k);
  if (unfused_.count(key) > 0) return false;
  const Status st = gemm(g);
  if (st.ok()) return true;
  // No algorithm, or an epilogue this cuBLASLt refuses: found while planning, before
  // anything was enqueued (kUnavailable, gemm_cublaslt.cc). The unfused ops from now on
  // for this shape, said once. A failed matmul (kCublasError: an earlier kernel's fault,
  // say) is returned: taken for a refusal, it was logged as "epilogue unavailable".
  if (st.code() != StatusCode::kUnavailable) return st;
  unfused_.insert(key);
  ZDP_LOG(kWarn) << "fused GEMM epilogue " << kernels::to_string(g.epilogue) << " unavailable for " << g.m << " x "
                 << g.n << " x " << g.k << ", using separate kernels: " << st.to_string();
  return false;
}

Status Ops::linear_gelu(const void* x, const void* w, const void* b, void* pre, void* y, int64_t rows, int64_t in,
                        int64_t out) {
  if (on_gpu() && b != nullptr && out % 8 == 0) {  // aux's leading dimension: a multiple of 8
    GemmArgs g;
    g.a.trans = Transpose::kYes;
    g.m = out, g.n = rows, g.k = in;
    g.a.data = w, g.a.ld = in;
    g.b.data = x, g.b.ld = in;
    g.c.data = y, g.c.ld = out;
    g.epilogue = Epilogue::kBiasGeluAux;
    g.bias = b;
    g.aux = pre, g.aux_ld = out;
    ZDP_ASSIGN_OR_RETURN(const bool fused, try_fused(g));
    if (fused) return Status::Ok();
  }
  ZDP_RETURN_IF_ERROR(linear(x, w, b, pre, rows, in, out));
  return gelu(pre, y, rows * out);
}

Status Ops::linear_backward_gelu(const void* x, const void* w, const void* dy, const void* pre, void* dpre,
                                 void* dpre_bias, void* dw, void* db, int64_t rows, int64_t in, int64_t out) {
  ZDP_RETURN_IF_ERROR(input_grad_through_gelu(w, dy, pre, dpre, rows, in, out));
  ZDP_RETURN_IF_ERROR(linear_backward(x, w, dy, nullptr, kernels::OutputMode::kOverwrite, dw, db, rows, in, out));
  return bias_grad(dpre, dpre_bias, rows, in);
}

Status Ops::input_grad_through_gelu(const void* w, const void* dy, const void* pre, void* dpre, int64_t rows,
                                    int64_t in, int64_t out) {
  GemmArgs g;  // dpre^T (in x rows) = W^T-as-stored (in x out) * dy^T (out x rows), then * gelu'(pre^T)
  g.m = in, g.n = rows, g.k = out;
  g.a.data = w, g.a.ld = in;
  g.b.data = dy, g.b.ld = out;
  g.c.data = dpre, g.c.ld = in;
  auto separate = [&]() -> Status {
    ZDP_RETURN_IF_ERROR(gemm(g));
    return gelu_backward(pre, dpre, dpre, rows * in);
  };
  GemmArgs f = g;
  f.epilogue = Epilogue::kDGelu;
  f.aux = const_cast<void*>(pre), f.aux_ld = in;  // read only (kDGelu)
  auto fused = [&]() { return gemm(f); };
  if (!on_gpu() || deterministic_ || in % 8 != 0) return separate();
  const auto key = std::make_tuple(rows, in, out);
  auto known = dgelu_fused_.find(key);
  if (known == dgelu_fused_.end()) {
    // First use of the shape: both ways write dpre from the same inputs, so each can run
    // a few times and the faster one stays. Their bits differ (the separate path rounds
    // the GEMM's output to the compute dtype before GELU's derivative; the epilogue rounds
    // once, with cuBLASLt's own derivative), so outside deterministic mode (which always
    // takes the separate path, above) two runs, or two ranks, may differ by that rounding.
    ZDP_ASSIGN_OR_RETURN(const bool available, try_fused(f));  // also makes its plan
    bool use_fused = false;
    if (available) {
      ZDP_RETURN_IF_ERROR(separate());  // makes the plain GEMM's plan
      ZDP_ASSIGN_OR_RETURN(const double t_separate, seconds_per_run(separate));
      ZDP_ASSIGN_OR_RETURN(const double t_fused, seconds_per_run(fused));
      use_fused = t_fused < t_separate;
      ZDP_LOG(kInfo) << "GELU backward at " << rows << " x " << in << " (from " << out << "): "
                     << (use_fused ? "cuBLASLt's DGELU epilogue" : "the GEMM, then GELU's kernel") << " ("
                     << t_fused * 1e3 << " ms fused, " << t_separate * 1e3 << " ms separate, timed at first use)";
    }
    known = dgelu_fused_.emplace(key, use_fused).first;
  }
  if (!known->second) return separate();
  // Through try_fused, not the GEMM alone: the choice was made at the first call's pointer
  // alignment, and another layer's weight (parameters lie back to back at stages 0-1) may
  // have no DGELU algorithm; that shape then takes the separate path, as at the first call.
  ZDP_ASSIGN_OR_RETURN(const bool ran, try_fused(f));
  return ran ? Status::Ok() : separate();
}

bool Ops::chose_dgelu_epilogue() const {
  for (const auto& [shape, fused] : dgelu_fused_) {
    if (fused) return true;
  }
  return false;
}

StatusOr<double> Ops::seconds_per_run(const std::function<Status()>& run) {
  if (stream_ == nullptr) return Status(StatusCode::kInternal, "Ops: timing without a stream (set_stream first)");
  constexpr int kRuns = 5;
  ZDP_RETURN_IF_ERROR(stream_->synchronize(host_wait_));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRuns; ++i) ZDP_RETURN_IF_ERROR(run());
  ZDP_RETURN_IF_ERROR(stream_->synchronize(host_wait_));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRuns;
}

Status Ops::gelu(const void* x, void* y, int64_t count) {
  ZDP_OPS_DISPATCH(gelu_forward, (kernels::GeluArgs{count, dtype_, x, nullptr, y}));
}
Status Ops::gelu_backward(const void* x, const void* dy, void* dx, int64_t count) {
  ZDP_OPS_DISPATCH(gelu_backward, (kernels::GeluArgs{count, dtype_, x, dy, dx}));
}
Status Ops::layernorm(const kernels::LayerNormArgs& a) { ZDP_OPS_DISPATCH(layernorm_forward, a); }
Status Ops::layernorm_backward(kernels::LayerNormBackwardArgs a) {
  const int64_t floats = kernels::layernorm_partials_floats(a.rows, a.cols);
  if (on_gpu() && a.partials == nullptr && floats > 0) {
    ZDP_ASSIGN_OR_RETURN(a.partials, scratch(floats));
  }
  ZDP_OPS_DISPATCH(layernorm_backward, a);
}
Status Ops::causal_softmax(const kernels::CausalSoftmaxArgs& a) { ZDP_OPS_DISPATCH(causal_softmax_forward, a); }
Status Ops::causal_softmax_backward(const kernels::CausalSoftmaxBackwardArgs& a) {
  ZDP_OPS_DISPATCH(causal_softmax_backward, a);
}
Status Ops::cross_entropy(const kernels::CrossEntropyArgs& a) { ZDP_OPS_DISPATCH(cross_entropy, a); }
Status Ops::squared_error(const kernels::SquaredErrorArgs& a) { ZDP_OPS_DISPATCH(squared_error, a); }
Status Ops::embedding(const kernels::EmbeddingArgs& a) { ZDP_OPS_DISPATCH(embedding_forward, a); }
Status Ops::embedding_backward(const kernels::EmbeddingBackwardArgs& a) { ZDP_OPS_DISPATCH(embedding_backward, a); }

#undef ZDP_OPS_DISPATCH

}  // namespace zdp::trainer
