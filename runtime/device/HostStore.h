//===- HostStore.h - Page-aligned host memory for persistent state -*- C++
//-*-=//
//
// Part of mtc. The fp32 master weights, AdamW m and v, gradients and the
// streaming copy live in host memory allocated here: page-aligned anonymous
// mappings (zero-filled, committed as they are touched), optionally pinned
// (mlock here; a CudaDevice pins with cudaHostRegister so copies can be
// asynchronous DMA), or mapped from a file (MAP_SHARED) for models whose state
// is larger than RAM. A HostBuffer owns its memory (munmap in the
// destructor); the HostStore only allocates and counts.
//
// Errors are values (Expected) naming what the memory is for and its size.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DEVICE_HOSTSTORE_H
#define MTC_RUNTIME_DEVICE_HOSTSTORE_H

#include "lib/Support/Status.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mtc::device {

class HostStore;

/// Move-only owner of one host allocation. An empty buffer (default, moved
/// from, or of 0 bytes) has data() == nullptr.
class HostBuffer {
public:
  HostBuffer() = default;
  HostBuffer(HostBuffer &&other) noexcept;
  HostBuffer &operator=(HostBuffer &&other) noexcept;
  HostBuffer(const HostBuffer &) = delete;
  HostBuffer &operator=(const HostBuffer &) = delete;
  ~HostBuffer();

  void *data() const { return ptr; }
  template <typename T> T *as() const { return static_cast<T *>(ptr); }
  int64_t size() const { return bytes; }
  bool pinned() const { return isPinned; }
  bool fileBacked() const { return isFile; }
  /// What the memory holds (the name given to allocate), for messages.
  const std::string &what() const { return name; }

  /// Writes a file-backed buffer's dirty pages to its file (msync); the error
  /// names the buffer. A no-op for anonymous memory.
  Status sync();

  /// Unmaps the memory now (the buffer becomes empty).
  void release();

private:
  friend class HostStore;
  struct Counters {
    std::atomic<int64_t> host{0}, file{0}, pinned{0};
  };
  void *ptr = nullptr;
  int64_t bytes = 0;
  size_t mapped = 0;
  bool isPinned = false;
  bool isFile = false;
  std::string name;
  std::shared_ptr<Counters> counters;
};

class HostStore {
public:
  HostStore();

  /// \p bytes of zero-filled, page-aligned memory for \p what ("adamw m of
  /// layers.3"). An error naming \p what and the size on failure.
  Expected<HostBuffer> allocate(int64_t bytes, const std::string &what);

  /// Memory backed by the file \p path (created if missing, resized to
  /// \p bytes; existing contents up to \p bytes are kept, new bytes read as
  /// zero), mapped MAP_SHARED: writes reach the file. Disk space is reserved
  /// up front where the file system supports it, so a full disk is an error
  /// here rather than a SIGBUS later. An error names the path; a file this
  /// call created is removed again when it fails.
  Expected<HostBuffer> allocateFileBacked(const std::string &path,
                                          int64_t bytes,
                                          const std::string &what = "");

  /// Best effort: locks \p buf in RAM (mlock). The error says why the system
  /// forbids it (RLIMIT_MEMLOCK); callers may go on without pinning, copies
  /// from unpinned memory are just slower on a GPU.
  Status pin(HostBuffer &buf);

  /// Bytes of live anonymous allocations / file-backed mappings / pinned
  /// buffers made by this store.
  int64_t hostBytes() const;
  int64_t fileBytes() const;
  int64_t pinnedBytes() const;

private:
  std::shared_ptr<HostBuffer::Counters> counters;
};

} // namespace mtc::device

#endif // MTC_RUNTIME_DEVICE_HOSTSTORE_H
