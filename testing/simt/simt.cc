// The fiber scheduler behind testing/simt/simt.h. simt.h's macros are in force here too
// (the test target force-includes it); this file uses none of the names they replace.
#include "testing/simt/simt.h"

#include <sys/mman.h>

#include "core/internal/address_sanitizer.h"
#include "testing/simt/fiber_context.h"
#if defined(ZDP_ADDRESS_SANITIZER)
#include <sanitizer/common_interface_defs.h>  // the fiber protocol; asan_interface.h comes with the above
#endif

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <vector>

namespace zdp_emu {
namespace {

constexpr size_t kStackBytes = 128 << 10;  // the kernels keep a few hundred bytes a thread
constexpr int kMaxThreads = 1024;
constexpr size_t kDefaultSharedBytes = 48 << 10;  // without cudaFuncSetAttribute
constexpr int kSms = 132;

enum class Wait { kNone, kBlock, kWarp };

struct Fiber {
  FiberContext context;
  bool done = false;
  Wait wait = Wait::kNone;
  uint64_t generation = 0;  // of the barrier it waits at
};

struct Warp {
  uint64_t generation = 0;
  int arrived = 0;
  int live = 0;
  std::array<uint64_t, 32> slots{};
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<Position> positions;
  std::vector<Warp> warps;
  FiberContext scheduler;
  int current = -1;
  int live = 0;
  uint64_t generation = 0;
  int arrived = 0;
  const std::function<void()>* body = nullptr;
};

// A fiber's stack, with an inaccessible page below it: a kernel that outgrows the stack
// (a large local array) crashes at once instead of overwriting its neighbour's.
class FiberStack {
 public:
  FiberStack() {
    base_ = static_cast<char*>(mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED || mprotect(base_, kGuardBytes, PROT_NONE) != 0) {
      std::fprintf(stderr, "simt emulation: cannot map a %zu-byte fiber stack\n", kStackBytes);
      std::abort();  // a test helper with no way to go on
    }
  }
  ~FiberStack() {
    destroy_sanitizer_fiber(sanitizer_fiber);
    munmap(base_, kStackBytes + kGuardBytes);
  }
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  char* top_region() const { return base_ + kGuardBytes; }  // kStackBytes usable
  // Under ASan with detect_stack_use_after_return, the fake stack of the fibers that run
  // here, kept from one fiber to the next: made and destroyed per fiber, it cost an mmap
  // and a munmap per emulated thread (9 of 10 CPU seconds in the kernel).
  void* fake_stack = nullptr;
  // Under TSan, the fiber the fibers on this stack run as, one after another (each returns
  // from everything it called before its last switch); made anew after a deadlock dropped
  // one mid-kernel. Kept, not made per emulated thread: a TSan fiber is a TSan thread.
  void* sanitizer_fiber = create_sanitizer_fiber();
  void renew_sanitizer_fiber() {
    destroy_sanitizer_fiber(sanitizer_fiber);
    sanitizer_fiber = create_sanitizer_fiber();
  }

 private:
  static constexpr size_t kGuardBytes = 4096;
  char* base_ = nullptr;
};

Block* g_block = nullptr;
std::vector<std::unique_ptr<FiberStack>> g_stacks;
// The launch's dynamic shared memory: 16-byte aligned (vector loads), with 16 bytes of
// slack past it so that a read past the end is not a crash; under ASan the slack is
// poisoned, so such a read is reported. Allocated anew at every launch.
struct AlignedDelete {
  void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t{16}); }
};
std::unique_ptr<unsigned char[], AlignedDelete> g_dynamic_shared;
size_t g_dynamic_shared_bytes = 0;
std::vector<std::pair<void*, size_t>> g_static_shared;  // register_shared
std::map<const void*, int> g_max_dynamic_shared;
int g_optin = 232448;  // 227 KiB: sm_90's opt-in maximum a block
cudaError_t g_last_error = cudaSuccess;
std::string g_fault;
int64_t g_launches = 0;
Schedule g_schedule = Schedule::kAlternate;

// Under AddressSanitizer every switch between stacks is announced, so that ASan checks
// each fiber's accesses against that fiber's stack (with a fake stack per fiber stack for
// use-after-return) rather than the OS thread's (sanitizer/common_interface_defs.h: the
// fiber protocol). Without ASan these are nothing. With swapcontext and a fake stack made
// per fiber, the emulation under ASan ran for more than 16 minutes; as here, 43 s.
const void* g_scheduler_stack = nullptr;  // the OS thread's stack, as ASan saw it
size_t g_scheduler_stack_bytes = 0;
#if defined(ZDP_ADDRESS_SANITIZER)
void start_switch(void** fake_stack_save, const void* bottom, size_t bytes) {
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, bytes);
}
void finish_switch(void* fake_stack_save, const void** bottom_old, size_t* bytes_old) {
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, bytes_old);
}
// A stack whose fibers were dropped mid-kernel (a deadlock) keeps its frames' redzones
// poisoned; the next fibers on it start clean.
void unpoison_stack(const void* bottom, size_t bytes) { ASAN_UNPOISON_MEMORY_REGION(bottom, bytes); }
#else
void start_switch(void**, const void*, size_t) {}
void finish_switch(void*, const void**, size_t*) {}
void unpoison_stack(const void*, size_t) {}
#endif

