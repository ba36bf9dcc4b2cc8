//===- Emulator.cpp - CUDA's execution model on fibers --------------------===//
//
// Part of mtc. See Emulator.h. A BlockRunner (one per OS thread) runs one
// block at a time:
//
// 1. Every thread of the block gets a fiber at the start of the kernel and
//    goes into the run queue in the schedule's order.
// 2. The runner switches to the first fiber of the queue. A thread that
//    waits (__syncthreads, a warp collective that is not complete yet, a
//    yield) or exits hands over directly to the next fiber of the queue, or
//    back to the runner when the queue is empty.
// 3. A warp collective completes inside the call of the last lane to arrive
//    (or of the last lane named in its mask to exit): that lane computes
//    every participant's result and queues the waiting ones.
// 4. When the queue is empty, either every thread has exited (done), or every
//    remaining thread waits at the same __syncthreads (release them all in
//    schedule order and go to 2), or nothing can ever run again: the threads'
//    waits are reported as the launch's error.
//
// An error found inside a fiber (a misused intrinsic, __trap) ends the block
// at once: the fiber switches to the runner and is never resumed.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/emu/Emulator.h"

#include "cuda_emu/Runtime.h"
#include "runtime/cuda/emu/Fiber.h"

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <dlfcn.h>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define MTC_EMU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MTC_EMU_SANITIZED 1
#endif
#endif
#ifdef MTC_EMU_SANITIZED
#include <sanitizer/common_interface_defs.h>
#endif

/// The running block's dynamic shared memory. Kernel code declares it as
/// `extern thread_local T (*mtc_emu_dynamic_shared)[]` (see cuda_emu.h), an
/// ABI-compatible view of this pointer; over-aligned so that any __align__
/// in such a declaration holds.
alignas(64) thread_local void *mtc_emu_dynamic_shared = nullptr;

namespace mtc::emu {

namespace detail {
__thread ThreadCoords *currentThread = nullptr;
} // namespace detail

namespace {

using detail::BarrierKind;
using detail::Site;
using detail::WarpOp;
using detail::WarpOpKind;
using detail::WarpResult;

constexpr unsigned kWarpSize = 32;
constexpr unsigned kMaxThreadsPerBlock = 1024;

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kDefaultStackBytes = 256 * 1024;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr size_t kDefaultStackBytes = 256 * 1024;
#else
constexpr size_t kDefaultStackBytes = 128 * 1024;
#endif
#else
constexpr size_t kDefaultStackBytes = 128 * 1024;
#endif

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

std::string siteText(const Site &s) {
  const char *slash = std::strrchr(s.file, '/');
  return format("%s:%u", slash ? slash + 1 : s.file, s.line);
}

bool sameSite(const Site &a, const Site &b) {
  return a.line == b.line && std::strcmp(a.file, b.file) == 0;
}

const char *opName(WarpOpKind k) {
  switch (k) {
  case WarpOpKind::ShflIdx:
    return "__shfl_sync";
  case WarpOpKind::ShflUp:
    return "__shfl_up_sync";
  case WarpOpKind::ShflDown:
    return "__shfl_down_sync";
  case WarpOpKind::ShflXor:
    return "__shfl_xor_sync";
  case WarpOpKind::Ballot:
    return "__ballot_sync";
  case WarpOpKind::Any:
    return "__any_sync";
  case WarpOpKind::All:
    return "__all_sync";
  case WarpOpKind::Sync:
    return "__syncwarp";
  case WarpOpKind::ReduceAdd:
    return "__reduce_add_sync";
  case WarpOpKind::ReduceMinU:
  case WarpOpKind::ReduceMinS:
    return "__reduce_min_sync";
  case WarpOpKind::ReduceMaxU:
  case WarpOpKind::ReduceMaxS:
    return "__reduce_max_sync";
  case WarpOpKind::ReduceAnd:
    return "__reduce_and_sync";
  case WarpOpKind::ReduceOr:
    return "__reduce_or_sync";
  case WarpOpKind::ReduceXor:
    return "__reduce_xor_sync";
  case WarpOpKind::MatchAny:
    return "__match_any_sync";
  case WarpOpKind::MatchAll:
    return "__match_all_sync";
  }
  return "a warp collective";
}

const char *barrierName(BarrierKind k) {
  switch (k) {
  case BarrierKind::Plain:
    return "__syncthreads";
  case BarrierKind::Count:
    return "__syncthreads_count";
  case BarrierKind::And:
    return "__syncthreads_and";
  case BarrierKind::Or:
    return "__syncthreads_or";
  }
  return "__syncthreads";
}

bool isShuffle(WarpOpKind k) {
  return k == WarpOpKind::ShflIdx || k == WarpOpKind::ShflUp ||
         k == WarpOpKind::ShflDown || k == WarpOpKind::ShflXor;
}

/// Whether two lanes' arrivals are the same collective (they may come from
/// different call sites, as on a GPU).
bool sameCollective(const WarpOp &a, const WarpOp &b) {
  return a.kind == b.kind && a.mask == b.mask && a.width == b.width &&
         a.size == b.size;
}

/// The state of one launch, shared by the OS threads running its blocks.
struct Launch {
  const LaunchConfig *cfg;
  std::string name;
  void (*body)(void *);
  void *arg;
};

enum class State : unsigned char { Runnable, AtBarrier, AtWarpOp, Exited };

class BlockRunner;

/// One emulated CUDA thread.
struct EmuThread {
  detail::ThreadCoords coords; ///< what kernel code reads
  unsigned linear = 0;         ///< index within the block
  BlockRunner *runner = nullptr;
  Fiber fiber;
  State state = State::Runnable;
  Site site{}; ///< where the thread waits
  BarrierKind barrier = BarrierKind::Plain;
  int pred = 0; ///< __syncthreads_* predicate
  int barrierResult = 0;
  WarpOp op{}; ///< the warp collective it waits at
  WarpResult result{};
};

/// Runs the blocks of launches on one OS thread; keeps its fibers and stacks
/// from one block (and launch) to the next.
class BlockRunner {
public:
  /// Runs block `index` of `launch` with `smem` as its dynamic shared memory.
  Status run(const Launch &launch, uint3 index, unsigned char *smem);

