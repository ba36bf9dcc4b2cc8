//===- Nvrtc.cpp - CUDA C to PTX and cubin at run time --------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Nvrtc.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

namespace mtc::cuda {

namespace {

/// "Used 10 registers, used 1 barriers, 256 bytes smem, 364 bytes cmem[0]":
/// the number before \p unit ("registers", "bytes smem"), or 0.
int64_t numberBefore(const std::string &line, const std::string &unit) {
  size_t at = line.find(" " + unit);
  if (at == std::string::npos)
    return 0;
  size_t start = at;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(line[start - 1])))
    --start;
  return start == at ? 0 : std::strtoll(line.c_str() + start, nullptr, 10);
}

} // namespace

Expected<std::string> cudaToolkitIncludeDir() {
  std::vector<std::string> tried;
  auto fromEnv = [&](const char *var, const char *suffix) {
    if (const char *v = std::getenv(var); v && *v)
      tried.push_back(std::string(v) + suffix);
  };
  fromEnv("MTC_CUDA_INCLUDE", "");
  fromEnv("CUDA_HOME", "/include");
  fromEnv("CUDA_PATH", "/include");
  tried.push_back("/usr/local/cuda/include");
  for (const std::string &dir : tried)
    if (FILE *f = std::fopen((dir + "/cuda_bf16.h").c_str(), "r")) {
      std::fclose(f);
      return dir;
    }
  std::string list;
  for (const std::string &dir : tried)
    list += (list.empty() ? "" : ", ") + dir;
  return Status::error("no CUDA toolkit headers (cuda_bf16.h) in " + list +
                       "; set MTC_CUDA_INCLUDE to the toolkit's include "
                       "directory");
}

std::vector<KernelStats> parsePtxasLog(const std::string &log) {
  std::vector<KernelStats> out;
  std::istringstream in(log);
  std::string line;
  const std::string entry = "Compiling entry function '";
  while (std::getline(in, line)) {
    if (size_t at = line.find(entry); at != std::string::npos) {
      size_t start = at + entry.size();
      size_t end = line.find('\'', start);
      KernelStats k;
      k.name = line.substr(start, end - start);
      out.push_back(k);
      continue;
    }
    if (out.empty())
      continue;
    KernelStats &k = out.back();
    if (line.find("bytes stack frame") != std::string::npos) {
      k.stackBytes = numberBefore(line, "bytes stack frame");
      k.spillStores = numberBefore(line, "bytes spill stores");
      k.spillLoads = numberBefore(line, "bytes spill loads");
    } else if (line.find("Used ") != std::string::npos &&
               line.find(" registers") != std::string::npos) {
      k.registers = static_cast<int>(numberBefore(line, "registers"));
      k.sharedBytes = numberBefore(line, "bytes smem");
      k.constantBytes = numberBefore(line, "bytes cmem[0]");
    }
  }
  return out;
}

