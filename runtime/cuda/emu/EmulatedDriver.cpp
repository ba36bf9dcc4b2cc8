//===- EmulatedDriver.cpp - The CUDA driver API on the CPU ----------------===//
//
// Part of mtc. See EmulatedDriver.h. Every entry point returns a CUresult
// (an int); handles are pointers to the objects below.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/emu/EmulatedDriver.h"

#include "runtime/cuda/emu/KernelRegistry.h"
#include "runtime/cuda/emu/RuntimeCompile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace mtc::emu {

namespace {

using cuda::CudaDriverApi;

// CUresult values (cuda.h).
enum : int {
  kSuccess = 0,
  kInvalidValue = 1,
  kOutOfMemory = 2,
  kNotInitialized = 3,
  kInvalidDevice = 101,
  kInvalidImage = 200,
  kInvalidContext = 201,
  kInvalidHandle = 400,
  kNotFound = 500,
  kNotReady = 600,
  kLaunchOutOfResources = 701,
  kLaunchFailed = 719,
  kHostMemoryAlreadyRegistered = 712,
  kHostMemoryNotRegistered = 713,
};

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// An event's records are numbered; a wait or synchronize targets the
/// record that was latest when it was issued, and is released when that
/// record has executed -- records on different streams may execute out of
/// order.
struct Event {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;    ///< records queued
  uint64_t reached = 0;     ///< every record <= reached has executed
  std::set<uint64_t> ahead; ///< executed records > reached + 1
  double time = 0;          ///< when the last record executed
  bool hasReached(uint64_t g) const { return g <= reached || ahead.count(g); }
  void markReached(uint64_t g) {
    if (g != reached + 1) {
      ahead.insert(g);
      return;
    }
    reached = g;
    while (!ahead.empty() && *ahead.begin() == reached + 1) {
      ahead.erase(ahead.begin());
      ++reached;
    }
  }
};

/// One stream: a worker thread running its commands in order.
struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  /// Commands; `always` ones (event records) run even after a failure, so
  /// that waiters are released.
  struct Command {
    std::function<int()> fn;
    bool always = false;
  };
  std::deque<Command> queue;
  bool running = false; ///< a command is executing
  bool stop = false;
  int error = kSuccess; ///< sticky: the first failure
  std::thread worker;

  Stream() : worker([this] { loop(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  void push(std::function<int()> fn, bool always = false) {
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back({std::move(fn), always});
    }
    cv.notify_all();
  }
  /// Waits until the queue is empty and nothing runs; returns the error.
  int drain() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return queue.empty() && !running; });
    return error;
  }
  bool idle() {
    std::lock_guard<std::mutex> lock(mu);
    return queue.empty() && !running;
  }

private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty() && stop)
        return;
      Command c = std::move(queue.front());
      queue.pop_front();
      running = true;
      bool skip = error != kSuccess && !c.always;
      lock.unlock();
      // After a failure, commands are skipped (the error stays sticky).
      int rc = skip ? kSuccess : c.fn();
      lock.lock();
      if (rc != kSuccess && error == kSuccess)
        error = rc;
      running = false;
      cv.notify_all();
    }
  }
};

struct Function {
  KernelEntry entry;
  int maxDynamicShared = 48 * 1024;
};

struct Module {
  std::vector<std::unique_ptr<Function>> functions;
};

/// The driver's whole state.
struct State {
  std::mutex mu;
  EmulatedDriverOptions options;
  bool initialized = false;
  std::map<uintptr_t, size_t> allocations;
  int64_t allocated = 0;
  std::map<uintptr_t, size_t> registered;
  std::set<Stream *> streams;
  std::set<Event *> events;
  std::set<Module *> modules;
  std::string lastLaunchError = "unspecified launch failure";
  int contextRefs = 0;
};

State &state() {
  static State *s = new State; // never destroyed: streams may outlive main
  return *s;
}

/// A failed launch's message, kept for cuGetErrorString(719).
void setLaunchError(const std::string &msg) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.lastLaunchError = msg;
}

Stream *streamOf(void *h) { return static_cast<Stream *>(h); }