  // Called from the running fiber (through the detail:: entry points).
  int barrierWait(BarrierKind kind, int pred, const Site &site);
  WarpResult warpCollective(const WarpOp &op);
  unsigned activeMask() const;
  void yield();
  [[noreturn]] void trap(const Site &site);
  /// Ends the block with `error` (set by the caller): the running fiber
  /// switches to the runner for good. Callers set `error` in a statement of
  /// its own, so that no temporary of theirs is left on the abandoned stack.
  [[noreturn]] void abandon();
  [[noreturn]] void exitThread();

  /// Prints which kernel, block and thread is running (for a sanitizer
  /// report that ends the process).
  void printRunning() const;

  static void threadMain(void *arg);

private:
  std::string prefix() const;
  std::string threadIndex(unsigned linear) const;
  std::string threadName(unsigned linear) const;
  std::string threadList(const std::vector<unsigned> &linears) const;
  EmuThread *laneThread(unsigned warp, unsigned lane) const;
  /// Completes the collective `op` of the warp if every participant has
  /// arrived; `arriving` (may be null) is the running lane, which is not
  /// queued. Returns whether it completed.
  bool tryComplete(unsigned warp, const WarpOp &op, EmuThread *arriving);
  void compute(unsigned warp, unsigned participants);
  void makeRunnable(EmuThread *t);
  /// The next runnable thread (null if none), taken off the queue.
  EmuThread *nextRunnable();
  /// Leaves the running fiber for the next runnable one, or the runner;
  /// returns when the thread is resumed (never if it has exited).
  void suspend(bool exiting = false);
  /// Puts thread ids in the schedule's order.
  void order(unsigned *begin, unsigned *end);
  Status releaseBarrier();
  Status deadlock() const;

