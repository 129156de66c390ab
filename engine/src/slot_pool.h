// Equal-sized device buffers lent to a key (a gradient group at stages 2-3, a layer group
// at stage 3), each with the event after which its last use ends. A released slot keeps
// its key and content until it is lent again (stage 3 finds a layer still gathered), and
// is lent again least recently released first. When every slot is held the pool grows by
// one buffer rather than deadlock (a trainer that holds more gradient groups at once than
// expected, or overlap off at stage 2): memory grows, visibly accounted, never a hang.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zdp/device.h"

namespace zdp {

class SlotPool {
 public:
  // `count` buffers of `bytes` accounted under `category`; `name` labels errors and logs.
  // `over_plan`, when given, says why this pool outgrows its plan and what to change (the
  // warning's generic reasons are the gradient pools').
  Status init(Device& device, std::string name, int64_t bytes, int count, MemCategory category,
              std::string over_plan = "");

  int size() const { return static_cast<int>(slots_.size()); }
  int64_t slot_bytes() const { return bytes_; }
  // The slot lent for `key` or still holding its content after release; -1 when none.
  int find(int key) const;
  // Lends a slot to `key`: the least recently released one (its old key and content are
  // dropped) or a new buffer; a released slot still keyed `key` loses its key. REQUIRES:
  // no held slot has `key`. The caller orders its first use of the slot after event(slot).
  StatusOr<int> acquire(int key);
  // Takes a released slot back (its content is still valid), e.g. a layer still gathered.
  void hold(int slot) { slots_[static_cast<size_t>(slot)].held = true; }
  // The caller has recorded event(slot) after the slot's last use.
  void release(int slot);
  // Every released slot's content is stale (e.g. parameters changed): keys are dropped.
  void forget_released();
  // Slots currently lent.
  int held_count() const;

  void* data(int slot) const { return slots_[static_cast<size_t>(slot)].buffer.data(); }
  Event& event(int slot) const { return *slots_[static_cast<size_t>(slot)].free; }
  int key(int slot) const { return slots_[static_cast<size_t>(slot)].key; }
  bool held(int slot) const { return slots_[static_cast<size_t>(slot)].held; }

 private:
  struct Slot {
    DeviceBuffer buffer;
    std::unique_ptr<Event> free;
    int key = -1;
    bool held = false;
    uint64_t released_at = 0;  // release order, for least-recently-released reuse
  };
  Status add_slot();

  Device* device_ = nullptr;
  std::string name_;
  std::string over_plan_;
  int64_t bytes_ = 0;
  MemCategory category_ = MemCategory::kBuckets;
  uint64_t clock_ = 0;
  std::vector<Slot> slots_;
  int planned_ = 0;     // init()'s count: what the memory plan counted
  bool warned_ = false; // growth past it said once
};

}  // namespace zdp
