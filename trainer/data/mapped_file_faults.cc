// The mapped token files and the SIGBUS handler that names one (mapped_file_faults.h).
#include "trainer/data/mapped_file_faults.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace zdp::trainer {
namespace {

// A slot the handler reads without a lock: `begin` 0 is a free slot; the message is
// published before `begin`, and `begin` is withdrawn before the message is freed.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<const char*> message{nullptr};
  std::atomic<size_t> length{0};
};

struct Registry {
  std::mutex mutex;
  std::unique_ptr<Slot[]> slots{new Slot[kMaxMappedFiles]};  // 4 MiB, made at the first mapping
  std::unordered_map<uintptr_t, size_t> slot_of;            // begin -> its slot
  size_t next = 0;                                           // where the search for a free slot starts
  std::string who = "dp-train";                              // report_mapped_file_faults' label
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: a handler may read it at exit
  return *r;
}
std::atomic<Slot*> g_slots{nullptr};  // what the handler reads (null before any mapping)

void on_sigbus(int sig, siginfo_t* info, void*) {
  const auto at = reinterpret_cast<uintptr_t>(info != nullptr ? info->si_addr : nullptr);
  Slot* table = g_slots.load(std::memory_order_acquire);
  for (size_t i = 0; table != nullptr && i < kMaxMappedFiles && at != 0; ++i) {
    const uintptr_t begin = table[i].begin.load(std::memory_order_acquire);
    if (begin != 0 && at >= begin && at < table[i].end.load(std::memory_order_acquire)) {
      // write(2) is async-signal-safe; the text was formatted when the file was mapped, and
      // the byte that faulted (the mapping starts at the file's first byte) is formatted
      // here by hand (snprintf is not safe in a handler).
      const char* message = table[i].message.load(std::memory_order_acquire);
      if (message != nullptr) {
        char tail[64] = "; the read at byte ";
        size_t n = std::strlen(tail);
        char digits[24];
        size_t d = 0;
        for (uintptr_t v = at - begin; d == 0 || v != 0; v /= 10) digits[d++] = static_cast<char>('0' + v % 10);
        while (d > 0) tail[n++] = digits[--d];
        tail[n++] = ')';
        tail[n++] = '\n';
        ssize_t written = ::write(STDERR_FILENO, message, table[i].length.load());
        written = ::write(STDERR_FILENO, tail, n);
        (void)written;
      }
      break;
    }
  }
  // The default action, now: the rank dies of the signal, as it would have.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

}  // namespace

void remember_mapping(const void* begin, size_t bytes, const std::string& path) {
  if (begin == nullptr || bytes == 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  g_slots.store(r.slots.get(), std::memory_order_release);
  for (size_t k = 0; k < kMaxMappedFiles; ++k) {
    const size_t i = (r.next + k) % kMaxMappedFiles;
    Slot& slot = r.slots[i];
    if (slot.begin.load() != 0) continue;
    // Completed by the handler: "; the read at byte N)\n".
    const std::string text = r.who + ": token file '" + path +
                             "' became shorter while it was read (it is memory-mapped: something truncated or "
                             "rewrote it in place; write a new file and rename it over the old one, as dp-data "
                             "does";
    char* message = new char[text.size()];
    std::memcpy(message, text.data(), text.size());
    delete[] slot.message.exchange(message, std::memory_order_acq_rel);
    slot.length.store(text.size());
    slot.end.store(reinterpret_cast<uintptr_t>(begin) + bytes, std::memory_order_release);
    slot.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_release);
    r.slot_of[reinterpret_cast<uintptr_t>(begin)] = i;
    r.next = i + 1;
    return;
  }
}

void forget_mapping(const void* begin) {
  if (begin == nullptr) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.slot_of.find(reinterpret_cast<uintptr_t>(begin));
  if (it == r.slot_of.end()) return;
  // The message stays until the slot is reused: a handler may be reading it.
  r.slots[it->second].begin.store(0, std::memory_order_release);
  r.slot_of.erase(it);
}

void report_mapped_file_faults(const std::string& who) {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.who = who;
  }
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, nullptr);
  });
}

}  // namespace zdp::trainer