/// Runs \p fn in \p stream's order; the null stream runs it on the caller
/// once every stream is idle (the legacy default stream's ordering).
int enqueue(void *stream, std::function<int()> fn) {
  if (stream) {
    streamOf(stream)->push(std::move(fn));
    return kSuccess;
  }
  State &s = state();
  std::vector<Stream *> all;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    all.assign(s.streams.begin(), s.streams.end());
  }
  for (Stream *st : all)
    if (int rc = st->drain())
      return rc;
  return fn();
}

bool validDevicePointer(unsigned long long p, size_t n) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.allocations.upper_bound(static_cast<uintptr_t>(p));
  if (it == s.allocations.begin())
    return false;
  --it;
  return p >= it->first && p + n <= it->first + it->second;
}

// --- Entry points ------------------------------------------------------------

int getErrorName(int rc, const char **out) {
  static const std::map<int, const char *> names = {
      {kSuccess, "CUDA_SUCCESS"},
      {kInvalidValue, "CUDA_ERROR_INVALID_VALUE"},
      {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"},
      {kNotInitialized, "CUDA_ERROR_NOT_INITIALIZED"},
      {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE"},
      {kInvalidImage, "CUDA_ERROR_INVALID_IMAGE"},
      {kInvalidContext, "CUDA_ERROR_INVALID_CONTEXT"},
      {kInvalidHandle, "CUDA_ERROR_INVALID_HANDLE"},
      {kNotFound, "CUDA_ERROR_NOT_FOUND"},
      {kNotReady, "CUDA_ERROR_NOT_READY"},
      {kLaunchOutOfResources, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
      {kLaunchFailed, "CUDA_ERROR_LAUNCH_FAILED"},
      {kHostMemoryAlreadyRegistered,
       "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
      {kHostMemoryNotRegistered, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"}};
  auto it = names.find(rc);
  if (it == names.end())
    return kInvalidValue;
  *out = it->second;
  return kSuccess;
}

int getErrorString(int rc, const char **out) {
  if (rc == kLaunchFailed) {
    // The emulator's message of the last failed launch (not thread-safe
    // against a concurrent failure, which would replace it).
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    *out = s.lastLaunchError.c_str();
    return kSuccess;
  }
  static const std::map<int, const char *> texts = {
      {kSuccess, "no error"},
      {kInvalidValue, "invalid argument"},
      {kOutOfMemory, "out of memory"},
      {kNotInitialized, "initialization error"},
      {kInvalidDevice, "invalid device ordinal"},
      {kInvalidImage, "device kernel image is invalid"},
      {kInvalidContext, "invalid device context"},
      {kInvalidHandle, "invalid resource handle"},
      {kNotFound, "named symbol not found"},
      {kNotReady, "device not ready"},
      {kLaunchOutOfResources, "too many resources requested for launch"},
      {kHostMemoryAlreadyRegistered,
       "part or all of the requested memory range is already mapped"},
      {kHostMemoryNotRegistered,
       "pointer does not correspond to a registered memory region"}};
  auto it = texts.find(rc);
  if (it == texts.end())
    return kInvalidValue;
  *out = it->second;
  return kSuccess;
}

int init(unsigned flags) {
  if (flags != 0)
    return kInvalidValue;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.initialized = true;
  return kSuccess;
}

int driverGetVersion(int *v) {
  *v = 13000;
  return kSuccess;
}

int deviceGetCount(int *n) {
  *n = 1;
  return kSuccess;
}

int deviceGet(int *dev, int ordinal) {
  if (ordinal != 0)
    return kInvalidDevice;
  *dev = 0;
  return kSuccess;
}

int deviceGetName(char *name, int len, int dev) {
  if (dev != 0)
    return kInvalidDevice;
  std::snprintf(name, static_cast<size_t>(len), "%s",
                "mtc cuda-emu (CUDA on the CPU)");
  return kSuccess;
}

int deviceGetAttribute(int *value, int attr, int dev) {
  if (dev != 0)
    return kInvalidDevice;
  switch (attr) {
  case cuda::kCuDevAttrComputeCapabilityMajor:
    *value = 9;
    return kSuccess;
  case cuda::kCuDevAttrComputeCapabilityMinor:
    *value = 0;
    return kSuccess;
  case cuda::kCuDevAttrMultiprocessorCount:
    *value =
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return kSuccess;
  case cuda::kCuDevAttrMaxSharedMemoryPerBlockOptin:
    *value = static_cast<int>(kMaxDynamicSharedOptIn);
    return kSuccess;
  default:
    return kInvalidValue;
  }
}

int deviceTotalMem(size_t *bytes, int dev) {
  if (dev != 0)
    return kInvalidDevice;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  *bytes = static_cast<size_t>(s.options.deviceBytes);
  return kSuccess;
}

int primaryCtxRetain(void **ctx, int dev) {
  if (dev != 0)
    return kInvalidDevice;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.contextRefs;
  *ctx = &s;
  return kSuccess;
}

int primaryCtxRelease(int dev) {
  if (dev != 0)
    return kInvalidDevice;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.contextRefs == 0)
    return kInvalidContext;
  --s.contextRefs;
  return kSuccess;
}

int ctxSetCurrent(void *ctx) {
  return ctx == nullptr || ctx == &state() ? kSuccess : kInvalidContext;
}

int ctxSynchronize() {
  return enqueue(nullptr, [] { return kSuccess; });
}

int memGetInfo(size_t *free, size_t *total) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  *total = static_cast<size_t>(s.options.deviceBytes);
  *free = static_cast<size_t>(s.options.deviceBytes - s.allocated);
  return kSuccess;
}

int memAlloc(unsigned long long *ptr, size_t bytes) {
  if (bytes == 0)
    return kInvalidValue;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.allocated + static_cast<int64_t>(bytes) > s.options.deviceBytes)
    return kOutOfMemory;
  size_t rounded = (bytes + 255) / 256 * 256;
  void *p = std::aligned_alloc(256, rounded);
  if (!p)
    return kOutOfMemory;
  s.allocations[reinterpret_cast<uintptr_t>(p)] = bytes;
  s.allocated += static_cast<int64_t>(bytes);
  *ptr = reinterpret_cast<uintptr_t>(p);
  return kSuccess;
}

int memFree(unsigned long long ptr) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.allocations.find(static_cast<uintptr_t>(ptr));
  if (it == s.allocations.end())
    return kInvalidValue;
  s.allocated -= static_cast<int64_t>(it->second);
  std::free(reinterpret_cast<void *>(it->first));
  s.allocations.erase(it);
  return kSuccess;
}

int memHostRegister(void *p, size_t bytes, unsigned) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto key = reinterpret_cast<uintptr_t>(p);
  if (s.registered.count(key))
    return kHostMemoryAlreadyRegistered;
  s.registered[key] = bytes;
  return kSuccess;
}

int memHostUnregister(void *p) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.registered.erase(reinterpret_cast<uintptr_t>(p)))
    return kHostMemoryNotRegistered;
  return kSuccess;
}