  const Launch *launch = nullptr;
  detail::BlockCoords block{};
  unsigned count = 0; ///< threads in the block
  unsigned alive = 0; ///< not exited
  unsigned atBarrier = 0;
  std::vector<std::unique_ptr<EmuThread>> threads;
  std::vector<unsigned> warpAlive;   ///< per warp: lanes not exited
  std::vector<unsigned> warpWaiting; ///< per warp: lanes at a collective
  std::vector<FiberStack> stacks;
  size_t stackBytes = 0;
  bool stacksDirty = false; ///< a fiber was abandoned mid-call
  Fiber main;
  EmuThread *running = nullptr;
  std::vector<unsigned> queue; ///< ring buffer of runnable threads
  size_t queueHead = 0, queueSize = 0;
  std::mt19937_64 rng;
  bool failed = false;
  std::string error;
};

/// The runner of this OS thread (created on first use).
BlockRunner &thisThreadRunner() {
  static thread_local std::unique_ptr<BlockRunner> runner;
  if (!runner)
    runner = std::make_unique<BlockRunner>();
  return *runner;
}

/// The runner whose fiber is running on this OS thread, if any.
__thread BlockRunner *activeRunner = nullptr;

#ifdef MTC_EMU_SANITIZED
void BlockRunner::printRunning() const {
  if (!running || !launch)
    return;
  std::fprintf(stderr, "cuda-emu: in kernel '%s' block (%u,%u,%u) %s\n",
               launch->name.c_str(), block.index.x, block.index.y,
               block.index.z, threadName(running->linear).c_str());
}

/// A sanitizer report inside a kernel names the source line; this adds the
/// kernel, block and thread of this OS thread's running fiber.
void reportRunningThreadAtDeath() {
  if (activeRunner)
    activeRunner->printRunning();
}
#endif

BlockRunner &activeOrAbort(const char *what, const Site &site) {
  if (!activeRunner)
    detail::outsideKernel(what, site);
  return *activeRunner;
}

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

std::string BlockRunner::prefix() const {
  return format("kernel '%s' block (%u,%u,%u): ", launch->name.c_str(),
                block.index.x, block.index.y, block.index.z);
}

/// "5" in a one-dimensional block, "(5,1,0)" otherwise.
std::string BlockRunner::threadIndex(unsigned linear) const {
  if (block.dim.y == 1 && block.dim.z == 1)
    return std::to_string(linear);
  return format("(%u,%u,%u)", linear % block.dim.x,
                linear / block.dim.x % block.dim.y,
                linear / (block.dim.x * block.dim.y));
}

std::string BlockRunner::threadName(unsigned linear) const {
  return "thread " + threadIndex(linear);
}

/// "threads 0-15, 17" for a sorted list of linear ids ("thread 3" for one).
std::string BlockRunner::threadList(const std::vector<unsigned> &ids) const {
  if (ids.size() == 1)
    return threadName(ids[0]);
  std::string out = "threads ";
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1)
      ++j;
    if (i)
      out += ", ";
    out += threadIndex(ids[i]);
    if (j > i)
      out += "-" + threadIndex(ids[j]);
    i = j + 1;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Scheduling
//===----------------------------------------------------------------------===//

void BlockRunner::makeRunnable(EmuThread *t) {
  t->state = State::Runnable;
  queue[(queueHead + queueSize++) % queue.size()] = t->linear;
}

void BlockRunner::order(unsigned *begin, unsigned *end) {
  switch (launch->cfg->schedule) {
  case Schedule::Forward:
    break;
  case Schedule::Reverse:
    std::reverse(begin, end);
    break;
  case Schedule::Random:
    std::shuffle(begin, end, rng);
    break;
  }
}

EmuThread *BlockRunner::nextRunnable() {
  if (!queueSize || failed)
    return nullptr;
  EmuThread *t = threads[queue[queueHead]].get();
  queueHead = (queueHead + 1) % queue.size();
  --queueSize;
  return t;
}

void BlockRunner::suspend(bool exiting) {
  EmuThread *self = running;
  EmuThread *next = nextRunnable();
  if (next == self)
    return; // a yield with nothing else to run
  running = next;
  detail::currentThread = next ? &next->coords : nullptr;
  Fiber &to = next ? next->fiber : main;
  if (exiting)
    Fiber::exit(self->fiber, to);
  Fiber::switchTo(self->fiber, to);
}

void BlockRunner::threadMain(void *arg) {
  auto *t = static_cast<EmuThread *>(arg);
  t->runner->launch->body(t->runner->launch->arg);
  t->runner->exitThread();
}

Status BlockRunner::run(const Launch &l, uint3 index, unsigned char *smem) {
  launch = &l;
  const LaunchConfig &cfg = *l.cfg;
  block.index = index;
  block.dim = cfg.block;
  block.grid = cfg.grid;
  count = cfg.block.x * cfg.block.y * cfg.block.z;
  alive = count;
  atBarrier = 0;
  failed = false;
  error.clear();
  rng.seed(cfg.seed ^ (uint64_t(index.x) | uint64_t(index.y) << 32) ^
           (uint64_t(index.z) << 48));

  size_t wantStack = cfg.stackBytes ? cfg.stackBytes : kDefaultStackBytes;
  if (wantStack != stackBytes) {
    stacks.clear();
    stackBytes = wantStack;
  }
  while (stacks.size() < count)
    stacks.emplace_back(stackBytes);
  if (stacksDirty) {
    for (FiberStack &s : stacks)
      s.unpoison();
    stacksDirty = false;
  }
  while (threads.size() < count)
    threads.push_back(std::make_unique<EmuThread>());
  queue.assign(count, 0);
  queueHead = queueSize = 0;

  std::vector<unsigned> start(count);
  for (unsigned i = 0; i < count; ++i) {
    EmuThread &t = *threads[i];
    t.linear = i;
    t.runner = this;
    t.coords.index = uint3{i % cfg.block.x, i / cfg.block.x % cfg.block.y,
                           i / (cfg.block.x * cfg.block.y)};
    t.coords.block = &block;
    t.fiber.prepare(stacks[i], &BlockRunner::threadMain, &t);
    start[i] = i;
  }
  order(start.data(), start.data() + start.size());
  for (unsigned i : start)
    makeRunnable(threads[i].get());
  const unsigned warps = (count + kWarpSize - 1) / kWarpSize;
  warpAlive.assign(warps, ~0u);
  if (count % kWarpSize)
    warpAlive.back() = (1u << (count % kWarpSize)) - 1;
  warpWaiting.assign(warps, 0);

  if (smem && cfg.dynamicShared)
    std::memset(smem, 0xff, cfg.dynamicShared);
  mtc_emu_dynamic_shared = smem;
  activeRunner = this;

  Status status;
  for (;;) {
    // Runs fibers until none is runnable (they hand over to each other).
    if (EmuThread *first = nextRunnable()) {
      running = first;
      detail::currentThread = &first->coords;
      Fiber::switchTo(main, first->fiber);
    }
    if (failed) {
      status = Status::error(prefix() + error);
      break;
    }
    if (alive == 0)
      break;
    if (atBarrier == alive) {
      status = releaseBarrier();
      if (!status.ok())
        break;
      continue;
    }
    status = deadlock();
    break;
  }
  activeRunner = nullptr;
  mtc_emu_dynamic_shared = nullptr;
  if (!status.ok())
    stacksDirty = true; // fibers suspended mid-call were abandoned
  return status;
}

void BlockRunner::yield() {
  makeRunnable(running);
  suspend();
}

void BlockRunner::trap(const Site &site) {
  error = format("%s called __trap() at %s (in %s)",
                 threadName(running->linear).c_str(), siteText(site).c_str(),
                 site.function);
  abandon();
}

void BlockRunner::abandon() {
  failed = true;
  suspend(/*exiting=*/true); // to the runner: nothing is runnable once failed
  __builtin_unreachable();
}

void BlockRunner::exitThread() {
  EmuThread *self = running;
  self->state = State::Exited;
  --alive;
  // Collectives of this warp that named the exited lane may now be complete.
  unsigned warp = self->linear / kWarpSize, lane = self->linear % kWarpSize;
  warpAlive[warp] &= ~(1u << lane);
  for (unsigned l = 0; l < kWarpSize && !failed; ++l) {
    EmuThread *t = laneThread(warp, l);
    if (t && t->state == State::AtWarpOp && (t->op.mask >> lane & 1u))
      tryComplete(warp, t->op, nullptr);
  }
  suspend(/*exiting=*/true);
  __builtin_unreachable();
}

//===----------------------------------------------------------------------===//
// __syncthreads
//===----------------------------------------------------------------------===//

int BlockRunner::barrierWait(BarrierKind kind, int pred, const Site &site) {
  EmuThread *self = running;
  self->state = State::AtBarrier;
  self->barrier = kind;
  self->pred = pred;
  self->site = site;
  ++atBarrier;
  suspend();
  return self->barrierResult;
}

/// Every non-exited thread waits at a barrier: release them if it is the same
/// one.
Status BlockRunner::releaseBarrier() {
  const EmuThread *first = nullptr;
  std::vector<unsigned> waiting;
  int countTrue = 0;
  for (unsigned i = 0; i < count; ++i) {
    const EmuThread &t = *threads[i];
    if (t.state != State::AtBarrier)
      continue;
    waiting.push_back(i);
    countTrue += t.pred != 0;
    if (!first) {
      first = &t;
      continue;
    }
    if (sameSite(t.site, first->site) && t.barrier == first->barrier)
      continue;
    // Divergent: name every group of threads and where it waits.
    std::vector<std::pair<const EmuThread *, std::vector<unsigned>>> groups;
    for (unsigned j = 0; j < count; ++j) {
      const EmuThread &u = *threads[j];
      if (u.state != State::AtBarrier)
        continue;
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto &p) {
        return sameSite(p.first->site, u.site) && p.first->barrier == u.barrier;
      });
      if (g == groups.end())
        groups.push_back({&u, {j}});
      else
        g->second.push_back(j);
    }
    std::string msg = "divergent __syncthreads: ";
    for (size_t k = 0; k < groups.size(); ++k)
      msg += format("%s%s wait%s at %s (%s)", k ? ", " : "",
                    threadList(groups[k].second).c_str(),
                    groups[k].second.size() == 1 ? "s" : "",
                    barrierName(groups[k].first->barrier),
                    siteText(groups[k].first->site).c_str());
    return Status::error(prefix() + msg);
  }
  int result = 0;
  switch (first->barrier) {
  case BarrierKind::Plain:
    break;
  case BarrierKind::Count:
    result = countTrue;
    break;
  case BarrierKind::And:
    result = countTrue == static_cast<int>(waiting.size());
    break;
  case BarrierKind::Or:
    result = countTrue != 0;
    break;
  }
  order(waiting.data(), waiting.data() + waiting.size());
  for (unsigned i : waiting) {
    threads[i]->barrierResult = result;
    makeRunnable(threads[i].get());
  }
  atBarrier = 0;
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Warp collectives
//===----------------------------------------------------------------------===//

EmuThread *BlockRunner::laneThread(unsigned warp, unsigned lane) const {
  unsigned linear = warp * kWarpSize + lane;
  return linear < count ? threads[linear].get() : nullptr;
}

unsigned BlockRunner::activeMask() const {
  return warpAlive[running->linear / kWarpSize];
}

WarpResult BlockRunner::warpCollective(const WarpOp &op) {
  EmuThread *self = running;
  unsigned lane = self->linear % kWarpSize;
  if (!(op.mask >> lane & 1u)) {
    error = format("%s calls %s at %s with mask 0x%08x, which does not name "
                   "its own lane %u",
                   threadName(self->linear).c_str(), opName(op.kind),
                   siteText(op.site).c_str(), op.mask, lane);
    abandon();
  }
  if (isShuffle(op.kind) &&
      (op.width < 1 || op.width > 32 || (op.width & (op.width - 1)))) {
    error = format("%s calls %s at %s with width %d (must be a power of two "
                   "up to 32)",
                   threadName(self->linear).c_str(), opName(op.kind),
                   siteText(op.site).c_str(), op.width);
    abandon();
  }
  self->op = op;
  self->site = op.site;
  self->state = State::AtWarpOp;
  warpWaiting[self->linear / kWarpSize] |= 1u << lane;
  if (!tryComplete(self->linear / kWarpSize, op, self))
    suspend();
  return self->result;
}

bool BlockRunner::tryComplete(unsigned warp, const WarpOp &op,
                              EmuThread *arriving) {
  // Absent lanes named in a mask do not take part; the others must all wait
  // at this collective.
  const unsigned participants = op.mask & warpAlive[warp];
  if ((warpWaiting[warp] & participants) != participants)
    return false;
  for (unsigned bits = participants; bits; bits &= bits - 1)
    if (!sameCollective(laneThread(warp, __builtin_ctz(bits))->op, op))
      return false;
  compute(warp, participants);
  warpWaiting[warp] &= ~participants;
  unsigned woken[kWarpSize], n = 0;
  for (unsigned bits = participants; bits; bits &= bits - 1) {
    EmuThread *t = laneThread(warp, __builtin_ctz(bits));
    if (t != arriving)
      woken[n++] = t->linear;
  }
  order(woken, woken + n);
  for (unsigned i = 0; i < n; ++i)
    makeRunnable(threads[woken[i]].get());
  if (arriving)
    arriving->state = State::Runnable;
  return true;
}

void BlockRunner::compute(unsigned warp, unsigned participants) {
  EmuThread *lanes[kWarpSize] = {};
  for (unsigned bits = participants; bits; bits &= bits - 1)
    lanes[__builtin_ctz(bits)] = laneThread(warp, __builtin_ctz(bits));
  const WarpOp &op = lanes[__builtin_ctz(participants)]->op;
  uint64_t sizeMask =
      op.size >= 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * op.size)) - 1;

  if (isShuffle(op.kind)) {
    for (unsigned l = 0; l < kWarpSize; ++l) {
      EmuThread *t = lanes[l];
      if (!t)
        continue;
      // PTX shfl.sync: the operand's low five bits; a source outside the
      // lane's segment of `width` lanes (above it for down/xor, below it for
      // up) yields the lane's own value.
      int w = t->op.width, b = t->op.operand & 31;
      int lo = static_cast<int>(l) & ~(w - 1), hi = lo + w - 1, src = 0;
      bool inRange = true;
      switch (op.kind) {
      case WarpOpKind::ShflIdx:
        src = lo + (b & (w - 1));
        break;
      case WarpOpKind::ShflUp:
        src = static_cast<int>(l) - b;
        inRange = src >= lo;
        break;
      case WarpOpKind::ShflDown:
        src = static_cast<int>(l) + b;
        inRange = src <= hi;
        break;
      default: // ShflXor
        src = static_cast<int>(l) ^ b;
        inRange = src <= hi;
        break;
      }
      if (!inRange) {
        t->result.value = t->op.value;
        continue;
      }
      if (!lanes[src]) {
        EmuThread *s = laneThread(warp, static_cast<unsigned>(src));
        const char *why = !s                          ? "does not exist"
                          : !(op.mask >> src & 1u)    ? "is not in the mask"
                          : s->state == State::Exited ? "has exited"
                                                      : "does not take part";
        error = format("%s (lane %u) calls %s at %s with mask 0x%08x and "
                       "reads lane %d, which %s",
                       threadName(t->linear).c_str(), l, opName(op.kind),
                       siteText(t->op.site).c_str(), op.mask, src, why);
        abandon();
      }
      t->result.value = lanes[src]->op.value & sizeMask;
    }
    return;
  }

  uint64_t ballot = 0, sum = 0;
  uint32_t andAll = ~0u, orAll = 0, xorAll = 0;
  uint32_t minU = ~0u, maxU = 0;
  int32_t minS = INT32_MAX, maxS = INT32_MIN;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if (!lanes[l])
      continue;
    uint64_t v = lanes[l]->op.value;
    auto u = static_cast<uint32_t>(v);
    auto s = static_cast<int32_t>(u);
    ballot |= uint64_t(v != 0) << l;
    sum += u;
    andAll &= u;
    orAll |= u;
    xorAll ^= u;
    minU = std::min(minU, u);
    maxU = std::max(maxU, u);
    minS = std::min(minS, s);
    maxS = std::max(maxS, s);
  }
  for (unsigned l = 0; l < kWarpSize; ++l) {
    EmuThread *t = lanes[l];
    if (!t)
      continue;
    uint64_t r = 0;
    int pred = 0;
    switch (op.kind) {
    case WarpOpKind::Ballot:
      r = ballot;
      break;
    case WarpOpKind::Any:
      r = ballot != 0;
      break;
    case WarpOpKind::All:
      r = ballot == participants;
      break;
    case WarpOpKind::Sync:
      break;
    case WarpOpKind::ReduceAdd:
      r = static_cast<uint32_t>(sum);
      break;
    case WarpOpKind::ReduceMinU:
      r = minU;
      break;
    case WarpOpKind::ReduceMinS:
      r = static_cast<uint32_t>(minS);
      break;
    case WarpOpKind::ReduceMaxU:
      r = maxU;
      break;
    case WarpOpKind::ReduceMaxS:
      r = static_cast<uint32_t>(maxS);
      break;
    case WarpOpKind::ReduceAnd:
      r = andAll;
      break;
    case WarpOpKind::ReduceOr:
      r = orAll;
      break;
    case WarpOpKind::ReduceXor:
      r = xorAll;
      break;
    case WarpOpKind::MatchAny:
    case WarpOpKind::MatchAll: {
      unsigned same = 0;
      for (unsigned k = 0; k < kWarpSize; ++k)
        if (lanes[k] && ((lanes[k]->op.value ^ t->op.value) & sizeMask) == 0)
          same |= 1u << k;
      if (op.kind == WarpOpKind::MatchAny) {
        r = same;
      } else {
        pred = same == participants;
        r = pred ? participants : 0;
      }
      break;
    }
    default:
      break;
    }
    t->result.value = r;
    t->result.pred = pred;
  }
}

