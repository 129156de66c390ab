// kernels/fused_attention.h through cuDNN's fused SDPA (cudnn-frontend graph API). The
// only translation unit that includes cudnn_frontend.h: its ~90 headers take a minute to
// compile, so nothing else should pay for them.
//
// One forward and one backward graph per shape, built once and cached with the workspace
// they need. Q, K, V are [batch, heads, seq, hd] views of qkv [batch x seq, 3d]
// (strides: seq x 3d, hd, 3d, 1), O and dO of [batch x seq, d] (seq x d, hd, d, 1); dQ, dK,
// dV are written into dqkv with qkv's strides. The scale is passed by value at execution,
// so one graph serves any scale. make_cudnn_attention_plans builds both graphs with every
// plan that builds, for bench/fused_attention_gpu_bench to time.
//
// libcudnn is not linked: it is loaded when the first FusedAttention is made (dlopen of
// libcudnn.so.<the headers' major>, found through LD_LIBRARY_PATH or the system's paths)
// and the frontend's dynamic-loading shim calls into it. A machine without cuDNN then runs
// every zdp program as before, attention batched ("auto") or refused naming the missing
// library ("fused"), and nothing that links zdp needs cuDNN's 1 GiB of libraries.
#include <cudnn.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

// nlohmann-json is only needed for the frontend's (de)serialisation, which this file never
// uses; skipping it saves a third of the compile time.
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <cudnn_frontend.h>

#include "kernels/fused_attention.h"

// The shim's handle of the loaded libcudnn (it declares it and leaves the definition to
// the program); set once by cudnn_library().
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace zdp::kernels {
namespace {

namespace fe = cudnn_frontend;

// libcudnn, loaded once, with the three entry points this file calls itself (the frontend
// resolves its own); `error` says why it is not there.
struct CudnnLibrary {
  void* handle = nullptr;
  size_t version = 0;
  const char* (*error_string)(cudnnStatus_t) = nullptr;
  cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t) = nullptr;
  std::string error;
};

const CudnnLibrary& cudnn_library() {
  static const CudnnLibrary lib = [] {
    CudnnLibrary l;
    prepare_cudnn_environment();  // done by zdp::init already, while single-threaded
    const std::string name = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
    dlerror();
    l.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!l.handle) {
      const char* why = dlerror();
      l.error = "cannot load " + name + " (" + (why ? why : "?") +
                "): put cuDNN " + std::to_string(CUDNN_MAJOR) +
                " and the CUDA NVRTC library it needs on LD_LIBRARY_PATH (e.g. pip's nvidia-cudnn-cu13)";
      return l;
    }
    auto version = reinterpret_cast<size_t (*)()>(dlsym(l.handle, "cudnnGetVersion"));
    l.error_string = reinterpret_cast<const char* (*)(cudnnStatus_t)>(dlsym(l.handle, "cudnnGetErrorString"));
    l.set_stream = reinterpret_cast<cudnnStatus_t (*)(cudnnHandle_t, cudaStream_t)>(dlsym(l.handle, "cudnnSetStream"));
    if (!version || !l.error_string || !l.set_stream) {
      l.error = name + " lacks cudnnGetVersion, cudnnGetErrorString or cudnnSetStream";
    } else if ((l.version = version()) / 10000 != CUDNN_MAJOR) {
      l.error = name + " is cuDNN " + std::to_string(l.version) + ", not major version " + std::to_string(CUDNN_MAJOR);
    }
    if (!l.error.empty()) {
      dlclose(l.handle);
      l.handle = nullptr;
      return l;
    }
    fe::cudnn_dlhandle = l.handle;
    return l;
  }();
  return lib;
}

// Tensor ids of the variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kScale };

std::string cudnn_text(cudnnStatus_t s) {
  const char* text = cudnn_library().error_string ? cudnn_library().error_string(s) : nullptr;
  return (text ? std::string(text) : "?") + " (cudnnStatus_t " + std::to_string(static_cast<int>(s)) + ")";
}

