//===- Fiber.h - Stackful fibers for the CUDA emulator ----------*- C++ -*-===//
//
// Part of mtc. Every thread of an emulated block is a fiber: a stack and a
// saved stack pointer, switched to and from the OS thread that runs the block
// (the "main" context). On x86-64 a switch is a few instructions of
// hand-written assembly that save the callee-saved registers and the SSE and
// x87 control words; elsewhere (or with MTC_EMU_FIBER_UCONTEXT defined) it is
// POSIX swapcontext, which is about 20x slower because it also saves the
// signal mask with a system call.
//
// Under AddressSanitizer every switch is announced with
// __sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber, so that
// reports inside a kernel show the fiber's stack.
//
// Not thread-safe: a fiber is switched to only from the OS thread that
// prepared it.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_EMU_FIBER_H
#define MTC_RUNTIME_CUDA_EMU_FIBER_H

#include <cstddef>
#include <memory>

namespace mtc::emu {

/// A fiber's stack: `size` usable bytes above an inaccessible guard page, so
/// that an overflow faults instead of corrupting the stack below.
class FiberStack {
public:
  FiberStack() = default;
  /// Maps a stack of at least `bytes` (rounded up to pages). Aborts with a
  /// message if the memory cannot be mapped.
  explicit FiberStack(size_t bytes);
  FiberStack(FiberStack &&other) noexcept;
  FiberStack &operator=(FiberStack &&other) noexcept;
  FiberStack(const FiberStack &) = delete;
  FiberStack &operator=(const FiberStack &) = delete;
  ~FiberStack();

  /// Lowest usable address (just above the guard page).
  char *bottom() const { return base; }
  size_t size() const { return bytes; }

  /// Marks the whole stack addressable again for AddressSanitizer (after a
  /// fiber was abandoned mid-call, its frames' redzones stay poisoned).
  void unpoison();

private:
  char *mapping = nullptr; ///< guard page + stack
  char *base = nullptr;
  size_t bytes = 0;
};

/// A suspended execution context. A default-constructed Fiber stands for the
/// calling OS thread's own stack (the main context) until it is switched away
/// from; prepare() turns it into a fiber that starts at an entry function.
class Fiber {
public:
  using Entry = void (*)(void *arg);

  Fiber();
  ~Fiber();
  Fiber(const Fiber &) = delete;
  Fiber &operator=(const Fiber &) = delete;

  /// Makes the next switch to this fiber call entry(arg) on `stack`. entry
  /// must never return: it ends with Fiber::exit.
  void prepare(FiberStack &stack, Entry entry, void *arg);

  /// Suspends the running context into `from` and resumes `to`; returns when
  /// something switches back to `from`.
  static void switchTo(Fiber &from, Fiber &to);

  /// Like switchTo, for a fiber that has finished: `from` is never resumed
  /// (unless prepared again).
  [[noreturn]] static void exit(Fiber &from, Fiber &to);

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

} // namespace mtc::emu

#endif // MTC_RUNTIME_CUDA_EMU_FIBER_H