//===----------------------------------------------------------------------===//
// Nothing can run: describe why
//===----------------------------------------------------------------------===//

Status BlockRunner::deadlock() const {
  auto where = [&](const EmuThread &t, bool one) {
    const char *verb = one ? "waits" : "wait";
    if (t.state == State::AtBarrier)
      return format("%s at %s (%s)", verb, barrierName(t.barrier),
                    siteText(t.site).c_str());
    return format("%s at %s (%s, mask 0x%08x)", verb, opName(t.op.kind),
                  siteText(t.site).c_str(), t.op.mask);
  };
  // A warp collective that cannot complete: name who it waits for.
  for (unsigned i = 0; i < count; ++i) {
    const EmuThread &t = *threads[i];
    if (t.state != State::AtWarpOp)
      continue;
    unsigned warp = i / kWarpSize;
    // The lanes that take part but wait elsewhere: those waiting where the
    // first of them waits are named.
    std::vector<unsigned> arrived, missing;
    const EmuThread *other = nullptr;
    auto sameWait = [](const EmuThread &a, const EmuThread &b) {
      return a.state == b.state && sameSite(a.site, b.site) &&
             (a.state != State::AtWarpOp || sameCollective(a.op, b.op));
    };
    for (unsigned l = 0; l < kWarpSize; ++l) {
      const EmuThread *u = laneThread(warp, l);
      if (!(t.op.mask >> l & 1u) || !u || u->state == State::Exited)
        continue;
      if (u->state == State::AtWarpOp && sameCollective(u->op, t.op)) {
        arrived.push_back(u->linear);
      } else if (!other || sameWait(*u, *other)) {
        missing.push_back(u->linear);
        other = u;
      }
    }
    if (!other)
      continue;
    std::string missingText = threadList(missing);
    return Status::error(
        prefix() +
        format("%s at %s (mask 0x%08x) cannot complete: %s wait%s there, but "
               "%s, which the mask names, %s",
               opName(t.op.kind), siteText(t.site).c_str(), t.op.mask,
               threadList(arrived).c_str(), arrived.size() == 1 ? "s" : "",
               missingText.c_str(),
               where(*other, missing.size() == 1).c_str()));
  }
  // Otherwise threads wait at a barrier that others (waiting elsewhere) never
  // reach; name both.
  std::vector<unsigned> atBarrierIds, elsewhere;
  for (unsigned i = 0; i < count; ++i) {
    const EmuThread &t = *threads[i];
    if (t.state == State::AtBarrier)
      atBarrierIds.push_back(i);
    else if (t.state != State::Exited)
      elsewhere.push_back(i);
  }
  if (!atBarrierIds.empty() && !elsewhere.empty()) {
    const EmuThread &b = *threads[atBarrierIds[0]];
    const EmuThread &o = *threads[elsewhere[0]];
    return Status::error(
        prefix() + format("%s (%s) is not reached by every thread: %s wait%s "
                          "there, %s %s",
                          barrierName(b.barrier), siteText(b.site).c_str(),
                          threadList(atBarrierIds).c_str(),
                          atBarrierIds.size() == 1 ? "s" : "",
                          threadName(o.linear).c_str(),
                          where(o, true).c_str()));
  }
  return Status::error(prefix() + "the block's threads wait for each other "
                                  "and none can continue");
}