// A switch that comes back: from `from` to `to`, whose stack is [bottom, bottom + bytes),
// keeping the running fiber's fake stack for when it is resumed.
void switch_and_return(FiberContext* from, FiberContext* to, const void* bottom, size_t bytes) {
  void* fake_stack = nullptr;
  start_switch(&fake_stack, bottom, bytes);
  switch_fiber_context(from, to);
  finish_switch(fake_stack, nullptr, nullptr);
}

void fault(const std::string& what) {
  if (g_fault.empty()) g_fault = what;
}

int warp_of(int thread) { return thread / 32; }

void release_block_if_complete(Block& b) {
  if (b.arrived > 0 && b.arrived == b.live) {
    ++b.generation;
    b.arrived = 0;
  }
}

void release_warp_if_complete(Warp& w) {
  if (w.arrived > 0 && w.arrived == w.live) {
    ++w.generation;
    w.arrived = 0;
  }
}

// A fiber gives the OS thread back to the scheduler until the scheduler resumes it.
void yield(Block& b) {
  switch_and_return(&b.fibers[static_cast<size_t>(b.current)].context, &b.scheduler, g_scheduler_stack,
                    g_scheduler_stack_bytes);
}

// One emulated thread, from its kernel's start to its end.
void run_thread() {
  Block& b = *g_block;
  (*b.body)();
  const int me = b.current;
  b.fibers[static_cast<size_t>(me)].done = true;
  --b.live;
  Warp& w = b.warps[static_cast<size_t>(warp_of(me))];
  --w.live;
  // A barrier that waited only for this thread is complete (exited threads count as
  // arrived, as on the GPU).
  release_block_if_complete(b);
  release_warp_if_complete(w);
}

FiberContext g_finished;  // where a finished fiber's last switch saves what is never resumed

// A fiber's first frame: it has no locals of its own, so that by the final switch every
// instrumented frame on the stack has returned (under ASan, with its redzones cleared;
// under TSan it pushes no frame of its own, and every other has been popped).
[[noreturn]] ZDP_SIMT_NOT_TSAN_INSTRUMENTED void fiber_entry() {
  // First entry from the scheduler: ASan tells where the stack it left is.
  finish_switch(g_stacks[static_cast<size_t>(g_block->current)]->fake_stack, &g_scheduler_stack,
                &g_scheduler_stack_bytes);
  run_thread();
  // The fake stack stays with the stack, for the next fiber on it (b.current is still
  // this fiber: only the scheduler changes it).
  start_switch(&g_stacks[static_cast<size_t>(g_block->current)]->fake_stack, g_scheduler_stack,
               g_scheduler_stack_bytes);
  switch_fiber_context(&g_finished, &g_block->scheduler);
  __builtin_unreachable();
}

void warp_barrier(Block& b) {
  Fiber& f = b.fibers[static_cast<size_t>(b.current)];
  Warp& w = b.warps[static_cast<size_t>(warp_of(b.current))];
  ++w.arrived;
  f.wait = Wait::kWarp;
  f.generation = w.generation;
  release_warp_if_complete(w);
  yield(b);
}

bool runnable(const Block& b, int i) {
  const Fiber& f = b.fibers[static_cast<size_t>(i)];
  if (f.done) return false;
  if (f.wait == Wait::kBlock) return f.generation != b.generation;
  if (f.wait == Wait::kWarp) return f.generation != b.warps[static_cast<size_t>(warp_of(i))].generation;
  return true;
}

