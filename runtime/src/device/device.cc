// Device-independent parts of devices: byte accounting and the owning buffer.
#include "zdp/device.h"

#include "zdp/dtype.h"  // format_bytes
#include "zdp/log.h"

namespace zdp {

const char* to_string(MemCategory category) {
  switch (category) {
    case MemCategory::kParams: return "params";
    case MemCategory::kGrads: return "grads";
    case MemCategory::kOptimizer: return "optimizer";
    case MemCategory::kBuckets: return "buckets";
    case MemCategory::kWorkspace: return "workspace";
    case MemCategory::kOther: return "other";
  }
  return "?";
}

const char* to_string(MemSpace space) {
  switch (space) {
    case MemSpace::kDevice: return "device";
    case MemSpace::kPinnedHost: return "pinned-host";
  }
  return "?";
}

void MemoryAccounting::on_alloc(MemCategory category, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryCounters& c = categories_[static_cast<size_t>(category)];
  c.current_bytes += bytes;
  if (c.current_bytes > c.peak_bytes) c.peak_bytes = c.current_bytes;
  total_.current_bytes += bytes;
  if (total_.current_bytes > total_.peak_bytes) total_.peak_bytes = total_.current_bytes;
}

void MemoryAccounting::on_free(MemCategory category, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  categories_[static_cast<size_t>(category)].current_bytes -= bytes;
  total_.current_bytes -= bytes;
}

MemoryCounters MemoryAccounting::category(MemCategory category) const {
  std::lock_guard<std::mutex> lock(mu_);
  return categories_[static_cast<size_t>(category)];
}

MemoryCounters MemoryAccounting::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

void MemoryAccounting::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  for (MemoryCounters& c : categories_) c.peak_bytes = c.current_bytes;
  total_.peak_bytes = total_.current_bytes;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    device_alive_ = std::move(other.device_alive_);
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    category_ = other.category_;
    space_ = other.space_;
    other.device_ = nullptr;
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::DeviceBuffer(Device* device, void* ptr, int64_t bytes, MemCategory category, MemSpace space)
    : device_(device), device_alive_(device->alive_), ptr_(ptr), bytes_(bytes), category_(category), space_(space) {}

void DeviceBuffer::reset() {
  if (device_ != nullptr && ptr_ != nullptr) {
    if (device_alive_.expired()) {
      // Its Device (Context) is gone: freeing through it read freed memory. Leaked, said.
      ZDP_LOG(kError) << "a DeviceBuffer of " << format_bytes(bytes_) << " (" << to_string(category_)
                      << ") outlived its Device (its Context): its memory is leaked; destroy buffers before the "
                         "Context they came from";
    } else {
      device_->release(ptr_, bytes_, category_, space_);
    }
  }
  device_ = nullptr;
  device_alive_.reset();
  ptr_ = nullptr;
  bytes_ = 0;
}

StatusOr<DeviceBuffer> Device::allocate(int64_t bytes, MemCategory category, MemSpace space) {
  if (bytes < 0) {
    return Status(StatusCode::kInvalidArgument,
                  name() + ": allocate of a negative size (" + std::to_string(bytes) + " bytes) for " + to_string(category));
  }
  if (bytes == 0) return DeviceBuffer(this, nullptr, 0, category, space);
  StatusOr<void*> ptr = raw_allocate(bytes, space);
  if (!ptr.ok()) {
    const MemoryCounters in_use = memory(space).total();
    return ptr.status().with_context(name() + ": allocating " + format_bytes(bytes) + " of " + to_string(space) +
                                     " memory for " + to_string(category) + " (" + format_bytes(in_use.current_bytes) +
                                     " already allocated by zdp)");
  }
  memory(space).on_alloc(category, bytes);
  return DeviceBuffer(this, *ptr, bytes, category, space);
}

void Device::release(void* ptr, int64_t bytes, MemCategory category, MemSpace space) {
  raw_free(ptr, space);
  memory(space).on_free(category, bytes);
}

}  // namespace zdp
