//===- KernelCache.cpp - Compiled CUDA kernels kept on disk ---------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/KernelCache.h"

#include "lib/Format/MappedFile.h"
#include "lib/Support/Hash.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace mtc::cuda {

namespace {

constexpr char kMagic[4] = {'M', 'T', 'C', 'K'};
constexpr uint32_t kFormat = 1;
/// magic, format, key, payload bytes, payload xxh64.
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8 + 8;

void put64(std::string &out, uint64_t v) {
  out.append(reinterpret_cast<const char *>(&v), 8);
}

uint64_t get64(const uint8_t *p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

/// Payload: three length-prefixed strings (PTX, cubin, log).
std::string encode(const CompiledModule &m) {
  std::string out;
  for (const std::string *s : {&m.ptx, &m.cubin, &m.log}) {
    put64(out, s->size());
    out += *s;
  }
  return out;
}

bool decode(const uint8_t *p, uint64_t n, CompiledModule &m) {
  uint64_t at = 0;
  for (std::string *s : {&m.ptx, &m.cubin, &m.log}) {
    if (n - at < 8)
      return false;
    uint64_t len = get64(p + at);
    at += 8;
    if (len > n - at)
      return false;
    s->assign(reinterpret_cast<const char *>(p + at), len);
    at += len;
  }
  return at == n;
}

} // namespace

std::string KernelCache::defaultDirectory() {
  if (const char *d = std::getenv("MTC_CACHE_DIR"); d && *d)
    return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/mtc";
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/mtc";
  return "";
}

KernelCache::KernelCache(std::string dir) : dir(std::move(dir)) {}

uint64_t KernelCache::key(const Nvrtc &nvrtc, const std::string &source,
                          const NvrtcOptions &options) {
  std::string text = nvrtc.identity() + '\0' + options.arch + '\0' +
                     (options.cubin ? "cubin" : "ptx") + '\0';
  for (const std::string &o : options.extra)
    text += o + '\0';
  for (const std::string &d : options.includeDirs)
    text += "-I" + d + '\0';
  for (const auto &[name, header] : options.headers)
    text += name + '\0' + header + '\0';
  text += source;
  return xxh64(text.data(), text.size());
}

std::string KernelCache::entryPath(uint64_t k) const {
  return dir + "/kernels/" + hex64(k) + ".bin";
}

Expected<CompiledModule>
KernelCache::getOrCompile(const Nvrtc &nvrtc, const std::string &source,
                          const std::string &name,
                          const NvrtcOptions &options) {
  uint64_t k = key(nvrtc, source, options);
  std::string path = dir.empty() ? "" : entryPath(k);
  if (!path.empty() && ::access(path.c_str(), F_OK) == 0) {
    Expected<MappedFile> f = MappedFile::open(path);
    CompiledModule m;
    bool good = f && f->size() >= kHeaderBytes &&
                std::memcmp(f->data(), kMagic, 4) == 0;
    if (good) {
      const uint8_t *p = f->data();
      uint32_t format;
      std::memcpy(&format, p + 4, 4);
      uint64_t bytes = get64(p + 16);
      good = format == kFormat && get64(p + 8) == k &&
             bytes == f->size() - kHeaderBytes &&
             xxh64(p + kHeaderBytes, bytes) == get64(p + 24) &&
             decode(p + kHeaderBytes, bytes, m);
    }
    if (good) {
      ++hitCount;
      m.arch = options.arch;
      if (options.cubin)
        m.stats = parsePtxasLog(m.log);
      return m;
    }
    ++rejectCount;
  }
  ++missCount;
  Expected<CompiledModule> m = nvrtc.compile(source, name, options);
  if (!m || path.empty())
    return m;
  std::error_code ec;
  std::filesystem::create_directories(dir + "/kernels", ec);
  if (ec)
    return m;
  std::string payload = encode(*m);
  std::string entry(kMagic, 4);
  entry.append(reinterpret_cast<const char *>(&kFormat), 4);
  put64(entry, k);
  put64(entry, payload.size());
  put64(entry, xxh64(payload.data(), payload.size()));
  entry += payload;
  // Best effort: a cache that cannot be written only costs compile time.
  if (Expected<AtomicFileWriter> w = AtomicFileWriter::create(path)) {
    if (w->write(entry.data(), entry.size()).ok())
      (void)w->commit();
  }
  return m;
}

} // namespace mtc::cuda