int memHostGetDevicePointer(unsigned long long *out, void *p, unsigned) {
  // One address space: a registered (or host-allocated) pointer is its own
  // device pointer.
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto key = reinterpret_cast<uintptr_t>(p);
  auto it = s.registered.upper_bound(key);
  if (it == s.registered.begin() ||
      key >= std::prev(it)->first + std::prev(it)->second)
    return kInvalidValue;
  *out = key;
  return kSuccess;
}

int memAllocHost(void **out, size_t bytes) {
  void *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (!p)
    return kOutOfMemory;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.registered[reinterpret_cast<uintptr_t>(p)] = bytes;
  *out = p;
  return kSuccess;
}

int memFreeHost(void *p) {
  // Like the real driver, freeing page-locked memory waits for the device
  // to go idle first (so a caller that holds what the device's work waits
  // for deadlocks here as it would on a GPU).
  ctxSynchronize();
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.registered.erase(reinterpret_cast<uintptr_t>(p)))
    return kInvalidValue;
  std::free(p);
  return kSuccess;
}

/// Whether [p, p + n) lies in page-locked memory (registered or
/// cuMemAllocHost'ed).
bool isPinned(const void *p, size_t n) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto key = reinterpret_cast<uintptr_t>(p);
  auto it = s.registered.upper_bound(key);
  return it != s.registered.begin() &&
         key + n <= std::prev(it)->first + std::prev(it)->second;
}

int streamSynchronize(void *h);

