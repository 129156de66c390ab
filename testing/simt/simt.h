// A CPU emulation of the CUDA execution model, for running the source of zdp's own
// kernels (kernels/cuda/*.cu) here, where no GPU is: every thread of a block is a fiber
// on one OS thread, switched at __syncthreads and at every warp shuffle, so that the
// kernels' index arithmetic, shared-memory use, barriers and warp reductions run as
// written, against the CPU twins, before any GPU is lent (tests/CMakeLists.txt,
// simt_emulation_test). It emulates the programming model, not the hardware: no timing,
// no memory model beyond "a barrier orders everything", and the special-function unit's
// ex2.approx and the cvt instructions take their host fallbacks
// (kernels/cuda/nn_common.cuh). What it catches: a wrong index, a read of shared memory
// another thread has not written yet (threads run in order, each until its next barrier,
// so a missing barrier shows; shared memory is poisoned before every block, so a read
// before any write shows too), a barrier and a shuffle waiting for each other (a
// deadlock, reported), a shuffle reading an exited lane, a launch with more dynamic
// shared memory than the kernel was allowed, or more than 1024 threads.
//
// Force-included (-include) into the emulated kernel sources (.cu rewritten by
// testing/simt/cu_to_cc.py) and the tests that call them. Its macros rename the kernels'
// entry points *_cuda -> *_emu and their helper namespace cuda -> cuda_emu, so the
// emulated copies link beside zdp_kernels' real ones without a clash.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace zdp_emu {

// Where the running emulated thread is (CUDA's threadIdx, blockIdx, blockDim, gridDim).
struct Position {
  uint3 thread;
  uint3 block;
  dim3 block_dim;
  dim3 grid_dim;
};
const Position& position();

void sync_block();  // __syncthreads
// Every live lane of the warp gives `mine` and gets lane `source`'s (a shuffle); a
// source outside 0..31 gives the caller's own value back, as CUDA's do.
uint64_t warp_exchange(uint64_t mine, int source);
bool warp_any(bool predicate);
void* dynamic_shared();  // extern __shared__
// A kernel's own __shared__ variable (a function-local static, cu_to_cc.py): poisoned
// before every block from the next one on. Returns true, for the static that calls it once.
bool register_shared(void* variable, size_t bytes);

// Runs `body` on every thread of every block, blocks one after another. REQUIRES:
// launch_configuration_ok() for the launch (launch() checks it when the launch is queued).
void run_grid(dim3 grid, dim3 block, size_t dynamic_shared_bytes, const std::function<void()>& body);

// What went wrong inside the last launch that ran (a deadlock, a shuffle of an exited
// lane), or "".
std::string last_launch_fault();

// Whether a launch of `kernel` with this configuration is valid; if not, the launch error
// is recorded for cudaGetLastError at once, as CUDA reports it at the launch.
bool launch_configuration_ok(const void* kernel, dim3 grid, dim3 block, size_t dynamic_shared_bytes);

// A stream of the emulated CUDA device (testing/simt/emulated_gpu_device.h) as the launchers
// see it: that device's cudaStream_t handles point at one of these. Work given to it (a
// launch, an async copy, a cuBLASLt matmul) is queued and runs when the host waits for it
// or another stream's queued work does (after a cudaStreamWaitEvent). `work` returns "" or
// why it failed (a faulted kernel): the stream then fails, as a CUDA stream after a fault.
class StreamQueue {
 public:
  virtual void submit(std::function<std::string()> work) = 0;
  // Work that takes several tries, as a kernel that spins until its peers arrive (an NCCL
  // collective, testing/simt/nccl_emulation.h): `poll` returns std::nullopt while unfinished,
  // then "" or why it failed. The stream's later work waits for it; a host wait polls again.
  virtual void submit_polled(std::function<std::optional<std::string>()> poll) = 0;
  // What cudaEventRecord takes: a check of whether the work queued so far has all run, once
  // the queue has been run as far as it can (cudaEventQuery); valid after the stream is
  // destroyed, as an event is.
  virtual std::function<bool()> mark() = 0;