//===----------------------------------------------------------------------===//
// The launch
//===----------------------------------------------------------------------===//

std::string kernelName(const LaunchConfig &cfg, const void *kernel) {
  if (cfg.name)
    return cfg.name;
  Dl_info info;
  if (dladdr(kernel, &info) && info.dli_sname && info.dli_saddr == kernel) {
    int st = 0;
    char *demangled =
        abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &st);
    std::string name = st == 0 && demangled ? demangled : info.dli_sname;
    std::free(demangled);
    return name;
  }
  return format("%p", kernel);
}

Status checkConfig(const LaunchConfig &cfg, const std::string &name) {
  auto err = [&](const std::string &what) {
    return Status::error(format("kernel '%s': ", name.c_str()) + what);
  };
  const dim3 &g = cfg.grid, &b = cfg.block;
  if (g.x == 0 || g.y == 0 || g.z == 0)
    return err(format("grid (%u,%u,%u) has no blocks", g.x, g.y, g.z));
  if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
    return err(format("grid (%u,%u,%u) exceeds CUDA's limits (2^31-1, "
                      "65535, 65535)",
                      g.x, g.y, g.z));
  if (b.x == 0 || b.y == 0 || b.z == 0)
    return err(format("block (%u,%u,%u) has no threads", b.x, b.y, b.z));
  uint64_t threads = uint64_t(b.x) * b.y * b.z;
  if (b.x > 1024 || b.y > 1024 || b.z > 64 || threads > kMaxThreadsPerBlock)
    return err(format("block (%u,%u,%u) has %llu threads; CUDA allows at "
                      "most 1024 (x, y <= 1024, z <= 64)",
                      b.x, b.y, b.z, static_cast<unsigned long long>(threads)));
  if (cfg.maxDynamicShared > kMaxDynamicSharedOptIn)
    return err(format("a dynamic shared memory limit of %zu bytes exceeds "
                      "the GPU's %zu",
                      cfg.maxDynamicShared, kMaxDynamicSharedOptIn));
  if (cfg.dynamicShared > cfg.maxDynamicShared)
    return err(format("%zu bytes of dynamic shared memory exceed the limit "
                      "of %zu (raise it with cudaFuncSetAttribute("
                      "cudaFuncAttributeMaxDynamicSharedMemorySize), up to "
                      "%zu)",
                      cfg.dynamicShared, cfg.maxDynamicShared,
                      kMaxDynamicSharedOptIn));
  if (cfg.workers < 1)
    return err(format("%d workers", cfg.workers));
  return Status::success();
}

