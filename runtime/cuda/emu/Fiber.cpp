//===- Fiber.cpp - Stackful fibers: stacks and context switches -----------===//
//
// Part of mtc. See Fiber.h.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/emu/Fiber.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>

#if defined(__x86_64__) && !defined(MTC_EMU_FIBER_UCONTEXT)
#define MTC_EMU_FIBER_ASM 1
#else
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define MTC_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MTC_EMU_ASAN 1
#endif
#endif
#ifdef MTC_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace mtc::emu {

struct Fiber::Impl {
#ifdef MTC_EMU_FIBER_ASM
  void *sp = nullptr; ///< saved stack pointer (see the switch below)
#else
  ucontext_t context;
#endif
  Entry entry = nullptr;
  void *arg = nullptr;
  // For AddressSanitizer: the stack this context runs on (for the main
  // context learned at its first switch) and its fake stack while suspended.
  const void *stackBottom = nullptr;
  size_t stackSize = 0;
  void *fakeStack = nullptr;
};

} // namespace mtc::emu

using mtc::emu::Fiber;

namespace {

/// The context being switched away from, for the one switched to: under ASan
/// it records the stack bounds of the main context, which nothing else knows.
__thread Fiber::Impl *switchingFrom = nullptr;

void beforeSwitch(Fiber::Impl &from, Fiber::Impl &to, bool exiting) {
  switchingFrom = &from;
#ifdef MTC_EMU_ASAN
  __sanitizer_start_switch_fiber(exiting ? nullptr : &from.fakeStack,
                                 to.stackBottom, to.stackSize);
#else
  (void)to;
  (void)exiting;
#endif
}

void afterSwitch(Fiber::Impl &self) {
#ifdef MTC_EMU_ASAN
  const void *fromBottom = nullptr;
  size_t fromSize = 0;
  __sanitizer_finish_switch_fiber(self.fakeStack, &fromBottom, &fromSize);
  self.fakeStack = nullptr;
  if (switchingFrom && !switchingFrom->stackBottom) {
    switchingFrom->stackBottom = fromBottom;
    switchingFrom->stackSize = fromSize;
  }
#else
  (void)self;
#endif
}

} // namespace

/// Where every fiber starts (called by the switch code on the new stack).
extern "C" __attribute__((visibility("hidden"), used)) void
mtc_emu_fiber_main(Fiber::Impl *self) {
  afterSwitch(*self);
  self->entry(self->arg);
  std::fprintf(stderr, "cuda-emu: a fiber's entry function returned\n");
  std::abort();
}

#ifdef MTC_EMU_FIBER_ASM
// mtc_emu_switch_context(void **saveSp, void *loadSp): pushes the
// callee-saved registers and the MXCSR / x87 control words (the System V
// ABI's callee-saved state) on the current stack, stores the stack pointer in
// *saveSp, loads loadSp and pops the same frame from there. A fresh fiber's
// stack holds such a frame whose return address is mtc_emu_fiber_start, which
// calls mtc_emu_fiber_main(r12) with the stack 16-byte aligned.
asm(R"(
  .text
  .p2align 4
  .globl mtc_emu_switch_context
  .hidden mtc_emu_switch_context
  .type mtc_emu_switch_context,@function
mtc_emu_switch_context:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size mtc_emu_switch_context,.-mtc_emu_switch_context

  .p2align 4
  .globl mtc_emu_fiber_start
  .hidden mtc_emu_fiber_start
  .type mtc_emu_fiber_start,@function
mtc_emu_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  call mtc_emu_fiber_main
  ud2
  .cfi_endproc
  .size mtc_emu_fiber_start,.-mtc_emu_fiber_start
)");

extern "C" void mtc_emu_switch_context(void **saveSp, void *loadSp);
extern "C" void mtc_emu_fiber_start();
#else
namespace {
/// makecontext passes int arguments: the Impl pointer in two halves.
void ucontextStart(unsigned hi, unsigned lo) {
  uintptr_t p = (static_cast<uintptr_t>(hi) << 32) | lo;
  mtc_emu_fiber_main(reinterpret_cast<Fiber::Impl *>(p));
}
} // namespace
#endif

