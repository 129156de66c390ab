// Switching the OS thread between the SIMT emulation's fiber stacks (testing/simt/simt.cc).
// On x86-64 a switch of zdp's own: it saves the callee-saved registers, the SSE and x87
// control words and the stack pointer, and loads another's, about 20 instructions. glibc's
// swapcontext also saves and restores the signal mask, a system call at every switch (21
// of the emulation test's 49 CPU seconds; with this switch the test takes 11), and under
// ASan its interceptor also resets the target stack's shadow at every switch. Other
// architectures keep ucontext, and so does a build with -DZDP_SIMT_UCONTEXT (how that path
// is tried on x86-64).
//
// Under ThreadSanitizer every switch is announced first (sanitizer/tsan_interface.h, the
// fiber protocol): each context carries the TSan fiber it runs as, so that TSan keeps a
// shadow call stack and a clock per fiber instead of seeing one thread's stack jump. The
// switches synchronise (one OS thread runs the fibers one at a time, and the emulation's
// own barrier checks find what a GPU would race on), so TSan's reports are races between
// OS threads: ranks run as threads, the NCCL watchdog, the emulated streams' callers.
#pragma once

#include <cstddef>

#if defined(__x86_64__) && !defined(ZDP_SIMT_UCONTEXT)
#define ZDP_SIMT_OWN_SWITCH 1
#else
#define ZDP_SIMT_OWN_SWITCH 0
#endif

#if !ZDP_SIMT_OWN_SWITCH
#include <ucontext.h>
#endif

#if defined(__SANITIZE_THREAD__)
#define ZDP_SIMT_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ZDP_SIMT_THREAD_SANITIZER 1
#endif
#endif
// On the functions a fiber's last switch passes through, which never return: TSan pushes
// an instrumented function's frame at entry and pops it at return.
#if defined(ZDP_SIMT_THREAD_SANITIZER)
#define ZDP_SIMT_NOT_TSAN_INSTRUMENTED __attribute__((no_sanitize("thread")))
#else
#define ZDP_SIMT_NOT_TSAN_INSTRUMENTED
#endif

namespace zdp_emu {

struct FiberContext {
#if ZDP_SIMT_OWN_SWITCH
  void* stack_pointer = nullptr;  // where the switch pushed the saved registers
#else
  ucontext_t context;
#endif
  // Under TSan, the fiber this context runs as (sanitizer_fiber_of_this_thread() for the OS
  // thread's own; make_fiber_context does not set it); unused otherwise.
  void* sanitizer_fiber = nullptr;
};

// TSan's fiber for what runs now on this OS thread (nullptr without TSan).
void* sanitizer_fiber_of_this_thread();
// A new TSan fiber, for one fiber stack's contexts in turn, and its end (nothing without
// TSan). A fiber dropped mid-kernel leaves frames on its TSan shadow stack: destroy it and
// make another.
void* create_sanitizer_fiber();
void destroy_sanitizer_fiber(void* fiber);

// Makes `context` start entry() on the stack [stack, stack + bytes) at the next switch to
// it. entry() must never return: it ends by switching away for good.
void make_fiber_context(FiberContext* context, char* stack, size_t bytes, void (*entry)());

// Saves the running state in `from` and resumes `to`; returns when something switches
// back to `from`. Under TSan it tells TSan first that `to->sanitizer_fiber` runs next, and
// is itself not instrumented, so that a fiber's last switch (which never returns) leaves no
// frame behind on the shadow stack of the TSan fiber that runs the stack's next fiber.
void switch_fiber_context(FiberContext* from, FiberContext* to);

}  // namespace zdp_emu