int memcpyHtoD(unsigned long long dst, const void *src, size_t n,
               void *stream) {
  if (!validDevicePointer(dst, n))
    return kInvalidValue;
  int rc = kSuccess;
  if (!isPinned(src, n)) {
    // The real driver's pageable path: the stream's earlier work completes
    // before the call reads the source (the caller blocks).
    rc = streamSynchronize(stream);
    if (rc != kSuccess)
      return rc;
  }
  return enqueue(stream, [=] {
    if (n > 0) // memcpy of null pointers is undefined even for 0 bytes
      std::memcpy(reinterpret_cast<void *>(dst), src, n);
    return kSuccess;
  });
}

int memcpyDtoH(void *dst, unsigned long long src, size_t n, void *stream) {
  if (!validDevicePointer(src, n))
    return kInvalidValue;
  int rc = enqueue(stream, [=] {
    if (n > 0)
      std::memcpy(dst, reinterpret_cast<const void *>(src), n);
    return kSuccess;
  });
  // To pageable memory the real driver returns only once the copy is done.
  if (rc == kSuccess && !isPinned(dst, n))
    rc = streamSynchronize(stream);
  return rc;
}

int memcpyDtoD(unsigned long long dst, unsigned long long src, size_t n,
               void *stream) {
  if (!validDevicePointer(dst, n) || !validDevicePointer(src, n))
    return kInvalidValue;
  return enqueue(stream, [=] {
    if (n > 0)
      std::memmove(reinterpret_cast<void *>(dst),
                   reinterpret_cast<const void *>(src), n);
    return kSuccess;
  });
}

int memsetD32(unsigned long long dst, unsigned v, size_t n, void *stream) {
  if (dst % 4 != 0 || !validDevicePointer(dst, 4 * n))
    return kInvalidValue;
  return enqueue(stream, [=] {
    auto *p = reinterpret_cast<unsigned *>(dst);
    std::fill(p, p + n, v);
    return kSuccess;
  });
}

int memsetD8(unsigned long long dst, unsigned char v, size_t n, void *stream) {
  if (!validDevicePointer(dst, n))
    return kInvalidValue;
  return enqueue(stream, [=] {
    if (n > 0)
      std::memset(reinterpret_cast<void *>(dst), v, n);
    return kSuccess;
  });
}

int streamCreate(void **out, unsigned) {
  auto *st = new Stream;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.streams.insert(st);
  *out = st;
  return kSuccess;
}

int streamDestroy(void *h) {
  State &s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.streams.erase(streamOf(h)))
      return kInvalidHandle;
  }
  // Like CUDA: queued work completes before the stream goes away.
  streamOf(h)->drain();
  delete streamOf(h);
  return kSuccess;
}

int streamSynchronize(void *h) {
  if (!h)
    return ctxSynchronize();
  int rc = streamOf(h)->drain();
  return rc == kSuccess ? kSuccess : kLaunchFailed;
}

int eventCreate(void **out, unsigned) {
  auto *e = new Event;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.events.insert(e);
  *out = e;
  return kSuccess;
}

int eventDestroy(void *h) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.events.erase(static_cast<Event *>(h)))
    return kInvalidHandle;
  // A record still queued would touch it: CUDA defers the release; so do
  // we, by leaking the (small) object.
  return kSuccess;
}

int eventRecord(void *h, void *stream) {
  auto *e = static_cast<Event *>(h);
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    gen = ++e->recorded;
  }
  auto complete = [e, gen] {
    std::lock_guard<std::mutex> lock(e->mu);
    e->markReached(gen);
    e->time = now();
    e->cv.notify_all();
  };
  if (!stream)
    return enqueue(nullptr, [=] {
      complete();
      return kSuccess;
    });
  // Records run even on a failed stream, so that waiters are released.
  streamOf(stream)->push(
      [=] {
        complete();
        return kSuccess;
      },
      /*always=*/true);
  return kSuccess;
}

int eventQuery(void *h) {
  auto *e = static_cast<Event *>(h);
  std::lock_guard<std::mutex> lock(e->mu);
  return e->hasReached(e->recorded) ? kSuccess : kNotReady;
}

int eventSynchronize(void *h) {
  auto *e = static_cast<Event *>(h);
  std::unique_lock<std::mutex> lock(e->mu);
  uint64_t want = e->recorded;
  e->cv.wait(lock, [&] { return e->hasReached(want); });
  return kSuccess;
}