namespace mtc::emu {

//===----------------------------------------------------------------------===//
// FiberStack
//===----------------------------------------------------------------------===//

FiberStack::FiberStack(size_t requested) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bytes = (requested + page - 1) / page * page;
  void *m =
      mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (m == MAP_FAILED) {
    std::fprintf(stderr, "cuda-emu: cannot map a %zu-byte fiber stack: %s\n",
                 bytes, std::strerror(errno));
    std::abort();
  }
  mapping = static_cast<char *>(m);
  if (mprotect(mapping, page, PROT_NONE) != 0) {
    std::fprintf(stderr, "cuda-emu: cannot protect a fiber's guard page: %s\n",
                 std::strerror(errno));
    std::abort();
  }
  base = mapping + page;
}

FiberStack::FiberStack(FiberStack &&other) noexcept
    : mapping(std::exchange(other.mapping, nullptr)),
      base(std::exchange(other.base, nullptr)),
      bytes(std::exchange(other.bytes, 0)) {}

FiberStack &FiberStack::operator=(FiberStack &&other) noexcept {
  std::swap(mapping, other.mapping);
  std::swap(base, other.base);
  std::swap(bytes, other.bytes);
  return *this;
}

FiberStack::~FiberStack() {
  if (mapping)
    munmap(mapping, static_cast<size_t>(base - mapping) + bytes);
}

void FiberStack::unpoison() {
#ifdef MTC_EMU_ASAN
  if (base)
    __asan_unpoison_memory_region(base, bytes);
#endif
}

//===----------------------------------------------------------------------===//
// Fiber
//===----------------------------------------------------------------------===//

Fiber::Fiber() : impl(std::make_unique<Impl>()) {}
Fiber::~Fiber() = default;

void Fiber::prepare(FiberStack &stack, Entry entry, void *arg) {
  impl->entry = entry;
  impl->arg = arg;
  impl->stackBottom = stack.bottom();
  impl->stackSize = stack.size();
  impl->fakeStack = nullptr;
#ifdef MTC_EMU_FIBER_ASM
  // The frame mtc_emu_switch_context pops (see above), at the 16-byte
  // aligned top of the stack.
  auto top = reinterpret_cast<uintptr_t>(stack.bottom() + stack.size());
  top &= ~static_cast<uintptr_t>(15);
  auto *frame = reinterpret_cast<uint64_t *>(top - 64);
  uint32_t mxcsr = __builtin_ia32_stmxcsr();
  uint16_t fpucw;
  asm volatile("fnstcw %0" : "=m"(fpucw));
  frame[0] = mxcsr | (static_cast<uint64_t>(fpucw) << 32);
  frame[1] = 0;                                      // r15
  frame[2] = 0;                                      // r14
  frame[3] = 0;                                      // r13
  frame[4] = reinterpret_cast<uint64_t>(impl.get()); // r12
  frame[5] = 0;                                      // rbx
  frame[6] = 0;                                      // rbp: ends backtraces
  frame[7] = reinterpret_cast<uint64_t>(&mtc_emu_fiber_start); // return
  impl->sp = frame;
#else
  getcontext(&impl->context);
  impl->context.uc_stack.ss_sp = stack.bottom();
  impl->context.uc_stack.ss_size = stack.size();
  impl->context.uc_link = nullptr;
  auto p = reinterpret_cast<uintptr_t>(impl.get());
  makecontext(&impl->context, reinterpret_cast<void (*)()>(&ucontextStart), 2,
              static_cast<unsigned>(p >> 32), static_cast<unsigned>(p));
#endif
}

void Fiber::switchTo(Fiber &from, Fiber &to) {
  beforeSwitch(*from.impl, *to.impl, /*exiting=*/false);
#ifdef MTC_EMU_FIBER_ASM
  mtc_emu_switch_context(&from.impl->sp, to.impl->sp);
#else
  swapcontext(&from.impl->context, &to.impl->context);
#endif
  afterSwitch(*from.impl);
}

void Fiber::exit(Fiber &from, Fiber &to) {
  beforeSwitch(*from.impl, *to.impl, /*exiting=*/true);
#ifdef MTC_EMU_FIBER_ASM
  mtc_emu_switch_context(&from.impl->sp, to.impl->sp);
#else
  swapcontext(&from.impl->context, &to.impl->context);
#endif
  __builtin_unreachable();
}

} // namespace mtc::emu
