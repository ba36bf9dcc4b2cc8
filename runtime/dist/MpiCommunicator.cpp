//===- MpiCommunicator.cpp - MPI through the dlopen'ed plugin ---*- C++ -*-===//
//
// Part of mtc. Opens libmtc-mpi.so (dist/MpiApi.h) and wraps its table in a
// Communicator. Nothing here links MPI: a machine without the plugin or
// libmpi gets an error at the first MPI launch, never at start-up.
//
//===----------------------------------------------------------------------===//

#include "runtime/dist/Communicator.h"
#include "runtime/dist/MpiApi.h"

#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <unistd.h>

namespace mtc::dist {

namespace {

/// The opened plugin and MPI's lifetime: MPI is finalized, and the plugin
/// closed, when the last communicator using it is gone.
struct Plugin {
  void *handle = nullptr;
  const MtcMpiApi *api = nullptr;
  bool initialized = false;
  ~Plugin() {
    if (initialized)
      api->finalize();
    // The library stays loaded: MPI's own threads may outlive finalize.
  }
  std::string message(int code) const {
    char buf[512];
    api->error_string(code, buf, sizeof buf);
    return buf;
  }
};

/// Where the plugin may be: MTC_MPI_PLUGIN, beside the executable, then the
/// loader's search path.
std::vector<std::string> pluginCandidates() {
  if (const char *env = std::getenv("MTC_MPI_PLUGIN"); env && *env)
    return {env};
  std::vector<std::string> names;
  std::error_code ec;
  std::filesystem::path exe =
      std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path dir = exe.parent_path();
    names.push_back((dir.parent_path() / "lib" / "libmtc-mpi.so").string());
    names.push_back((dir / "libmtc-mpi.so").string());
  }
  names.push_back("libmtc-mpi.so");
  return names;
}

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(std::shared_ptr<Plugin> plugin, int handle, int rank,
                  int size, std::string lib)
      : plugin(std::move(plugin)), handle(handle), rank_(rank), size_(size),
        lib(std::move(lib)) {}
  ~MpiCommunicator() override {
    if (handle != 0)
      plugin->api->free_comm(handle);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "MPI (" + lib + ")"; }

  Status allreduceSum(float *buf, int64_t n) override {
    return check("allreduce",
                 plugin->api->allreduce_sum(handle, MTC_MPI_F32, buf, n));
  }
  Status allreduceSum(double *buf, int64_t n) override {
    return check("allreduce",
                 plugin->api->allreduce_sum(handle, MTC_MPI_F64, buf, n));
  }
  Status reduceScatterSum(const float *send, float *recv,
                          const std::vector<int64_t> &counts) override {
    return check("reduce-scatter",
                 plugin->api->reduce_scatter_sum(handle, MTC_MPI_F32, send,
                                                 recv, counts.data()));
  }
  Status allgather(const void *send, void *recv,
                   const std::vector<int64_t> &counts) override {
    return check("allgather",
                 plugin->api->allgatherv(handle, send, recv, counts.data()));
  }
  Status broadcast(void *buf, int64_t bytes, int root) override {
    return check("broadcast", plugin->api->broadcast(handle, buf, bytes, root));
  }
  Status barrier() override {
    return check("barrier", plugin->api->barrier(handle));
  }
  Expected<std::unique_ptr<Communicator>> duplicate() override {
    int h = 0;
    if (Status st = check("MPI_Comm_dup", plugin->api->dup(handle, &h)); !st)
      return st;
    return std::unique_ptr<Communicator>(
        new MpiCommunicator(plugin, h, rank_, size_, lib));
  }
  [[noreturn]] void abort(int code) override {
    plugin->api->abort(code);
    std::_Exit(code); // MPI_Abort does not return; this is for the compiler
  }

private:
  Status check(const char *what, int code) const {
    if (code == 0)
      return Status::success();
    return Status::error(std::string("MPI ") + what + " failed on rank " +
                         std::to_string(rank_) + ": " + plugin->message(code));
  }

  std::shared_ptr<Plugin> plugin;
  int handle, rank_, size_;
  std::string lib;
};

} // namespace

Expected<std::shared_ptr<Communicator>> openMpi() {
  auto plugin = std::make_shared<Plugin>();
  std::string tried, why;
  for (const std::string &name : pluginCandidates()) {
    plugin->handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (plugin->handle)
      break;
    tried += (tried.empty() ? "" : ", ") + name;
    if (const char *e = ::dlerror())
      why = e;
  }
  if (!plugin->handle)
    return Status::error(
        "launched under MPI but libmtc-mpi.so / libmpi not found (tried " +
        tried + "; " + why +
        "); build mtc where MPI is installed (scripts/install-deps.sh "
        "installs Open MPI), set MTC_MPI_PLUGIN to the plugin, or run "
        "without mpirun (--data-parallel off)");
  auto fn =
      reinterpret_cast<MtcMpiApiFn>(::dlsym(plugin->handle, "mtc_mpi_api_v1"));
  if (!fn)
    return Status::error("the MPI plugin has no mtc_mpi_api_v1: it is not "
                         "libmtc-mpi.so of this mtc");
  plugin->api = fn();
  if (!plugin->api || plugin->api->version != MTC_MPI_API_VERSION)
    return Status::error(
        "the MPI plugin implements interface version " +
        std::to_string(plugin->api ? plugin->api->version : -1) + ", not " +
        std::to_string(MTC_MPI_API_VERSION) +
        ": it belongs to another build of mtc");
  int rank = 0, size = 0;
  char err[512] = "";
  if (int rc = plugin->api->init(&rank, &size, err, sizeof err); rc != 0)
    return Status::error(std::string("MPI could not start: ") +
                         (*err ? err : plugin->message(rc).c_str()));
  plugin->initialized = true;
  char version[256];
  plugin->api->library_version(version, sizeof version);
  return std::shared_ptr<Communicator>(
      new MpiCommunicator(plugin, 0, rank, size, version));
}

} // namespace mtc::dist
