//===- ParamStore.cpp - Host-resident parameters ----------------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/ParamStore.h"

#include "runtime/device/Device.h"
#include "runtime/train/Random.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc::exec {

namespace {

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

const char *const kKindNames[4] = {"parameter values", "gradients", "adamw m",
                                   "adamw v"};

} // namespace

Expected<std::unique_ptr<ParamStore>>
ParamStore::create(const bundle::Bundle &b, const HostStateOptions &options) {
  std::unique_ptr<ParamStore> store(new ParamStore(b));
  if (Status st = store->allocate(options); !st)
    return st;
  return store;
}

ParamStore::ParamStore(const bundle::Bundle &b) : bundle(b) {
  // The slots first, with their offsets; the views once the memory exists.
  auto add = [&](const std::string &name, const bundle::Param &p) {
    ParamSlot s;
    s.name = name;
    s.decl = &p;
    s.offset = elements;
    elements += roundUp(static_cast<size_t>(p.numel()), kAlignFloats);
    index[name] = all.size();
    all.push_back(std::move(s));
  };
  all.reserve(1024);
  for (const bundle::Param &p : b.params)
    add(p.name, p);
  for (const bundle::Layer &l : b.layers)
    for (int64_t i = 0; i < l.count; ++i) {
      std::string prefix = l.name + "." + std::to_string(i) + ".";
      for (const bundle::Param &p : l.params)
        add(prefix + p.name, p);
      for (const bundle::Expert &x : l.experts)
        for (int64_t e = 0; e < x.count; ++e)
          for (const bundle::Param &p : x.params)
            add(prefix + x.name + "." + std::to_string(e) + "." + p.name, p);
    }
}

Status ParamStore::allocate(const HostStateOptions &options) {
  const bool bf16 = options.gradients && options.bf16Gradients;
  // The gradient block holds 2-byte elements when they are bf16.
  auto blockBytesOf = [&](int k) {
    return elements * (k == 1 && bf16 ? sizeof(uint16_t) : sizeof(float));
  };
  auto allocated = [&](int k) {
    return k == 0 || (k == 1 && options.gradients) ||
           (k > 1 && options.moments);
  };
  // Where block k starts (char *) into base[] or, bf16 gradients, bf16Grads.
  auto place = [&](int k, char *at) {
    if (k == 1 && bf16)
      bf16Grads = reinterpret_cast<uint16_t *>(at);
    else
      base[k] = reinterpret_cast<float *>(at);
  };
  if (options.file.empty()) {
    for (int k = 0; k < 4; ++k) {
      if (!allocated(k))
        continue;
      Expected<device::HostBuffer> buf =
          host.allocate(static_cast<int64_t>(blockBytesOf(k)),
                        k == 1 && bf16 ? "bf16 gradients" : kKindNames[k]);
      if (!buf)
        return buf.status();
      buffers.push_back(std::move(*buf));
      place(k, buffers.back().as<char>());
    }
  } else {
    statePath = options.file;
    struct stat st;
    if (::lstat(statePath.c_str(), &st) == 0)
      return Status::error(
          "host state file '" + statePath +
          "' exists; give a path that does not (the file is scratch space, "
          "removed as soon as it is mapped)");
    size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    size_t total = 0;
    for (int k = 0; k < 4; ++k)
      if (allocated(k))
        total += roundUp(blockBytesOf(k), page);
    Expected<device::HostBuffer> buf = host.allocateFileBacked(
        statePath, static_cast<int64_t>(total), "parameter state");
    if (!buf)
      return buf.status();
    buffers.push_back(std::move(*buf));
    if (::unlink(statePath.c_str()) != 0)
      return Status::error(
          "host state file '" + statePath +
          "': cannot remove it after mapping: " + std::strerror(errno));
    char *p = buffers.back().as<char>();
    for (int k = 0; k < 4 && p; ++k)
      if (allocated(k)) {
        place(k, p);
        p += roundUp(blockBytesOf(k), page);
      }
  }
  for (ParamSlot &s : all) {
    size_t n = static_cast<size_t>(s.decl->numel());
    float *at[4];
    for (int k = 0; k < 4; ++k)
      at[k] = base[k] ? base[k] + s.offset : nullptr;
    s.value = HostArray(at[0], n);
    s.grad = HostArray(at[1], at[1] ? n : 0);
    s.m = HostArray(at[2], at[2] ? n : 0);
    s.v = HostArray(at[3], at[3] ? n : 0);
    s.gradBf16 = bf16Grads ? bf16Grads + s.offset : nullptr;
  }
  return Status::success();
}

