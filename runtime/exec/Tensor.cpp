//===- Tensor.cpp - Tensors and device-memory workspaces -------*- C++ -*-===//
//
// Part of mtc. The executor's tensors (Executor.h): heap buffers, views of
// parameters and device memory, and bump allocation from a Workspace region
// when one is current on the thread.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Executor.h"
#include "runtime/exec/Failure.h"

#include "lib/Bundle/Plan.h"

#include <algorithm>
#include <cstring>

namespace mtc::exec {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

namespace {
thread_local Workspace *currentWorkspace = nullptr;
} // namespace

void *Workspace::allocate(int64_t bytes, bool zero) {
  int64_t size = bundle::align64(bytes);
  if (size < 0 || top + size > cap)
    raise("device memory plan violated: the " + name + " region (" +
          std::to_string(cap) + " bytes) cannot hold " + std::to_string(size) +
          " more bytes (" + std::to_string(top) + " in use)");
  char *p = base + top;
  top += size;
  high = std::max(high, top);
  if (zero) {
    if (mem)
      mem->zero(p, size);
    else
      std::memset(p, 0, static_cast<size_t>(size));
  }
  return p;
}

void Workspace::reserve(int64_t bytes) {
  if (bytes > cap)
    raise("device memory plan violated: the " + name + " region (" +
          std::to_string(cap) + " bytes) cannot hold the " +
          std::to_string(bytes) + " bytes of planned values");
  top = bytes;
  high = std::max(high, top);
}

char *Workspace::at(int64_t offset, int64_t bytes) {
  if (offset < 0 || bytes < 0 || offset + bytes > cap)
    raise("device memory plan violated: [" + std::to_string(offset) + ", +" +
          std::to_string(bytes) + ") lies outside the " + name + " region (" +
          std::to_string(cap) + " bytes)");
  return base + offset;
}

Workspace *Workspace::current() { return currentWorkspace; }

Workspace::Scope::Scope(Workspace *w) : saved(currentWorkspace) {
  currentWorkspace = w;
}

Workspace::Scope::~Scope() { currentWorkspace = saved; }

std::shared_ptr<float> Tensor::allocate(int64_t n, bool zero, DType t) {
  const int64_t elem = bundle::elementBytes(t);
  if (Workspace *w = Workspace::current())
    return std::shared_ptr<float>(
        static_cast<float *>(w->allocate(elem * n, zero)), [](float *) {});
  // Heap buffers come from malloc's free lists (keepFreedMemory below), so
  // an uninitialised one costs no memset and, in steady state, no page
  // faults. 64-byte alignment: whole cache lines for the vector kernels.
  size_t bytes = static_cast<size_t>(elem * std::max<int64_t>(n, 1));
  auto *p = static_cast<float *>(::operator new(bytes, std::align_val_t(64)));
  if (zero)
    std::memset(p, 0, bytes);
  return std::shared_ptr<float>(
      p, [](float *q) { ::operator delete(q, std::align_val_t(64)); });
}

Tensor Tensor::zeros(std::vector<int64_t> shape, DType type) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = type;
  t.f = allocate(t.numel(), true, type);
  return t;
}

Tensor Tensor::empty(std::vector<int64_t> shape, DType type) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = type;
  t.f = allocate(t.numel(), false, type);
  return t;
}

Tensor Tensor::ints(std::vector<int64_t> shape, const int32_t *src) {
  Tensor t;
  t.shape = std::move(shape);
  t.isInt = true;
  t.dtype = DType::I32;
  int64_t n = t.numel();
  if (Workspace *w = Workspace::current()) {
    t.i = std::shared_ptr<int32_t>(
        static_cast<int32_t *>(w->allocate(4 * n, false)), [](int32_t *) {});
    if (w->backend()) {
      w->backend()->upload(t.i.get(), src, 4 * n);
      return t;
    }
  } else {
    t.i = std::shared_ptr<int32_t>(new int32_t[static_cast<size_t>(n)],
                                   std::default_delete<int32_t[]>());
  }
  std::copy(src, src + n, t.i.get());
  return t;
}

Tensor Tensor::view(std::vector<int64_t> shape, float *data, DType type) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = type;
  t.f = std::shared_ptr<float>(data, [](float *) {});
  return t;
}

} // namespace mtc::exec