// A frontend error as a Status. While building a graph, the codes by which cuDNN says it
// has no engine for this graph here are kUnavailable (the caller falls back to batched
// attention); a malformed graph or variant pack is zdp's bug (kInternal, never a quiet
// fallback); a CUDA or handle failure is an error either way. `what` names the step and
// the shape.
Status fe_status(fe::error_t e, const std::string& what, bool building) {
  if (e.is_good()) return Status::Ok();
  using C = fe::error_code_t;
  StatusCode code = StatusCode::kCudaError;
  switch (e.code) {
    case C::GRAPH_NOT_SUPPORTED:
    case C::HEURISTIC_QUERY_FAILED:
    case C::GRAPH_EXECUTION_PLAN_CREATION_FAILED:
    case C::UNSUPPORTED_GRAPH_FORMAT:
    case C::NVRTC_COMPILATION_FAILED:
      code = building ? StatusCode::kUnavailable : StatusCode::kCudaError;
      break;
    case C::CUDNN_BACKEND_API_FAILED:
      // Every failing backend call (its message names the cudnnStatus_t): a backend that
      // cannot finalize this graph says CUDNN_STATUS_NOT_SUPPORTED*, a refusal; anything
      // else (an allocation, an internal error) is an error, never cached as a refusal.
      code = building && e.err_msg.find("NOT_SUPPORTED") != std::string::npos ? StatusCode::kUnavailable
                                                                               : StatusCode::kCudaError;
      break;
    case C::ATTRIBUTE_NOT_SET:
    case C::SHAPE_DEDUCTION_FAILED:
    case C::INVALID_TENSOR_NAME:
    case C::INVALID_VARIANT_PACK:
    case C::INVALID_VALUE:
      code = StatusCode::kInternal;
      break;
    default:  // CUDA_API_FAILED, HANDLE_ERROR, INVALID_CUDA_DEVICE, GRAPH_EXECUTION_FAILED
      code = StatusCode::kCudaError;
  }
  return Status(code, what + " failed: cuDNN frontend error " + std::to_string(static_cast<int>(e.code)) + ": " +
                          e.err_msg);
}

fe::DataType_t fe_type(DType d) { return d == DType::kF16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16; }

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int>;
Key key_of(const FusedAttentionShape& s) {
  return {s.batch, s.seq, s.heads, s.head_dim, static_cast<int>(s.dtype)};
}

struct Entry {
  Status status;  // OK, or why the shape is refused (kept: a refused shape is not rebuilt)
  std::shared_ptr<fe::graph::Graph> forward, backward;
  int64_t workspace = 0;
};

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// The strides of a [batch, heads, seq, hd] view of a row-major [batch x seq, row] buffer.
std::vector<int64_t> strides(const FusedAttentionShape& s, int64_t row) { return {s.seq * row, s.head_dim, row, 1}; }
std::vector<int64_t> dims(const FusedAttentionShape& s) { return {s.batch, s.heads, s.seq, s.head_dim}; }

TensorPtr input(fe::graph::Graph& g, const char* name, Uid uid, const FusedAttentionShape& s, int64_t row) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims(s)).set_stride(strides(s, row)));
}
TensorPtr scale_input(fe::graph::Graph& g) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name("attn_scale")
                      .set_uid(kScale)
                      .set_dim({1, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_is_pass_by_value(true)
                      .set_data_type(fe::DataType_t::FLOAT));
}
std::vector<int64_t> stats_dims(const FusedAttentionShape& s) { return {s.batch, s.heads, s.seq, 1}; }
std::vector<int64_t> stats_strides(const FusedAttentionShape& s) { return {s.heads * s.seq, s.seq, 1, 1}; }

std::shared_ptr<fe::graph::Graph> new_graph(DType dtype) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe_type(dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// validate -> operation graph -> heuristics (mode A, fallback) -> support -> plans (the
// heuristics' first that builds, or with BuildPlanPolicy_t::ALL every one that builds).
Status build(fe::graph::Graph& g, cudnnHandle_t handle, const std::string& what, fe::BuildPlanPolicy_t policy) {
  ZDP_RETURN_IF_ERROR(fe_status(g.validate(), what + ": validate", true));
  ZDP_RETURN_IF_ERROR(fe_status(g.build_operation_graph(handle), what + ": build_operation_graph", true));
  ZDP_RETURN_IF_ERROR(
      fe_status(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), what + ": create_execution_plans", true));
  ZDP_RETURN_IF_ERROR(fe_status(g.check_support(handle), what + ": check_support", true));
  return fe_status(g.build_plans(handle, policy), what + ": build_plans", true);
}