Expected<std::shared_ptr<const Nvrtc>> Nvrtc::load() {
  static std::mutex mu;
  static std::shared_ptr<const Nvrtc> loaded;
  static Status failure;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded)
    return loaded;
  if (!failure.ok())
    return failure;
  auto fail = [&](const std::string &msg) {
    failure = Status::error("NVRTC not found: " + msg +
                            "; install the CUDA toolkit or set MTC_NVRTC to "
                            "the path of libnvrtc.so");
    return failure;
  };
  Expected<DynamicLibrary> lib = DynamicLibrary::open(
      {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, "MTC_NVRTC");
  if (!lib)
    return fail(lib.message());
  auto n = std::make_shared<Nvrtc>();
  n->lib = std::move(*lib);
  std::vector<const char *> names;
  std::vector<void **> slots;
#define MTC_NVRTC_SYMBOL(name, ret, params)                                    \
  names.push_back(#name);                                                      \
  slots.push_back(reinterpret_cast<void **>(&n->api.name));
#include "runtime/cuda/NvrtcSymbols.def"
  if (Status st = resolveSymbols(n->lib, names, slots); !st.ok())
    return fail(st.message());
  if (int rc = n->api.nvrtcVersion(&n->versionMajor, &n->versionMinor))
    return fail(n->lib.name() + ": nvrtcVersion failed (" + std::to_string(rc) +
                ")");
  loaded = std::move(n);
  return loaded;
}

std::vector<std::string> Nvrtc::supportedArchs() const {
  int count = 0;
  std::vector<std::string> out;
  if (api.nvrtcGetNumSupportedArchs(&count) != 0 || count <= 0)
    return out;
  std::vector<int> archs(static_cast<size_t>(count));
  if (api.nvrtcGetSupportedArchs(archs.data()) != 0)
    return out;
  for (int a : archs)
    out.push_back("sm_" + std::to_string(a));
  return out;
}

std::string Nvrtc::identity() const {
  return lib.name() + " " + std::to_string(versionMajor) + "." +
         std::to_string(versionMinor);
}

Expected<CompiledModule> Nvrtc::compile(const std::string &source,
                                        const std::string &name,
                                        const NvrtcOptions &options) const {
  auto error = [&](int rc) {
    const char *what = api.nvrtcGetErrorString(rc);
    return std::string(what ? what : "unknown NVRTC error") + " (" +
           std::to_string(rc) + ")";
  };
  void *prog = nullptr;
  std::vector<const char *> headerNames, headerTexts;
  for (const auto &[hname, htext] : options.headers) {
    headerNames.push_back(hname.c_str());
    headerTexts.push_back(htext.c_str());
  }
  if (int rc = api.nvrtcCreateProgram(&prog, source.c_str(), name.c_str(),
                                      static_cast<int>(headerNames.size()),
                                      headerTexts.data(), headerNames.data()))
    return Status::error(name + ": nvrtcCreateProgram: " + error(rc));
  struct Destroy {
    const NvrtcApi &api;
    void *&prog;
    ~Destroy() { api.nvrtcDestroyProgram(&prog); }
  } destroy{api, prog};

  std::vector<std::string> opts = {"--gpu-architecture=" + options.arch,
                                   "-std=c++17"};
  if (options.cubin)
    opts.push_back("--ptxas-options=-v");
  for (const std::string &dir : options.includeDirs)
    opts.push_back("--include-path=" + dir);
  opts.insert(opts.end(), options.extra.begin(), options.extra.end());
  std::vector<const char *> argv;
  for (const std::string &o : opts)
    argv.push_back(o.c_str());
  int rc =
      api.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  CompiledModule m;
  m.arch = options.arch;
  size_t size = 0;
  if (api.nvrtcGetProgramLogSize(prog, &size) == 0 && size > 1) {
    m.log.resize(size);
    api.nvrtcGetProgramLog(prog, m.log.data());
    m.log.resize(std::strlen(m.log.c_str()));
  }
  if (rc != 0)
    return Status::error(name + ": NVRTC failed for " + options.arch + ": " +
                         error(rc) + "\n" + m.log);
  if (int r = api.nvrtcGetPTXSize(prog, &size))
    return Status::error(name + ": nvrtcGetPTXSize: " + error(r));
  m.ptx.resize(size);
  if (int r = api.nvrtcGetPTX(prog, m.ptx.data()))
    return Status::error(name + ": nvrtcGetPTX: " + error(r));
  m.ptx.resize(std::strlen(m.ptx.c_str()));
  if (options.cubin) {
    if (int r = api.nvrtcGetCUBINSize(prog, &size))
      return Status::error(name + ": nvrtcGetCUBINSize: " + error(r));
    m.cubin.resize(size);
    if (int r = api.nvrtcGetCUBIN(prog, m.cubin.data()))
      return Status::error(name + ": nvrtcGetCUBIN: " + error(r));
    m.stats = parsePtxasLog(m.log);
  }
  return m;
}

} // namespace mtc::cuda