void run_block(Block& b, const dim3& grid, const dim3& block, const uint3& index, bool reverse) {
  const int n = static_cast<int>(block.x * block.y * block.z);
  b.fibers.assign(static_cast<size_t>(n), Fiber{});
  b.positions.resize(static_cast<size_t>(n));
  b.warps.assign(static_cast<size_t>((n + 31) / 32), Warp{});
  b.live = n;
  b.generation = 0;
  b.arrived = 0;
  for (int i = 0; i < n; ++i) {
    const unsigned u = static_cast<unsigned>(i);
    b.positions[static_cast<size_t>(i)] =
        Position{make_uint3(u % block.x, (u / block.x) % block.y, u / (block.x * block.y)), index, block, grid};
    ++b.warps[static_cast<size_t>(warp_of(i))].live;
    make_fiber_context(&b.fibers[static_cast<size_t>(i)].context, g_stacks[static_cast<size_t>(i)]->top_region(),
                       kStackBytes, fiber_entry);
    b.fibers[static_cast<size_t>(i)].context.sanitizer_fiber = g_stacks[static_cast<size_t>(i)]->sanitizer_fiber;
  }
  // Poisoned at every block: a read before any thread wrote it is a NaN (or -1), not
  // the last block's value.
  std::memset(g_dynamic_shared.get(), 0xff, g_dynamic_shared_bytes);
  for (const auto& [variable, bytes] : g_static_shared) std::memset(variable, 0xff, bytes);
  // Warp by warp, each as far as it goes (to a block barrier, or its end) before the
  // next starts: the most skew between warps, so that a warp that runs ahead into the
  // next use of shared memory overwrites what a later warp has not read yet, where a
  // barrier is missing. Within a warp, lane by lane to the next warp barrier.
  const int warps = (n + 31) / 32;
  while (true) {
    bool any_left = false, progressed = false;
    for (int wk = 0; wk < warps; ++wk) {
      const int w = reverse ? warps - 1 - wk : wk;
      for (bool again = true; again;) {
        again = false;
        for (int l = 0; l < 32; ++l) {
          const int i = w * 32 + (reverse ? 31 - l : l);
          if (i >= n || b.fibers[static_cast<size_t>(i)].done) continue;
          any_left = true;
          if (!runnable(b, i)) continue;
          b.fibers[static_cast<size_t>(i)].wait = Wait::kNone;
          b.current = i;
          switch_and_return(&b.scheduler, &b.fibers[static_cast<size_t>(i)].context,
                            g_stacks[static_cast<size_t>(i)]->top_region(), kStackBytes);
          progressed = again = true;
        }
      }
    }
    if (!any_left) return;
    if (!progressed) {
      int waiting_block = 0, waiting_warp = 0;
      for (const Fiber& f : b.fibers) {
        if (!f.done) (f.wait == Wait::kBlock ? waiting_block : waiting_warp) += 1;
      }
      fault("deadlock in block (" + std::to_string(index.x) + "," + std::to_string(index.y) + "," +
            std::to_string(index.z) + "): " + std::to_string(waiting_block) + " thread(s) wait at __syncthreads and " +
            std::to_string(waiting_warp) + " at a warp shuffle that the others never reach");
      for (int i = 0; i < n; ++i) {
        unpoison_stack(g_stacks[static_cast<size_t>(i)]->top_region(), kStackBytes);
        if (!b.fibers[static_cast<size_t>(i)].done) g_stacks[static_cast<size_t>(i)]->renew_sanitizer_fiber();
      }
      return;  // the suspended fibers are dropped; their stacks are reused
    }
  }
}

}  // namespace

const Position& position() { return g_block->positions[static_cast<size_t>(g_block->current)]; }

int lane() { return g_block->current % 32; }

void check_full_warp(unsigned mask, int width, const char* what) {
  if (mask != 0xffffffffu || width != 32) fault(std::string(what) + ": only full-warp shuffles are emulated");
  const Block& b = *g_block;
  if (b.positions[static_cast<size_t>(b.current)].block_dim.x % 32 != 0) {
    fault(std::string(what) + " in a block whose x size is not a multiple of 32");
  }
}

void sync_block() {
  Block& b = *g_block;
  Fiber& f = b.fibers[static_cast<size_t>(b.current)];
  ++b.arrived;
  f.wait = Wait::kBlock;
  f.generation = b.generation;
  release_block_if_complete(b);
  yield(b);
}

uint64_t warp_exchange(uint64_t mine, int source) {
  Block& b = *g_block;
  const int me = b.current;
  Warp& w = b.warps[static_cast<size_t>(warp_of(me))];
  w.slots[static_cast<size_t>(me % 32)] = mine;
  warp_barrier(b);
  uint64_t got = mine;
  if (source >= 0 && source < 32) {
    const int from = warp_of(me) * 32 + source;
    if (from >= static_cast<int>(b.fibers.size()) || b.fibers[static_cast<size_t>(from)].done) {
      fault("a warp shuffle read lane " + std::to_string(source) + ", which has exited");
    } else {
      got = w.slots[static_cast<size_t>(source)];
    }
  }
  warp_barrier(b);  // every lane has read before the slots are written again
  return got;
}