// The variant packs: Q, K, V read out of qkv (and dQ, dK, dV written into dqkv) at their
// columns; `scale` is passed by value, so it must outlive the execution.
using Pack = std::unordered_map<int64_t, void*>;
Pack forward_pack(const FusedAttentionArgs& a, float* scale) {
  char* qkv = const_cast<char*>(static_cast<const char*>(a.qkv));
  const int64_t d = a.shape.heads * a.shape.head_dim, eb = static_cast<int64_t>(dtype_size(a.shape.dtype));
  return {{kQ, qkv}, {kK, qkv + d * eb}, {kV, qkv + 2 * d * eb}, {kO, a.out}, {kStats, a.stats}, {kScale, scale}};
}
Pack backward_pack(const FusedAttentionBackwardArgs& a, float* scale) {
  char* qkv = const_cast<char*>(static_cast<const char*>(a.qkv));
  char* dqkv = static_cast<char*>(a.dqkv);
  const int64_t d = a.shape.heads * a.shape.head_dim, eb = static_cast<int64_t>(dtype_size(a.shape.dtype));
  return {{kQ, qkv},
          {kK, qkv + d * eb},
          {kV, qkv + 2 * d * eb},
          {kO, const_cast<void*>(a.out)},
          {kDO, const_cast<void*>(a.dout)},
          {kStats, const_cast<float*>(a.stats)},
          {kDQ, dqkv},
          {kDK, dqkv + d * eb},
          {kDV, dqkv + 2 * d * eb},
          {kScale, scale}};
}

class CudnnAttention final : public FusedAttention {
 public:
  CudnnAttention(cudnnHandle_t handle, bool deterministic) : handle_(handle), deterministic_(deterministic) {}
  ~CudnnAttention() override {
    try {
      cache_.clear();  // the graphs' descriptors refer to the handle: they go first
      (void)fe::detail::destroy_handle(handle_);
    } catch (const std::exception&) {  // a destructor cannot report it; the process is ending its use of cuDNN
    }
  }

  StatusOr<int64_t> prepare(const FusedAttentionShape& s) override {
    ZDP_ASSIGN_OR_RETURN(const Entry* e, entry(s));
    return e->workspace;
  }

  Status forward(const FusedAttentionArgs& a, void* workspace, int64_t workspace_bytes, cudaStream_t stream) override {
    if (!a.qkv || !a.out || !a.stats) return Status(StatusCode::kInvalidArgument, describe(a.shape) + " forward: null buffer");
    ZDP_ASSIGN_OR_RETURN(const Entry* e, entry(a.shape));
    ZDP_RETURN_IF_ERROR(check_workspace(a.shape, *e, workspace, workspace_bytes));
    float scale = a.scale;
    Pack pack = forward_pack(a, &scale);
    return run(*e->forward, pack, workspace, stream, describe(a.shape) + " forward");
  }

  Status backward(const FusedAttentionBackwardArgs& a, void* workspace, int64_t workspace_bytes,
                  cudaStream_t stream) override {
    if (!a.qkv || !a.out || !a.dout || !a.stats || !a.dqkv) {
      return Status(StatusCode::kInvalidArgument, describe(a.shape) + " backward: null buffer");
    }
    ZDP_ASSIGN_OR_RETURN(const Entry* e, entry(a.shape));
    ZDP_RETURN_IF_ERROR(check_workspace(a.shape, *e, workspace, workspace_bytes));
    float scale = a.scale;
    Pack pack = backward_pack(a, &scale);
    return run(*e->backward, pack, workspace, stream, describe(a.shape) + " backward");
  }

 private:
  // The cached graphs of `s`, built on first use; the refusal when cuDNN has none.
  StatusOr<const Entry*> entry(const FusedAttentionShape& s) {
    ZDP_RETURN_IF_ERROR(check_fused_attention_shape(s));
    auto it = cache_.find(key_of(s));
    if (it == cache_.end()) {
      Entry e;
      try {
        e = make_entry(s);
      } catch (const std::exception& x) {  // the frontend's shim throws when a symbol is missing
        e.status = Status(StatusCode::kUnavailable, describe(s) + ": cuDNN frontend: " + x.what());
      }
      // Kept: a built shape and a refused one. An error (a failing device, a malformed
      // graph) is returned and the shape tried again next time.
      if (!e.status.ok() && e.status.code() != StatusCode::kUnavailable) return e.status;
      it = cache_.emplace(key_of(s), std::move(e)).first;
    }
    if (!it->second.status.ok()) return it->second.status;
    return &it->second;
  }