int eventElapsedTime(float *ms, void *start, void *end) {
  auto *a = static_cast<Event *>(start), *b = static_cast<Event *>(end);
  std::scoped_lock lock(a->mu, b->mu);
  if (!a->hasReached(a->recorded) || !b->hasReached(b->recorded))
    return kNotReady;
  if (a->recorded == 0 || b->recorded == 0)
    return kInvalidHandle;
  *ms = static_cast<float>((b->time - a->time) * 1e3);
  return kSuccess;
}

int streamWaitEvent(void *stream, void *h, unsigned) {
  auto *e = static_cast<Event *>(h);
  uint64_t want;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    want = e->recorded;
  }
  return enqueue(stream, [e, want] {
    std::unique_lock<std::mutex> lock(e->mu);
    e->cv.wait(lock, [&] { return e->hasReached(want); });
    return kSuccess;
  });
}

int streamWaitValue32(void *stream, unsigned long long addr, unsigned value,
                      unsigned flags) {
  if (flags != cuda::kCuStreamWaitValueGeq)
    return kInvalidValue;
  // (int32_t)(*addr - value) >= 0, read as the GPU would: polling memory
  // that host threads write.
  auto *word = reinterpret_cast<const std::atomic<uint32_t> *>(addr);
  return enqueue(stream, [word, value] {
    while (static_cast<int32_t>(word->load(std::memory_order_acquire) - value) <
           0)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    return kSuccess;
  });
}

int moduleLoadData(void **out, const void *image) {
  const auto *img = static_cast<const EmulatedModuleImage *>(image);
  if (!img || std::memcmp(img->magic, EmulatedModuleImage().magic, 8) != 0 ||
      !img->module)
    return kInvalidImage;
  std::vector<KernelEntry> entries = registeredKernels(img->module);
  if (entries.empty() && img->source) {
    if (Status st = compileAndRegister(img->module, img->source); !st) {
      if (img->log)
        *img->log = st.message();
      return kInvalidImage;
    }
    entries = registeredKernels(img->module);
  }
  if (entries.empty())
    return kInvalidImage;
  auto *m = new Module;
  for (KernelEntry &e : entries)
    m->functions.push_back(std::make_unique<Function>(Function{std::move(e)}));
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.modules.insert(m);
  *out = m;
  return kSuccess;
}

int moduleUnload(void *h) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.modules.erase(static_cast<Module *>(h)))
    return kInvalidHandle;
  delete static_cast<Module *>(h);
  return kSuccess;
}

int moduleGetFunction(void **out, void *module, const char *name) {
  auto *m = static_cast<Module *>(module);
  for (std::unique_ptr<Function> &f : m->functions)
    if (f->entry.name == name) {
      *out = f.get();
      return kSuccess;
    }
  return kNotFound;
}

int funcGetAttribute(int *value, int attr, void *f) {
  if (attr != cuda::kCuFuncAttrMaxDynamicSharedSizeBytes)
    return kInvalidValue;
  *value = static_cast<Function *>(f)->maxDynamicShared;
  return kSuccess;
}

int funcSetAttribute(void *f, int attr, int value) {
  if (attr != cuda::kCuFuncAttrMaxDynamicSharedSizeBytes || value < 0 ||
      static_cast<size_t>(value) > kMaxDynamicSharedOptIn)
    return kInvalidValue;
  static_cast<Function *>(f)->maxDynamicShared = value;
  return kSuccess;
}

int launchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                 unsigned by, unsigned bz, unsigned smem, void *stream,
                 void **params, void **extra) {
  auto *fn = static_cast<Function *>(f);
  if (extra || (!params && fn->entry.parameters > 0))
    return kInvalidValue;
  if (smem > static_cast<unsigned>(fn->maxDynamicShared))
    return kLaunchOutOfResources;
  LaunchConfig cfg;
  cfg.grid = dim3(gx, gy, gz);
  cfg.block = dim3(bx, by, bz);
  cfg.dynamicShared = smem;
  cfg.maxDynamicShared = static_cast<size_t>(fn->maxDynamicShared);
  {
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    cfg.workers = s.options.launchWorkers;
  }
  // The arguments are read now, as cuLaunchKernel does.
  std::function<Status(const LaunchConfig &)> run =
      fn->entry.bind(fn->entry.kernel, params);
  std::string name = fn->entry.name;
  return enqueue(stream, [cfg, run, name]() mutable {
    cfg.name = name.c_str();
    Status st = run(cfg);
    if (st.ok())
      return kSuccess;
    setLaunchError(st.message());
    return kLaunchFailed;
  });
}

