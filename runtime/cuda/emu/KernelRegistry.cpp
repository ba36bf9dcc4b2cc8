//===- KernelRegistry.cpp - Kernels the emulated driver finds by name -----===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/emu/KernelRegistry.h"

#include <map>
#include <mutex>

namespace mtc::emu {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::vector<KernelEntry>> modules;
};

Registry &registry() {
  static Registry *r = new Registry; // never destroyed: used at exit too
  return *r;
}

} // namespace

void detail::registerKernel(KernelEntry entry) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.modules[entry.module].push_back(std::move(entry));
}

std::vector<KernelEntry> registeredKernels(const std::string &module) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.modules.find(module);
  return it == r.modules.end() ? std::vector<KernelEntry>() : it->second;
}

std::vector<std::string> registeredModules() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const auto &[name, entries] : r.modules)
    out.push_back(name);
  return out;
}

} // namespace mtc::emu