  Entry make_entry(const FusedAttentionShape& s, fe::BuildPlanPolicy_t policy = fe::BuildPlanPolicy_t::HEURISTICS_CHOICE) {
    Entry e;
    const std::string what = describe(s);
    const int64_t d = s.heads * s.head_dim;
    // Forward: O and the log-sum-exp statistics for the backward.
    e.forward = new_graph(s.dtype);
    fe::graph::Graph& f = *e.forward;
    TensorPtr q = input(f, "Q", kQ, s, 3 * d), k = input(f, "K", kK, s, 3 * d), v = input(f, "V", kV, s, 3 * d);
    auto fwd_opts = fe::graph::SDPA_attributes().set_name("zdp_attention").set_generate_stats(true).set_causal_mask(true);
    fwd_opts.set_attn_scale(scale_input(f));
    auto [o, stats] = f.sdpa(q, k, v, fwd_opts);
    o->set_output(true).set_uid(kO).set_dim(dims(s)).set_stride(strides(s, d));
    stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim(stats_dims(s)).set_stride(stats_strides(s));
    e.status = build(f, handle_, what + " forward graph", policy);
    if (!e.status.ok()) return e;

    e.backward = new_graph(s.dtype);
    fe::graph::Graph& b = *e.backward;
    TensorPtr bq = input(b, "Q", kQ, s, 3 * d), bk = input(b, "K", kK, s, 3 * d), bv = input(b, "V", kV, s, 3 * d);
    TensorPtr bo = input(b, "O", kO, s, d), bdo = input(b, "dO", kDO, s, d);
    TensorPtr bstats = b.tensor(fe::graph::Tensor_attributes()
                                    .set_name("stats")
                                    .set_uid(kStats)
                                    .set_dim(stats_dims(s))
                                    .set_stride(stats_strides(s))
                                    .set_data_type(fe::DataType_t::FLOAT));
    auto bwd_opts = fe::graph::SDPA_backward_attributes()
                        .set_name("zdp_attention_backward")
                        .set_causal_mask(true)
                        .set_deterministic_algorithm(deterministic_);
    bwd_opts.set_attn_scale(scale_input(b));
    auto [dq, dk, dv] = b.sdpa_backward(bq, bk, bv, bo, bdo, bstats, bwd_opts);
    dq->set_output(true).set_uid(kDQ).set_dim(dims(s)).set_stride(strides(s, 3 * d));
    dk->set_output(true).set_uid(kDK).set_dim(dims(s)).set_stride(strides(s, 3 * d));
    dv->set_output(true).set_uid(kDV).set_dim(dims(s)).set_stride(strides(s, 3 * d));
    e.status = build(b, handle_, what + " backward graph", policy);
    if (!e.status.ok()) return e;

    int64_t fws = 0, bws = 0;
    e.status = fe_status(f.get_workspace_size(fws), what + " forward: get_workspace_size", true);
    if (e.status.ok()) e.status = fe_status(b.get_workspace_size(bws), what + " backward: get_workspace_size", true);
    e.workspace = fws > bws ? fws : bws;
    return e;
  }

  static Status check_workspace(const FusedAttentionShape& s, const Entry& e, void* workspace, int64_t bytes) {
    if (e.workspace > 0 && (!workspace || bytes < e.workspace)) {
      return Status(StatusCode::kInvalidArgument, describe(s) + ": needs " + std::to_string(e.workspace) +
                                                      " bytes of workspace, got " + std::to_string(workspace ? bytes : 0));
    }
    return Status::Ok();
  }

 public:
  // make_cudnn_attention_plans: both graphs of `s` with every plan that builds.
  StatusOr<Entry> entry_with_every_plan(const FusedAttentionShape& s) {
    ZDP_RETURN_IF_ERROR(check_fused_attention_shape(s));
    Entry e;
    try {
      e = make_entry(s, fe::BuildPlanPolicy_t::ALL);
    } catch (const std::exception& x) {
      return Status(StatusCode::kUnavailable, describe(s) + ": cuDNN frontend: " + x.what());
    }
    ZDP_RETURN_IF_ERROR(e.status);
    return e;
  }
  cudnnHandle_t handle() const { return handle_; }

 private:
  Status run(fe::graph::Graph& g, Pack& pack, void* workspace, cudaStream_t stream,
             const std::string& what) {
    const cudnnStatus_t st = cudnn_library().set_stream(handle_, stream);
    if (st != CUDNN_STATUS_SUCCESS) return Status(StatusCode::kCudaError, what + ": cudnnSetStream failed: " + cudnn_text(st));
    try {
      ZDP_RETURN_IF_ERROR(fe_status(g.execute(handle_, pack, workspace), what + ": execute", false));
    } catch (const std::exception& x) {
      return Status(StatusCode::kCudaError, what + ": execute: cuDNN frontend: " + x.what());
    }
    // No cudaGetLastError here: execute reports its own launches' failures (above), and a
    // pending error of an earlier kernel belongs to whoever launched it.
    return Status::Ok();
  }

  cudnnHandle_t handle_;
  bool deterministic_;
  std::map<Key, Entry> cache_;
};

}  // namespace