int launchHostFunc(void *stream, void (*fn)(void *), void *data) {
  return enqueue(stream, [fn, data] {
    fn(data);
    return kSuccess;
  });
}

} // namespace

Expected<std::shared_ptr<const CudaDriverApi>>
emulatedCudaDriver(const EmulatedDriverOptions &options) {
  static std::mutex mu;
  static std::shared_ptr<CudaDriverApi> api;
  std::lock_guard<std::mutex> guard(mu);
  State &s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.allocated > 0 && (options.deviceBytes != s.options.deviceBytes ||
                            options.launchWorkers != s.options.launchWorkers))
      return Status::error("the emulated CUDA driver is in use (" +
                           std::to_string(s.allocated) +
                           " bytes allocated); it cannot be reconfigured");
    if (options.deviceBytes <= 0 || options.launchWorkers < 1)
      return Status::error("emulated CUDA driver: device bytes and launch "
                           "workers must be positive");
    s.options = options;
  }
  if (api)
    return std::shared_ptr<const CudaDriverApi>(api);
  api = std::make_shared<CudaDriverApi>();
  CudaDriverApi &a = *api;
  a.where = "the emulated CUDA driver";
  a.emulated = true;
  a.cuGetErrorName = getErrorName;
  a.cuGetErrorString = getErrorString;
  a.cuInit = init;
  a.cuDriverGetVersion = driverGetVersion;
  a.cuDeviceGetCount = deviceGetCount;
  a.cuDeviceGet = deviceGet;
  a.cuDeviceGetName = deviceGetName;
  a.cuDeviceGetAttribute = deviceGetAttribute;
  a.cuDeviceTotalMem_v2 = deviceTotalMem;
  a.cuDevicePrimaryCtxRetain = primaryCtxRetain;
  a.cuDevicePrimaryCtxRelease_v2 = primaryCtxRelease;
  a.cuCtxSetCurrent = ctxSetCurrent;
  a.cuCtxSynchronize = ctxSynchronize;
  a.cuMemGetInfo_v2 = memGetInfo;
  a.cuMemAlloc_v2 = memAlloc;
  a.cuMemFree_v2 = memFree;
  a.cuMemHostRegister_v2 = memHostRegister;
  a.cuMemHostUnregister = memHostUnregister;
  a.cuMemHostGetDevicePointer_v2 = memHostGetDevicePointer;
  a.cuMemAllocHost_v2 = memAllocHost;
  a.cuMemFreeHost = memFreeHost;
  a.cuStreamWaitValue32_v2 = streamWaitValue32;
  a.cuMemcpyHtoDAsync_v2 = memcpyHtoD;
  a.cuMemcpyDtoHAsync_v2 = memcpyDtoH;
  a.cuMemcpyDtoDAsync_v2 = memcpyDtoD;
  a.cuMemsetD32Async = memsetD32;
  a.cuMemsetD8Async = memsetD8;
  a.cuStreamCreate = streamCreate;
  a.cuStreamDestroy_v2 = streamDestroy;
  a.cuStreamSynchronize = streamSynchronize;
  a.cuStreamWaitEvent = streamWaitEvent;
  a.cuEventCreate = eventCreate;
  a.cuEventDestroy_v2 = eventDestroy;
  a.cuEventRecord = eventRecord;
  a.cuEventQuery = eventQuery;
  a.cuEventSynchronize = eventSynchronize;
  a.cuEventElapsedTime = eventElapsedTime;
  a.cuModuleLoadData = moduleLoadData;
  a.cuModuleUnload = moduleUnload;
  a.cuModuleGetFunction = moduleGetFunction;
  a.cuFuncGetAttribute = funcGetAttribute;
  a.cuFuncSetAttribute = funcSetAttribute;
  a.cuLaunchKernel = launchKernel;
  a.cuLaunchHostFunc = launchHostFunc;
  return std::shared_ptr<const CudaDriverApi>(api);
}

int64_t emulatedBytesAllocated() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.allocated;
}

} // namespace mtc::emu