/// The dynamic shared memory of one OS thread's blocks: exactly the launch's
/// size, so that AddressSanitizer reports any access beyond it.
struct SharedBuffer {
  explicit SharedBuffer(size_t bytes)
      : data(static_cast<unsigned char *>(
            ::operator new(bytes, std::align_val_t(128)))) {}
  ~SharedBuffer() { ::operator delete(data, std::align_val_t(128)); }
  SharedBuffer(const SharedBuffer &) = delete;
  SharedBuffer &operator=(const SharedBuffer &) = delete;
  unsigned char *data;
};

} // namespace

Status launchErased(const LaunchConfig &cfg, const void *kernel,
                    void (*body)(void *), void *arg) {
  Launch launch{&cfg, kernelName(cfg, kernel), body, arg};
#ifdef MTC_EMU_SANITIZED
  static std::once_flag registered;
  std::call_once(registered, [] {
    __sanitizer_set_death_callback(reportRunningThreadAtDeath);
  });
#endif
  if (detail::currentThread)
    return Status::error("kernel '" + launch.name +
                         "': launched from inside a kernel (dynamic "
                         "parallelism is not emulated)");
  Status valid = checkConfig(cfg, launch.name);
  if (!valid.ok())
    return valid;

  const uint64_t blocks = uint64_t(cfg.grid.x) * cfg.grid.y * cfg.grid.z;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex errorMutex;
  Status firstError;

  auto work = [&] {
    BlockRunner &runner = thisThreadRunner();
    SharedBuffer smem(cfg.dynamicShared);
    while (!stop.load(std::memory_order_relaxed)) {
      uint64_t b = next.fetch_add(1, std::memory_order_relaxed);
      if (b >= blocks)
        break;
      uint3 index{
          static_cast<unsigned>(b % cfg.grid.x),
          static_cast<unsigned>(b / cfg.grid.x % cfg.grid.y),
          static_cast<unsigned>(b / (uint64_t(cfg.grid.x) * cfg.grid.y))};
      Status s = runner.run(launch, index, smem.data);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (firstError.ok())
          firstError = s;
        stop = true;
      }
    }
  };

  uint64_t workers = std::min<uint64_t>(cfg.workers, blocks);
  std::vector<std::thread> pool;
  for (uint64_t i = 1; i < workers; ++i)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();
  return firstError;
}

//===----------------------------------------------------------------------===//
// Entry points for kernel code (cuda_emu/Runtime.h)
//===----------------------------------------------------------------------===//

namespace detail {

void outsideKernel(const char *what, Site site) {
  std::fprintf(stderr,
               "cuda-emu: %s used outside a kernel launch at %s (in %s)\n",
               what, siteText(site).c_str(), site.function);
  std::abort();
}

int syncThreads(BarrierKind kind, int pred, Site site) {
  return activeOrAbort(barrierName(kind), site).barrierWait(kind, pred, site);
}

WarpResult warpCollective(const WarpOp &op) {
  return activeOrAbort(opName(op.kind), op.site).warpCollective(op);
}

unsigned activeMask(Site site) {
  return activeOrAbort("__activemask", site).activeMask();
}

void yield(Site site) {
  // Outside a launch (host code calling atomicCAS) there is nothing to yield
  // to.
  if (activeRunner)
    activeRunner->yield();
  (void)site;
}

void trap(Site site) { activeOrAbort("__trap", site).trap(site); }

} // namespace detail

} // namespace mtc::emu
