//===- CudaBackend.cpp - The executor's backend on a CUDA device ----------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/cuda/CudaBackend.h"

#include "lib/Support/Hash.h"

#include "runtime/cuda/emu/EmulatedGemm.h"
#include "runtime/cuda/ops/Embedding.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/Failure.h"

namespace mtc::exec {

using cuda::ops::DevPtr;

Expected<std::unique_ptr<CudaBackend>>
CudaBackend::create(device::CudaDevice &device, int64_t scratchBytes) {
  std::unique_ptr<CudaBackend> b(new CudaBackend(device));
  const std::shared_ptr<const cuda::CudaDriverApi> &api = device.driverTable();
  device.makeCurrent();
  Expected<std::unique_ptr<cuda::KernelLoader>> loader =
      cuda::KernelLoader::create(api, device.ordinal());
  if (!loader)
    return loader.status().withPrefix("the CUDA backend's kernel loader");
  b->loader = std::move(*loader);
  b->functions = std::make_unique<cuda::ops::KernelFunctions>(*b->loader);
  if (api->emulated) {
    b->gemm = emu::emulatedGemm(api);
  } else {
    Expected<std::unique_ptr<cuda::GemmEngine>> gemm = cuda::openCublasLt();
    if (!gemm)
      return gemm.status().withPrefix("the CUDA backend's GEMM engine");
    b->gemm = std::move(*gemm);
  }
  const int64_t flagBytes = 4 * kMaxTokenChecks + 8 * kMaxAuxTerms;
  Status st = cuda::cudaCheck(
      *api,
      api->cuMemAlloc_v2(&b->flagsBase,
                         static_cast<size_t>(flagBytes + scratchBytes)),
      "allocating the CUDA backend's scratch region (" +
          std::to_string(scratchBytes) + " bytes)");
  if (!st)
    return st;
  b->auxBase = b->flagsBase + static_cast<DevPtr>(4 * kMaxTokenChecks);
  b->scratchBase = b->flagsBase + static_cast<DevPtr>(flagBytes);
  b->scratchBytes = scratchBytes;
  Expected<device::Stream> own = device.createStream("cuda backend");
  if (!own)
    return own.status();
  b->ownStream = *own;
  return b;
}

CudaBackend::~CudaBackend() {
  if (flagsBase) {
    dev.makeCurrent();
    // Nothing of ours may still run: the owner synchronised the device.
    dev.driver().cuMemFree_v2(flagsBase);
  }
}

void CudaBackend::check(const Status &st) { raiseIfError(st); }

const char *CudaBackend::arenaBase() const {
  return static_cast<const char *>(valueOrRaise(dev.at(0, 0)));
}

DevPtr CudaBackend::offsetOf(const void *p) const {
  return static_cast<DevPtr>(static_cast<const char *>(p) - arenaBase());
}

Expected<bool> CudaBackend::issue(int stream, const std::function<void()> &fn,
                                  const std::string &label) {
  Status st = dev.compute(
      device::Stream(stream),
      [&](void *cuStream) {
        // The stream work goes to while fn runs, restored however it ends.
        struct Current {
          CudaBackend &b;
          void *cu;
          int id;
          ~Current() {
            b.cu = cu;
            b.streamId = id;
          }
        } saved{*this, cu, streamId};
        cu = cuStream;
        streamId = stream;
        return catchRaised(fn);
      },
      label);
  if (!st)
    return st;
  return true;
}

void *CudaBackend::stream() const {
  if (!cu)
    raise("internal error: CUDA work queued outside of the "
          "device's compute (CudaBackend::issue)");
  return cu;
}

cuda::ops::Launch CudaBackend::launch() {
  cuda::ops::Launch L = memoryLaunch();
  // A new op: its scratch starts over (the previous op's kernels, on the
  // same stream, are done with it before these run), above what an
  // enclosing op holds.
  scratchTop = scratchFloor;
  L.gemm = gemm.get();
  L.scratch = [this](int64_t bytes) -> Expected<DevPtr> {
    int64_t size = (bytes + 255) / 256 * 256;
    if (bytes < 0 || scratchTop + size > scratchBytes)
      return Status::error(
          "the CUDA backend's scratch region (" + std::to_string(scratchBytes) +
          " bytes) cannot hold " + std::to_string(bytes) + " more bytes (" +
          std::to_string(scratchTop) + " in use)");
    DevPtr p = scratchBase + static_cast<DevPtr>(scratchTop);
    scratchTop += size;
    return p;
  };
  return L;
}

std::string CudaBackend::fusedModuleName(const bundle::CudaKernels &kernels) {
  return "fused-" + hex64(xxh64(kernels.source.data(), kernels.source.size())) +
         ".cu";
}

const std::string &
CudaBackend::fusedModule(const bundle::CudaKernels &kernels) {
  auto &last = lastFusedModule;
  if (last.kernels != &kernels || last.data != kernels.source.data() ||
      last.size != kernels.source.size()) {
    last.kernels = &kernels;
    last.data = kernels.source.data();
    last.size = kernels.source.size();
    last.name = fusedModuleName(kernels);
  }
  return last.name;
}

Expected<void *> CudaBackend::fusedFunction(const bundle::CudaKernels &kernels,
                                            const std::string &entry) {
  const std::string &module = fusedModule(kernels);
  auto key = std::make_pair(module, entry);
  if (auto it = fusedFunctions.find(key); it != fusedFunctions.end())
    return it->second;
  Expected<void *> m = loader->load(module, kernels.source);
  if (!m)
    return m.status();
  Expected<void *> fn = loader->function(*m, entry);
  if (!fn)
    return fn.status();
  fusedFunctions.emplace(key, *fn);
  return *fn;
}

cuda::ops::Launch CudaBackend::memoryLaunch() const {
  cuda::ops::Launch L;
  L.api = &dev.driver();
  L.functions = functions.get();
  L.stream = stream();
  return L;
}

void CudaBackend::zero(void *p, int64_t bytes) {
  cuda::ops::Launch L = memoryLaunch();
  check(L.zero(reinterpret_cast<DevPtr>(p), bytes));
}

void CudaBackend::copy(void *dst, const void *src, int64_t bytes) {
  cuda::ops::Launch L = memoryLaunch();
  check(L.copy(reinterpret_cast<DevPtr>(dst), reinterpret_cast<DevPtr>(src),
               bytes));
}

void CudaBackend::fill32(void *p, uint32_t bits, int64_t n) {
  if (n <= 0)
    return;
  launch();
  check(cuda::cudaCheck(
      dev.driver(),
      dev.driver().cuMemsetD32Async(reinterpret_cast<DevPtr>(p), bits,
                                    static_cast<size_t>(n), cu),
      "cuMemsetD32Async"));
}

DevPtr CudaBackend::tokenCheck(const std::string &where, const void *ids,
                               int64_t n, int64_t V) {
  if (static_cast<int64_t>(tokenChecks.size()) == kMaxTokenChecks)
    raise("internal error: more than " + std::to_string(kMaxTokenChecks) +
          " embedding ops between two synchronisations");
  tokenChecks.push_back({where, ids, n, V});
  return flagsBase + 4 * static_cast<DevPtr>(tokenChecks.size() - 1);
}

Status CudaBackend::checkDeferredErrors() {
  return catchRaised([&] { checkDeferredErrorsOrRaise(); });
}

void CudaBackend::checkDeferredErrorsOrRaise() {
  if (tokenChecks.empty())
    return;
  std::vector<TokenCheck> checks;
  checks.swap(tokenChecks);
  std::vector<int32_t> bad(checks.size());
  download(bad.data(), reinterpret_cast<const void *>(flagsBase),
           static_cast<int64_t>(4 * bad.size()));
  for (size_t k = 0; k < checks.size(); ++k) {
    if (bad[k] == cuda::ops::kEmbeddingNoBadIndex)
      continue;
    int32_t id = 0;
    download(&id, static_cast<const int32_t *>(checks[k].ids) + bad[k],
             sizeof id);
    raise(checks[k].where + "token id " + std::to_string(id) + " at position " +
          std::to_string(bad[k]) + " is outside the vocabulary [0, " +
          std::to_string(checks[k].V) + ")");
  }
}

std::pair<int64_t, void *> CudaBackend::reserveAuxTerm() {
  if (auxTerms == kMaxAuxTerms)
    raise("internal error: more than " + std::to_string(kMaxAuxTerms) +
          " aux loss terms between two synchronisations");
  int64_t i = auxTerms++;
  return {i, reinterpret_cast<void *>(auxBase + 8 * static_cast<DevPtr>(i))};
}

std::vector<double> CudaBackend::takeAuxTerms() {
  std::vector<double> terms(static_cast<size_t>(auxTerms));
  auxTerms = 0;
  if (!terms.empty())
    download(terms.data(), reinterpret_cast<const void *>(auxBase),
             static_cast<int64_t>(8 * terms.size()));
  return terms;
}

void CudaBackend::upload(void *dst, const void *src, int64_t bytes) {
  if (!cu)
    raise("internal error: an upload outside of the device's "
          "compute (CudaBackend::issue)");
  check(dev.copyToDevice(device::Stream(streamId),
                         static_cast<int64_t>(offsetOf(dst)), src, bytes,
                         device::Convert::None, "upload"));
}

void CudaBackend::download(void *dst, const void *src, int64_t bytes) {
  const auto *p = static_cast<const char *>(src);
  const char *arena = arenaBase();
  if (p < arena || p + bytes > arena + dev.capacity()) {
    // The backend's own memory (the token checks): read directly, after
    // everything queued on the device so far.
    if (cu)
      raise("internal error: a download of the CUDA backend's own "
            "memory inside the device's compute");
    check(dev.synchronize());
    check(dev.compute(
        device::Stream(ownStream),
        [&](void *stream) {
          return cuda::cudaCheck(dev.driver(),
                                 dev.driver().cuMemcpyDtoHAsync_v2(
                                     dst, reinterpret_cast<DevPtr>(src),
                                     static_cast<size_t>(bytes), stream),
                                 "cuMemcpyDtoHAsync");
        },
        "download"));
    check(dev.synchronize(device::Stream(ownStream)));
    return;
  }
  // Inside compute: after the stream's work so far; outside: after
  // everything queued on the device.
  int s = cu ? streamId : ownStream;
  if (!cu)
    check(dev.synchronize());
  check(dev.copyToHost(device::Stream(s), dst,
                       static_cast<int64_t>(offsetOf(src)), bytes, "download"));
  check(dev.synchronize(device::Stream(s)));
}

} // namespace mtc::exec