void ParamStore::initialize(uint64_t seed) {
  int64_t layers = bundle.totalLayerInstances();
  double scaled = std::sqrt(2.0 * std::max<int64_t>(layers, 1));
  for (size_t i = 0; i < all.size(); ++i) {
    ParamSlot &s = all[i];
    const bundle::Param &p = *s.decl;
    // The stream is derived from the name, so adding a parameter does not
    // change the initial values of the others.
    uint64_t stream = 1469598103934665603ull; // FNV-1a of the name
    for (unsigned char c : s.name)
      stream = (stream ^ c) * 1099511628211ull;
    float *dst = s.value.data();
    size_t n = s.value.size();
    if (p.init == "zeros") {
      std::fill(dst, dst + n, 0.0f);
    } else if (p.init == "ones") {
      std::fill(dst, dst + n, 1.0f);
    } else if (p.init == "normal") {
      train::initNormal(dst, n, 0.0f, static_cast<float>(p.initArgs.at(0)),
                        seed, stream);
    } else if (p.init == "scaled_normal") {
      train::initNormal(dst, n, 0.0f,
                        static_cast<float>(p.initArgs.at(0) / scaled), seed,
                        stream);
    } else if (p.init == "uniform") {
      train::initUniform(dst, n, static_cast<float>(p.initArgs.at(0)),
                         static_cast<float>(p.initArgs.at(1)), seed, stream);
    }
  }
}

ParamSlot *ParamStore::find(const std::string &name) {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &all[it->second];
}

ParamSlot *ParamStore::model(const std::string &name) { return find(name); }

ParamSlot *ParamStore::layer(const std::string &layer, int64_t instance,
                             const std::string &name) {
  return find(layer + "." + std::to_string(instance) + "." + name);
}

ParamSlot *ParamStore::expert(const std::string &layer, int64_t instance,
                              const std::string &expert, int64_t index,
                              const std::string &name) {
  return find(layer + "." + std::to_string(instance) + "." + expert + "." +
              std::to_string(index) + "." + name);
}

void ParamStore::zeroGrads() {
  if (float *g = block(Kind::Grad))
    std::fill(g, g + elements, 0.0f);
  if (bf16Grads)
    std::fill(bf16Grads, bf16Grads + elements, uint16_t(0));
}

int64_t ParamStore::totalParams() const {
  int64_t n = 0;
  for (const ParamSlot &s : all)
    n += static_cast<int64_t>(s.value.size());
  return n;
}

int64_t ParamStore::hostBytes() const {
  int64_t n = 0;
  for (const device::HostBuffer &b : buffers)
    n += b.size();
  return n;
}

bool ParamStore::fileBacked() const { return !statePath.empty(); }

int64_t ParamStore::pin(std::string *reason) {
  if (fileBacked()) {
    if (reason)
      *reason = "the state is mapped from the file '" + statePath +
                "' (--host-state-file)";
    return pinnedBytes();
  }
  // Locking most of RAM would starve everything else (with CAP_IPC_LOCK
  // the locked-memory limit does not apply).
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 &&
      hostBytes() - pinnedBytes() > static_cast<int64_t>(pages) * page / 2) {
    if (reason)
      *reason = std::to_string(hostBytes()) +
                " bytes are more than half of the physical memory (" +
                std::to_string(static_cast<int64_t>(pages) * page) + " bytes)";
    return pinnedBytes();
  }
  std::string why;
  for (device::HostBuffer &b : buffers)
    if (Status st = host.pin(b); !st && why.empty())
      why = st.message();
  if (reason && !why.empty())
    *reason = why;
  return pinnedBytes();
}

int64_t ParamStore::pinnedBytes() const { return host.pinnedBytes(); }

} // namespace mtc::exec