 protected:
  ~StreamQueue() = default;
};
// Runs `work` at once on the null stream (the kernel tests'), else queues it on `stream`.
inline void submit(cudaStream_t stream, std::function<std::string()> work) {
  if (stream == nullptr) {
    (void)work();
    return;
  }
  reinterpret_cast<StreamQueue*>(stream)->submit(std::move(work));
}

template <typename... P, typename... A>
void launch(dim3 grid, dim3 block, size_t dynamic_shared_bytes, cudaStream_t stream, void (*kernel)(P...), A&&... args) {
  const void* id = reinterpret_cast<const void*>(kernel);
  if (!launch_configuration_ok(id, grid, block, dynamic_shared_bytes)) return;
  // The arguments as the kernel's parameter types, taken now (a launch copies them); every
  // thread gets its own copy when the grid runs, as on the GPU (a kernel may change its
  // by-value parameters).
  auto params = std::make_shared<const std::tuple<std::decay_t<P>...>>(std::forward<A>(args)...);
  submit(stream, [=] {
    run_grid(grid, block, dynamic_shared_bytes, [&] {
      std::tuple<std::decay_t<P>...> mine = *params;
      std::apply(kernel, mine);
    });
    return last_launch_fault();
  });
}

// The runtime calls the kernels' launchers make, answered as an H100/H200 would.
cudaError_t get_device(int* device);
cudaError_t device_get_attribute(int* value, cudaDeviceAttr attribute, int device);
cudaError_t func_set_attribute(const void* kernel, cudaFuncAttribute attribute, int value);
template <typename F>
cudaError_t func_set_attribute(F* kernel, cudaFuncAttribute attribute, int value) {
  return func_set_attribute(reinterpret_cast<const void*>(kernel), attribute, value);
}
cudaError_t get_last_error();
// Stream-ordered copies and fills: at once on the null stream, else queued (submit()).
cudaError_t memcpy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = nullptr);
cudaError_t memcpy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                            cudaMemcpyKind kind, cudaStream_t stream = nullptr);
cudaError_t memset_async(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr);
// The names and texts of the errors the emulation reports (the CUDA runtime's own are in
// libcudart, which a build without CUDA does not link).
const char* error_name(cudaError_t error);
const char* error_string(cudaError_t error);

// The order the scheduler runs a block's threads in, each until its next barrier. A read
// of another thread's shared-memory write that no barrier orders sees the write only when
// the writer ran first: forward order misses such a race when the writer has the lower
// index, reverse order when it has the higher. kAlternate (the default) runs even blocks
// of even launches forward and the others in reverse, so one run of a test tries both;
// it also runs the blocks of odd launches from the last to the first.
enum class Schedule { kForward, kReverse, kAlternate };
void set_schedule(Schedule schedule);

// Test knobs: the dynamic shared memory one block may opt in to (the H100's and H200's
// 227 KiB by default), so that a test can make a kernel take its other path.
void set_shared_memory_optin(int bytes);
int shared_memory_optin();
// Launches since the process started (the kAlternate schedule's parity).
int64_t launches();

template <typename T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <typename T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}
int lane();
void check_full_warp(unsigned mask, int width, const char* what);

}  // namespace zdp_emu

// ---- CUDA's device-side names, on the host -----------------------------------------
#define threadIdx (::zdp_emu::position().thread)
#define blockIdx (::zdp_emu::position().block)
#define blockDim (::zdp_emu::position().block_dim)
#define gridDim (::zdp_emu::position().grid_dim)
#define __syncthreads() ::zdp_emu::sync_block()
#undef __launch_bounds__
#define __launch_bounds__(...)
// A block's shared variables: one instance for the block's fibers (blocks run one at a
// time). Function-local statics keep their values from block to block, like a GPU's
// uninitialised shared memory.
#undef __shared__
#define __shared__ static

