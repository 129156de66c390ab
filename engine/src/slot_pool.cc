// SlotPool: lending and reuse of equal-sized staging buffers (see slot_pool.h).
#include "engine/src/slot_pool.h"

#include "zdp/dtype.h"  // format_bytes
#include "zdp/log.h"

namespace zdp {

Status SlotPool::init(Device& device, std::string name, int64_t bytes, int count, MemCategory category,
                      std::string over_plan) {
  device_ = &device;
  name_ = std::move(name);
  over_plan_ = std::move(over_plan);
  bytes_ = bytes;
  category_ = category;
  slots_.clear();
  planned_ = count;
  warned_ = false;
  for (int i = 0; i < count; ++i) ZDP_RETURN_IF_ERROR(add_slot());
  return Status::Ok();
}

Status SlotPool::add_slot() {
  Slot slot;
  StatusOr<DeviceBuffer> buffer = device_->allocate(bytes_, category_);
  if (!buffer.ok()) return buffer.status().with_context(name_ + " buffer " + std::to_string(slots_.size()));
  slot.buffer = std::move(*buffer);
  ZDP_ASSIGN_OR_RETURN(slot.free, device_->create_event());
  slots_.push_back(std::move(slot));
  return Status::Ok();
}

int SlotPool::find(int key) const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].key == key) return static_cast<int>(i);
  }
  return -1;
}

StatusOr<int> SlotPool::acquire(int key) {
  int best = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.held) continue;
    if (best < 0 || s.released_at < slots_[static_cast<size_t>(best)].released_at) best = static_cast<int>(i);
  }
  if (best < 0) {
    ZDP_RETURN_IF_ERROR(add_slot());
    best = size() - 1;
    if (best >= planned_ && !warned_) {
      // Memory the plan (dp-launch plan, the start-up table) does not show, and on every
      // step: said once. The pools are planned for gradients that become ready, and layer
      // groups used, in reverse registration order in backward, a few at a time: a trainer
      // that holds the gradient views of a whole block before the first grad_ready (as
      // dp-train's gpt does) holds several staging groups at once when small buckets cut
      // the block into several, with parameters registered in forward order.
      warned_ = true;
      ZDP_LOG(kWarn) << name_ << ": all " << best << " buffers held, " << planned_
                     << " planned; added one (" << format_bytes(bytes_) << ", more than the memory plan): "
                     << (!over_plan_.empty()
                             ? over_plan_
                             : "gradients become ready, or layer groups are used, in another order than the reverse "
                               "of registration (register parameters in forward order), or the trainer holds the "
                               "gradient views of more buckets at once than that (a block's views taken before its "
                               "first grad_ready, with buckets smaller than the block: raise zero.bucket_mb)")
                     << "; Engine::memory() counts what was added";
    } else {
      ZDP_LOG(kDebug) << name_ << ": all " << best << " buffers held; added one (" << format_bytes(bytes_) << ")";
    }
  }
  for (Slot& other : slots_) {
    if (!other.held && other.key == key) other.key = -1;  // keys stay unique: find() is exact
  }
  Slot& s = slots_[static_cast<size_t>(best)];
  s.key = key;
  s.held = true;
  return best;
}

void SlotPool::release(int slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  s.held = false;
  s.released_at = ++clock_;
}

void SlotPool::forget_released() {
  for (Slot& s : slots_) {
    if (!s.held) s.key = -1;
  }
}

int SlotPool::held_count() const {
  int n = 0;
  for (const Slot& s : slots_) n += s.held ? 1 : 0;
  return n;
}

}  // namespace zdp
