//===- ParamStore.cpp - Host-resident parameters ----------------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/ParamStore.h"

#include "runtime/train/Random.h"

#include <algorithm>
#include <cmath>

namespace mtc::exec {

ParamStore::ParamStore(const bundle::Bundle &b) : bundle(b) {
  auto add = [&](const std::string &name, const bundle::Param &p) {
    ParamSlot s;
    s.name = name;
    s.decl = &p;
    size_t n = static_cast<size_t>(p.numel());
    s.value.assign(n, 0.0f);
    s.grad.assign(n, 0.0f);
    s.m.assign(n, 0.0f);
    s.v.assign(n, 0.0f);
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
  for (ParamSlot &s : all)
    std::fill(s.grad.begin(), s.grad.end(), 0.0f);
}

int64_t ParamStore::totalParams() const {
  int64_t n = 0;
  for (const ParamSlot &s : all)
    n += static_cast<int64_t>(s.value.size());
  return n;
}

} // namespace mtc::exec
