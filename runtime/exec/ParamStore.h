//===- ParamStore.h - Host-resident parameters and optimizer state -*- C++
//-*-===//
//
// Part of mtc. Every parameter instance of a bundle, with its fp32 value,
// gradient and AdamW moments, in host memory. Instance names follow the
// checkpoint convention: model-level `name`, layer instances `Layer.i.name`,
// experts of layer instance i `Layer.i.Expert.e.name`.
//
// The memory comes from a device::HostStore: one page-aligned block per array
// kind (values, gradients, AdamW m, AdamW v), every tensor starting on a
// 64-byte boundary at the same element offset in each block; the blocks are
// zero-filled, can be pinned for asynchronous device copies, and can live in
// a file mapping for state larger than RAM.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_PARAMSTORE_H
#define MTC_RUNTIME_EXEC_PARAMSTORE_H

#include "lib/Bundle/Bundle.h"
#include "runtime/device/HostStore.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mtc::exec {

/// A non-owning view of one tensor's fp32 array in the ParamStore's host
/// memory (std::span<float>, which C++17 lacks, with std::vector's const
/// rules: a const view gives const floats). Not copyable: copying the
/// std::vector it replaces copied the floats, copying a view would alias them;
/// use toVector() for a copy.
class HostArray {
public:
  HostArray() = default;
  HostArray(float *data, size_t size) : ptr(data), count(size) {}
  HostArray(HostArray &&) = default;
  HostArray &operator=(HostArray &&) = default;
  HostArray(const HostArray &) = delete;
  HostArray &operator=(const HostArray &) = delete;

  float *data() { return ptr; }
  const float *data() const { return ptr; }
  size_t size() const { return count; }
  bool empty() const { return count == 0; }
  float &operator[](size_t i) { return ptr[i]; }
  const float &operator[](size_t i) const { return ptr[i]; }
  float *begin() { return ptr; }
  float *end() { return ptr + count; }
  const float *begin() const { return ptr; }
  const float *end() const { return ptr + count; }
  std::vector<float> toVector() const { return {ptr, ptr + count}; }

private:
  float *ptr = nullptr;
  size_t count = 0;
};

struct ParamSlot {
  std::string name; ///< checkpoint name
  const bundle::Param *decl = nullptr;
  /// Views into the store's four blocks, all at element `offset`.
  HostArray value, grad, m, v;
  /// With HostStateOptions::bf16Gradients: this tensor's bf16 gradients
  /// (raw bits, value.size() of them, at element `offset` of the bf16
  /// gradient block); `grad` is then empty. nullptr otherwise.
  uint16_t *gradBf16 = nullptr;
  /// Element offset of this tensor in each block (a multiple of
  /// ParamStore::kAlignFloats).
  size_t offset = 0;
  /// Weight decay applies to matrices (rank >= 2), not to norms and biases.
  bool decay() const { return decl && decl->shape.size() >= 2; }
};

/// Where the ParamStore's memory comes from.
struct HostStateOptions {
  /// "" : anonymous memory. Otherwise a path that must not exist: the four
  /// blocks are mapped MAP_SHARED from a file created there (disk space
  /// reserved up front), which is unlinked at once, so that the kernel pages
  /// the state to that file system instead of swap, and the space is freed
  /// when the process ends, however it ends.
  std::string file;
  /// false: no gradient block (12 B/param; the immediate optimizer
  /// placement, whose gradients pass through the stream executor's
  /// `grads.host` ring). Every slot's `grad` is then empty (null data).
  bool gradients = true;
  /// With gradients: keep them as bf16 (2 B/param, 14 B/param in all;
  /// `--grad-dtype bf16`, docs/training.md): the gradient block holds
  /// uint16_t bf16 bits, written by a converting device copy, and every
  /// slot's `gradBf16` points into it.
  bool bf16Gradients = false;
  /// false: no AdamW m and v blocks (a sharded optimizer keeps its part of
  /// them elsewhere, docs/distributed.md). Every slot's `m` and `v` is then
  /// empty (null data).
  bool moments = true;
};

class ParamStore {
public:
  /// Creates one slot per parameter instance (values zero; call initialize)
  /// and allocates the state. An error naming the size (and the file) when
  /// the memory cannot be had.
  static Expected<std::unique_ptr<ParamStore>>
  create(const bundle::Bundle &b, const HostStateOptions &options = {});
  ParamStore(const ParamStore &) = delete;
  ParamStore &operator=(const ParamStore &) = delete;

  /// Initialises values as declared (normal, scaled_normal, ...) from a seed;
  /// the result does not depend on the thread count.
  void initialize(uint64_t seed);

  ParamSlot *model(const std::string &name);
  ParamSlot *layer(const std::string &layer, int64_t instance,
                   const std::string &name);
  /// Parameter \p name of expert \p index of \p expert in a layer instance.
  ParamSlot *expert(const std::string &layer, int64_t instance,
                    const std::string &expert, int64_t index,
                    const std::string &name);
  std::vector<ParamSlot> &slots() { return all; }
  const std::vector<ParamSlot> &slots() const { return all; }
  ParamSlot *find(const std::string &name);

  void zeroGrads();
  int64_t totalParams() const;
  /// Bytes of host memory per parameter held here (value, grad, m, v),
  /// before alignment padding: the estimate used before allocating.
  static constexpr int kBytesPerParam = 16;
  /// Every tensor starts at a multiple of this many floats (64 bytes).
  static constexpr size_t kAlignFloats = 16;

  enum class Kind { Value, Grad, M, V };
  /// Start of the block of \p kind (page-aligned; nullptr without
  /// parameters, and for Kind::Grad without fp32 gradients); blockElements()
  /// floats, padding included (zero).
  float *block(Kind kind) { return base[static_cast<int>(kind)]; }
  const float *block(Kind kind) const { return base[static_cast<int>(kind)]; }
  size_t blockElements() const { return elements; }
  /// The bf16 gradient block (HostStateOptions::bf16Gradients; else
  /// nullptr): blockElements() bf16 values.
  uint16_t *gradBf16Block() { return bf16Grads; }

  /// Bytes allocated for the four blocks (4 x 4 x blockElements()), in RAM or
  /// in the file.
  int64_t hostBytes() const;
  /// Whether the state is mapped from HostStateOptions::file.
  bool fileBacked() const;
  /// Best effort: locks the blocks in RAM (mlock today; cudaHostRegister on a
  /// CUDA device) so device copies from them can be asynchronous. Returns the
  /// bytes pinned by this call and earlier ones; when that is less than
  /// hostBytes(), \p reason (if given) says why (the locked-memory limit, a
  /// file-backed state). Not an error: copies from unpinned memory are slower.
  int64_t pin(std::string *reason = nullptr);
  int64_t pinnedBytes() const;

private:
  /// The slots and their offsets (create()).
  explicit ParamStore(const bundle::Bundle &b);
  /// The memory and the slots' views of it (create()).
  Status allocate(const HostStateOptions &options);

  const bundle::Bundle &bundle;
  std::vector<ParamSlot> all;
  std::map<std::string, size_t> index;
  device::HostStore host;
  /// Anonymous memory: one buffer per kind. File-backed: one buffer holding
  /// the four blocks, each starting on a page boundary.
  std::vector<device::HostBuffer> buffers;
  float *base[4] = {nullptr, nullptr, nullptr, nullptr};
  uint16_t *bf16Grads = nullptr; ///< the gradient block when it is bf16
  size_t elements = 0;
  std::string statePath; ///< HostStateOptions::file ("" : anonymous)
};

} // namespace mtc::exec

#endif // MTC_RUNTIME_EXEC_PARAMSTORE_H