bool warp_any(bool predicate) {
  Block& b = *g_block;
  const int me = b.current;
  Warp& w = b.warps[static_cast<size_t>(warp_of(me))];
  w.slots[static_cast<size_t>(me % 32)] = predicate ? 1 : 0;
  warp_barrier(b);
  bool any = false;
  const int first = warp_of(me) * 32;
  for (int l = 0; l < 32 && first + l < static_cast<int>(b.fibers.size()); ++l) {
    if (!b.fibers[static_cast<size_t>(first + l)].done && w.slots[static_cast<size_t>(l)] != 0) any = true;
  }
  warp_barrier(b);
  return any;
}

void* dynamic_shared() { return g_dynamic_shared.get(); }

bool register_shared(void* variable, size_t bytes) {
  g_static_shared.emplace_back(variable, bytes);
  return true;
}

bool launch_configuration_ok(const void* kernel, dim3 grid, dim3 block, size_t dynamic_shared_bytes) {
  const int64_t threads = int64_t{block.x} * block.y * block.z;
  // CUDA's limits per dimension too: a grid.y or grid.z past 65535 (a column sum's chunks
  // uncapped), a block.z past 64, a block.x or .y past 1024 fail the launch on a GPU.
  if (threads < 1 || threads > kMaxThreads || grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.y > 65535 ||
      grid.z > 65535 || block.x > 1024 || block.y > 1024 || block.z > 64) {
    g_last_error = cudaErrorInvalidConfiguration;
    return false;
  }
  const auto allowed = g_max_dynamic_shared.find(kernel);
  const size_t limit = allowed == g_max_dynamic_shared.end() ? kDefaultSharedBytes : static_cast<size_t>(allowed->second);
  if (dynamic_shared_bytes > limit) {
    g_last_error = cudaErrorInvalidValue;  // what CUDA says to a launch past the kernel's allowance
    return false;
  }
  return true;
}

void run_grid(dim3 grid, dim3 block, size_t dynamic_shared_bytes, const std::function<void()>& body) {
  ++g_launches;
  g_fault.clear();
  const int64_t threads = int64_t{block.x} * block.y * block.z;
  while (g_stacks.size() < static_cast<size_t>(threads)) g_stacks.push_back(std::make_unique<FiberStack>());
  g_dynamic_shared.reset(static_cast<unsigned char*>(::operator new[](dynamic_shared_bytes + 16, std::align_val_t{16})));
  g_dynamic_shared_bytes = dynamic_shared_bytes;
  zdp::poison_unused_bytes(g_dynamic_shared.get() + dynamic_shared_bytes, 16);
  Block b;
  b.body = &body;
  b.scheduler.sanitizer_fiber = sanitizer_fiber_of_this_thread();  // whichever OS thread runs the grid
  g_block = &b;
  // Blocks one after another: in index order on even launches, in reverse on odd ones
  // (kAlternate), so a kernel whose blocks depend on each other's order, which CUDA never
  // promises, gives different results from launch to launch.
  const int64_t blocks = int64_t{grid.x} * grid.y * grid.z;
  const bool reverse_blocks = g_schedule == Schedule::kReverse || (g_schedule == Schedule::kAlternate && g_launches % 2 == 1);
  for (int64_t k = 0; k < blocks && g_fault.empty(); ++k) {
    const int64_t linear = reverse_blocks ? blocks - 1 - k : k;
    const auto x = static_cast<unsigned>(linear % grid.x);
    const auto y = static_cast<unsigned>(linear / grid.x % grid.y);
    const auto z = static_cast<unsigned>(linear / (int64_t{grid.x} * grid.y));
    const bool reverse = g_schedule == Schedule::kReverse ||
                         (g_schedule == Schedule::kAlternate && (linear + g_launches) % 2 == 1);
    run_block(b, grid, block, make_uint3(x, y, z), reverse);
  }
  g_block = nullptr;
  if (!g_fault.empty()) {  // what the GPU would report as a failed kernel; the why on stderr
    std::fprintf(stderr, "simt emulation: %s\n", g_fault.c_str());
    g_last_error = cudaErrorLaunchFailure;
  }
}

cudaError_t get_device(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t device_get_attribute(int* value, cudaDeviceAttr attribute, int) {
  switch (attribute) {
    case cudaDevAttrMultiProcessorCount: *value = kSms; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = g_optin; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = kMaxThreads; return cudaSuccess;
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t func_set_attribute(const void* kernel, cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > g_optin) {
    return cudaErrorInvalidValue;
  }
  g_max_dynamic_shared[kernel] = value;
  return cudaSuccess;
}

cudaError_t get_last_error() {
  const cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  return e;
}

void set_schedule(Schedule schedule) { g_schedule = schedule; }

void set_shared_memory_optin(int bytes) { g_optin = bytes; }
int shared_memory_optin() { return g_optin; }
std::string last_launch_fault() { return g_fault; }
int64_t launches() { return g_launches; }

}  // namespace zdp_emu
