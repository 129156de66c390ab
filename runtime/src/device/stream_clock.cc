// StreamClock (runtime/internal/stream_clock.h) on the CPU, and the factory.
#include <chrono>
#include <mutex>

#include "runtime/internal/stream_clock.h"

namespace zdp {

StatusOr<std::unique_ptr<StreamClock>> create_cuda_stream_clock(Device& device);  // cuda/ or no_cuda/

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class CpuStreamClock final : public StreamClock {
 public:
  Status mark(Stream& stream, uint64_t id, bool now) override {
    if (now) {
      stamp(id);
      return Status::Ok();
    }
    // Shared with the task, which may run after the clock is gone (a stream drained late).
    std::shared_ptr<Stamps> stamps = stamps_;
    return stream.enqueue_host("trace", [stamps, id] {
      std::lock_guard<std::mutex> lock(stamps->mu);
      stamps->reached.emplace_back(id, steady_seconds());
      return Status::Ok();
    });
  }

  std::vector<std::pair<uint64_t, double>> take() override {
    std::lock_guard<std::mutex> lock(stamps_->mu);
    std::vector<std::pair<uint64_t, double>> out;
    out.swap(stamps_->reached);
    return out;
  }

 private:
  struct Stamps {
    std::mutex mu;
    std::vector<std::pair<uint64_t, double>> reached;
  };
  void stamp(uint64_t id) {
    std::lock_guard<std::mutex> lock(stamps_->mu);
    stamps_->reached.emplace_back(id, steady_seconds());
  }
  std::shared_ptr<Stamps> stamps_ = std::make_shared<Stamps>();
};

}  // namespace

StatusOr<std::unique_ptr<StreamClock>> create_stream_clock(Device& device) {
  if (device.kind() == DeviceKind::kCuda) return create_cuda_stream_clock(device);
  return std::unique_ptr<StreamClock>(new CpuStreamClock());
}

}  // namespace zdp
