// StreamClock (runtime/internal/stream_clock.h) on CUDA: timing events recorded on the
// streams, read with cudaEventQuery (never a wait) and converted to steady_clock seconds
// through an anchor event.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <vector>

#include "core/internal/cuda_check.h"
#include "runtime/internal/stream_clock.h"
#include "runtime/internal/cuda_stream_handle.h"
#include "zdp/log.h"

namespace zdp {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Past this many milliseconds from the anchor, fp32 elapsed times lose microseconds:
// re-anchor when the chance comes (every point read).
constexpr float kReanchorMs = 10000.0f;

class CudaStreamClock final : public StreamClock {
 public:
  explicit CudaStreamClock(int device) : device_(device) {}
  ~CudaStreamClock() override {
    ZDP_CUDA_CHECK_LOG(cudaSetDevice(device_));
    // Safe on events not yet reached: CUDA releases them once they are.
    for (const Mark& m : pending_) ZDP_CUDA_CHECK_LOG(cudaEventDestroy(m.event));
    for (cudaEvent_t e : free_) ZDP_CUDA_CHECK_LOG(cudaEventDestroy(e));
    if (anchor_ != nullptr) ZDP_CUDA_CHECK_LOG(cudaEventDestroy(anchor_));
  }

  // The anchor: an event on an idle private stream, its host time taken as the middle of
  // the record and the moment the host saw it complete (a few microseconds apart).
  Status init() {
    ZDP_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    cudaStream_t s = nullptr;
    ZDP_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    Status st = ZDP_CUDA_STATUS(cudaEventCreate(&anchor_));
    const double before = steady_seconds();
    if (st.ok()) st = ZDP_CUDA_STATUS(cudaEventRecord(anchor_, s));
    if (st.ok()) st = ZDP_CUDA_STATUS(cudaEventSynchronize(anchor_));  // an idle stream: returns at once
    anchor_seconds_ = 0.5 * (before + steady_seconds());
    ZDP_CUDA_CHECK_LOG(cudaStreamDestroy(s));
    return st;
  }

  Status mark(Stream& stream, uint64_t id, bool) override {
    ZDP_ASSIGN_OR_RETURN(cuda::StreamHandle h, cuda::stream_handle(stream));
    std::lock_guard<std::mutex> lock(mu_);
    ZDP_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    cudaEvent_t e = nullptr;
    if (!free_.empty()) {
      e = free_.back();
      free_.pop_back();
    } else {
      ZDP_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));  // timing enabled
    }
    const cudaError_t err = cudaEventRecord(e, h.stream);
    if (err != cudaSuccess) {
      free_.push_back(e);
      return cuda_error_status(err, "cudaEventRecord(e, stream)", __FILE__, __LINE__);
    }
    pending_.push_back(Mark{id, e, h.stream});
    return Status::Ok();
  }

  std::vector<std::pair<uint64_t, double>> take() override {
    std::vector<std::pair<uint64_t, double>> out;
    std::lock_guard<std::mutex> lock(mu_);
    if (cudaSetDevice(device_) != cudaSuccess) return out;
    cudaEvent_t latest = nullptr;
    float latest_ms = 0;
    // A stream's points complete in order, but an earlier point can complete between its
    // query and a later one's: once a stream has a point not reached, its later points
    // wait for the next call, so each stream's points come out in mark order.
    std::vector<cudaStream_t> waiting;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (std::find(waiting.begin(), waiting.end(), it->stream) != waiting.end()) {
        ++it;
        continue;
      }
      const cudaError_t q = cudaEventQuery(it->event);
      if (q == cudaErrorNotReady) {
        waiting.push_back(it->stream);
        ++it;
        continue;
      }
      float ms = 0;
      if (q == cudaSuccess && cudaEventElapsedTime(&ms, anchor_, it->event) == cudaSuccess) {
        out.emplace_back(it->id, anchor_seconds_ + static_cast<double>(ms) / 1e3);
        if (latest == nullptr || ms > latest_ms) {
          if (latest != nullptr) free_.push_back(latest);
          latest = it->event;
          latest_ms = ms;
        } else {
          free_.push_back(it->event);
        }
      } else {
        (void)cudaGetLastError();  // a failed stream: the point is lost, the stream reports why
        free_.push_back(it->event);
      }
      it = pending_.erase(it);
    }
    // Every point read: later ones are recorded after `latest` completed, so their times
    // from it are positive and small.
    if (latest != nullptr && pending_.empty() && latest_ms > kReanchorMs) {
      free_.push_back(anchor_);
      anchor_ = latest;
      anchor_seconds_ += static_cast<double>(latest_ms) / 1e3;
    } else if (latest != nullptr) {
      free_.push_back(latest);
    }
    return out;
  }

 private:
  struct Mark {
    uint64_t id;
    cudaEvent_t event;
    cudaStream_t stream;  // which stream's order the point belongs to
  };
  const int device_;
  std::mutex mu_;
  cudaEvent_t anchor_ = nullptr;
  double anchor_seconds_ = 0;
  std::deque<Mark> pending_;  // in mark order
  std::vector<cudaEvent_t> free_;
};

}  // namespace

StatusOr<std::unique_ptr<StreamClock>> create_cuda_stream_clock(Device& device) {
  auto clock = std::make_unique<CudaStreamClock>(device.index());
  ZDP_RETURN_IF_ERROR(clock->init());
  return std::unique_ptr<StreamClock>(std::move(clock));
}

}  // namespace zdp
