// See fiber_context.h. The x86-64 switch follows the System V ABI: rbx, rbp and r12-r15 are
// the callee-saved registers, and MXCSR's control bits and the x87 control word are
// callee-saved too (a kernel's rounding mode must not leak into the scheduler).
#include "testing/simt/fiber_context.h"

#include <cstdint>
#include <cstring>

#if defined(ZDP_SIMT_THREAD_SANITIZER)
#include <sanitizer/tsan_interface.h>
#endif

namespace zdp_emu {

#if defined(ZDP_SIMT_THREAD_SANITIZER)
void* sanitizer_fiber_of_this_thread() { return __tsan_get_current_fiber(); }
void* create_sanitizer_fiber() { return __tsan_create_fiber(0); }
void destroy_sanitizer_fiber(void* fiber) { __tsan_destroy_fiber(fiber); }
// Announced immediately before the switch, as the protocol asks; flags 0: the switch is
// a synchronisation (what the fiber left is visible to the one that runs next).
ZDP_SIMT_NOT_TSAN_INSTRUMENTED inline void announce_switch(const FiberContext* to) {
  __tsan_switch_to_fiber(to->sanitizer_fiber, 0);
}
#else
void* sanitizer_fiber_of_this_thread() { return nullptr; }
void* create_sanitizer_fiber() { return nullptr; }
void destroy_sanitizer_fiber(void*) {}
inline void announce_switch(const FiberContext*) {}
#endif

#if ZDP_SIMT_OWN_SWITCH

extern "C" void zdp_emu_switch_stack(void** save_stack_pointer, void* load_stack_pointer);

// Push the callee-saved registers and the two control words, save rsp, load the other
// stack's rsp and pop its saved state in reverse; `ret` then continues where that stack
// last called this (or, on a new stack, at its entry function: make_fiber_context).
__asm__(
    ".text\n"
    ".globl zdp_emu_switch_stack\n"
    ".type zdp_emu_switch_stack,@function\n"
    "zdp_emu_switch_stack:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  subq $8, %rsp\n"
    "  stmxcsr (%rsp)\n"
    "  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n"
    "  fldcw 4(%rsp)\n"
    "  addq $8, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size zdp_emu_switch_stack, .-zdp_emu_switch_stack\n");

void make_fiber_context(FiberContext* context, char* stack, size_t bytes, void (*entry)()) {
  // From the 16-byte aligned top down: a zero where a call's return address would be
  // (entry() is entered as if called: rsp + 8 aligned to 16, and a backtrace ends there),
  // entry() for the first switch's `ret`, six zeros for the callee-saved registers, and
  // this thread's control words (what a new thread starts with).
  const uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t{15};
  uint64_t* slot = reinterpret_cast<uint64_t*>(top);
  uint32_t mxcsr = 0;
  uint16_t x87 = 0;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  __asm__ volatile("fnstcw %0" : "=m"(x87));
  *--slot = 0;
  *--slot = reinterpret_cast<uint64_t>(entry);
  for (int i = 0; i < 6; ++i) *--slot = 0;
  uint64_t control = 0;
  std::memcpy(&control, &mxcsr, sizeof mxcsr);
  std::memcpy(reinterpret_cast<char*>(&control) + 4, &x87, sizeof x87);
  *--slot = control;
  context->stack_pointer = slot;
}

ZDP_SIMT_NOT_TSAN_INSTRUMENTED void switch_fiber_context(FiberContext* from, FiberContext* to) {
  announce_switch(to);
  zdp_emu_switch_stack(&from->stack_pointer, to->stack_pointer);
}

#else

void make_fiber_context(FiberContext* context, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&context->context);
  context->context.uc_stack.ss_sp = stack;
  context->context.uc_stack.ss_size = bytes;
  context->context.uc_link = nullptr;  // entry() never returns
  makecontext(&context->context, entry, 0);
}

ZDP_SIMT_NOT_TSAN_INSTRUMENTED void switch_fiber_context(FiberContext* from, FiberContext* to) {
  announce_switch(to);
  swapcontext(&from->context, &to->context);
}

#endif

}  // namespace zdp_emu
