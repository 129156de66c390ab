// Switching the OS thread between the SIMT emulation's fiber stacks (testing/simt/simt.cc).
// On x86-64 a switch of zdp's own: it saves the callee-saved registers, the SSE and x87
// control words and the stack pointer, and loads another's, about 20 instructions. glibc's
// swapcontext also saves and restores the signal mask, a system call at every switch (21
// of the emulation test's 49 CPU seconds; with this switch the test takes 11), and under
// ASan its interceptor also resets the target stack's shadow at every switch. Other
// architectures keep ucontext, and so does a build with -DZDP_SIMT_UCONTEXT (how that path
// is tried on x86-64).
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

namespace zdp_emu {

struct FiberContext {
#if ZDP_SIMT_OWN_SWITCH
  void* stack_pointer = nullptr;  // where the switch pushed the saved registers
#else
  ucontext_t context;
#endif
};

// Makes `context` start entry() on the stack [stack, stack + bytes) at the next switch to
// it. entry() must never return: it ends by switching away for good.
void make_fiber_context(FiberContext* context, char* stack, size_t bytes, void (*entry)());

// Saves the running state in `from` and resumes `to`; returns when something switches
// back to `from`.
void switch_fiber_context(FiberContext* from, FiberContext* to);

}  // namespace zdp_emu