void prepare_cudnn_environment() {
  setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", ("libcudart.so." + std::to_string(CUDART_VERSION / 1000)).c_str(), 0);
}

std::string cudnn_library_version() {
  const CudnnLibrary& lib = cudnn_library();
  return lib.handle ? "cuDNN " + std::to_string(lib.version) : "";
}

StatusOr<std::unique_ptr<FusedAttention>> make_cudnn_attention(bool deterministic) {
  const CudnnLibrary& lib = cudnn_library();
  if (!lib.handle) return Status(StatusCode::kUnavailable, "fused attention: " + lib.error);
  cudnnHandle_t handle = nullptr;
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  try {
    st = fe::detail::create_handle(&handle);
  } catch (const std::exception& x) {
    return Status(StatusCode::kUnavailable, std::string("fused attention: cudnnCreate: cuDNN frontend: ") + x.what());
  }
  if (st != CUDNN_STATUS_SUCCESS) {
    return Status(StatusCode::kCudaError, "fused attention: cudnnCreate failed: " + cudnn_text(st) + " (cuDNN " +
                                              std::to_string(lib.version) + " loaded; built against " +
                                              std::to_string(CUDNN_VERSION) + ")");
  }
  return std::unique_ptr<FusedAttention>(new CudnnAttention(handle, deterministic));
}

// The plans of make_cudnn_attention_plans: the graphs built with every plan, the variant
// packs made once (their scales live here).
class CudnnAttentionPlans final : public FusedAttentionPlans {
 public:
  CudnnAttentionPlans(std::unique_ptr<FusedAttention> owner, Entry entry, const FusedAttentionArgs& f,
                      const FusedAttentionBackwardArgs& b)
      : owner_(std::move(owner)), entry_(std::move(entry)), scale_{f.scale, b.scale} {
    pack_[0] = forward_pack(f, &scale_[0]);
    pack_[1] = backward_pack(b, &scale_[1]);
    for (int pass = 0; pass < 2; ++pass) {
      fe::graph::Graph& g = graph(pass == 1);
      std::string chosen;
      (void)g.get_plan_name(chosen);  // the plan execute() runs: the first that built
      for (int64_t i = 0; i < g.get_execution_plan_count(); ++i) {
        Plan p{pass == 1, i, "", 0, false};
        if (!g.get_plan_name_at_index(i, p.name).is_good() || !g.get_workspace_size_plan_at_index(i, p.workspace).is_good()) {
          continue;  // not built
        }
        p.heuristic = p.name == chosen;
        plans_.push_back(p);
      }
    }
  }
  const std::vector<Plan>& plans() const override { return plans_; }
  Status run(const Plan& plan, void* workspace, cudaStream_t stream) override {
    CudnnAttention& owner = static_cast<CudnnAttention&>(*owner_);
    const cudnnStatus_t st = cudnn_library().set_stream(owner.handle(), stream);
    if (st != CUDNN_STATUS_SUCCESS) return Status(StatusCode::kCudaError, "cudnnSetStream failed: " + cudnn_text(st));
    const std::string what = std::string(plan.backward ? "backward" : "forward") + " plan " + std::to_string(plan.index);
    try {
      return fe_status(graph(plan.backward).execute_plan_at_index(owner.handle(), pack_[plan.backward ? 1 : 0], workspace, plan.index),
                       what, false);
    } catch (const std::exception& x) {
      return Status(StatusCode::kCudaError, what + ": cuDNN frontend: " + x.what());
    }
  }

 private:
  fe::graph::Graph& graph(bool backward) { return backward ? *entry_.backward : *entry_.forward; }

  std::unique_ptr<FusedAttention> owner_;  // the handle, destroyed after the graphs (below)
  Entry entry_;
  float scale_[2];
  Pack pack_[2];
  std::vector<Plan> plans_;
};

StatusOr<std::unique_ptr<FusedAttentionPlans>> make_cudnn_attention_plans(const FusedAttentionArgs& forward,
                                                                          const FusedAttentionBackwardArgs& backward,
                                                                          bool deterministic) {
  if (key_of(forward.shape) != key_of(backward.shape)) {
    return Status(StatusCode::kInvalidArgument, "make_cudnn_attention_plans: the forward's and backward's shapes differ");
  }
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<FusedAttention> owner, make_cudnn_attention(deterministic));
  ZDP_ASSIGN_OR_RETURN(Entry entry, static_cast<CudnnAttention&>(*owner).entry_with_every_plan(forward.shape));
  return std::unique_ptr<FusedAttentionPlans>(new CudnnAttentionPlans(std::move(owner), std::move(entry), forward, backward));
}

}  // namespace zdp::kernels