template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  ::zdp_emu::check_full_warp(mask, width, "__shfl_xor_sync");
  return ::zdp_emu::from_bits<T>(::zdp_emu::warp_exchange(::zdp_emu::to_bits(v), ::zdp_emu::lane() ^ lane_mask));
}
template <typename T>
T __shfl_sync(unsigned mask, T v, int source_lane, int width = 32) {
  ::zdp_emu::check_full_warp(mask, width, "__shfl_sync");
  // The hardware reads lane source_lane mod width (32 here).
  return ::zdp_emu::from_bits<T>(::zdp_emu::warp_exchange(::zdp_emu::to_bits(v), source_lane & 31));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  ::zdp_emu::check_full_warp(mask, width, "__shfl_down_sync");
  return ::zdp_emu::from_bits<T>(::zdp_emu::warp_exchange(::zdp_emu::to_bits(v), ::zdp_emu::lane() + static_cast<int>(delta)));
}
inline int __any_sync(unsigned mask, int predicate) {
  ::zdp_emu::check_full_warp(mask, 32, "__any_sync");
  return ::zdp_emu::warp_any(predicate != 0) ? 1 : 0;
}
template <typename T>
T __ldcs(const T* p) {
  return *p;
}
template <typename T>
void __stcs(T* p, T v) {
  *p = v;
}
inline float __uint_as_float(unsigned v) { return ::zdp_emu::from_bits<float>(v); }
inline unsigned __float_as_uint(float v) { return static_cast<unsigned>(::zdp_emu::to_bits(v)); }
// CUDA's integer min and max of device code (math_functions.h), for one type.
template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
T min(T a, T b) {
  return b < a ? b : a;
}
template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
T max(T a, T b) {
  return a < b ? b : a;
}
// One OS thread runs every fiber, and a fiber switches only at a barrier: an atomic is a
// plain read-modify-write.
template <typename T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <typename T>
T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}

// The runtime calls of the launchers (kernels/cuda/common.cuh and the .cu files).
#define cudaGetDevice ::zdp_emu::get_device
#define cudaDeviceGetAttribute ::zdp_emu::device_get_attribute
#define cudaFuncSetAttribute ::zdp_emu::func_set_attribute
#define cudaGetLastError ::zdp_emu::get_last_error
#define cudaMemcpyAsync ::zdp_emu::memcpy_async
#define cudaMemcpy2DAsync ::zdp_emu::memcpy_2d_async
#define cudaMemsetAsync ::zdp_emu::memset_async
#define cudaGetErrorName ::zdp_emu::error_name
#define cudaGetErrorString ::zdp_emu::error_string

// ---- Renames: the emulated copies beside zdp_kernels' real ones ---------------------
#define cuda cuda_emu
#define layernorm_forward_cuda layernorm_forward_emu
#define layernorm_backward_cuda layernorm_backward_emu
#define cross_entropy_cuda cross_entropy_emu
#define embedding_forward_cuda embedding_forward_emu
#define embedding_backward_cuda embedding_backward_emu
#define bias_grad_cuda bias_grad_emu
#define causal_softmax_forward_cuda causal_softmax_forward_emu
#define causal_softmax_backward_cuda causal_softmax_backward_emu
#define add_cuda add_emu
#define gelu_forward_cuda gelu_forward_emu
#define gelu_backward_cuda gelu_backward_emu
#define squared_error_cuda squared_error_emu
#define adamw_update_cuda adamw_update_emu
#define sgd_update_cuda sgd_update_emu
#define grad_check_cuda grad_check_emu
#define exact_sumsq_cuda exact_sumsq_emu
#define decide_step_cuda decide_step_emu
#define loss_sum_cuda loss_sum_emu
#define cast_cuda cast_emu
#define scale_cuda scale_emu
#define fold_cuda fold_emu
#define quantize_cuda quantize_emu
#define dequant_sum_cuda dequant_sum_emu
#define dequantize_cuda dequantize_emu
// The cuBLASLt wrapper, compiled against the emulated cuBLASLt (cublaslt_emulation.h), and
// the emulated GPU's cuDNN fused attention (cudnn_attention_emulation.h).
#define make_cublaslt_gemm make_cublaslt_gemm_emu
#define fused_attention_built fused_attention_built_emu
#define make_cudnn_attention make_cudnn_attention_emu
// core/internal/cuda_check.h's inline helpers call the runtime's error texts, which
// differ here (the emulation's): renamed, so that the linker cannot give the real
// launchers' error messages the emulated copies of the helpers, or the other way round.
#define cuda_error_text cuda_error_text_emu
#define cuda_error_status cuda_error_status_emu
#define cublas_error_text cublas_error_text_emu
#define cublas_error_status cublas_error_status_emu
