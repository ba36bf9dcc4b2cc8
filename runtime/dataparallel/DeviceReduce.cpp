//===- DeviceReduce.cpp - Gradient sums on the device with NCCL -----------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/dataparallel/DeviceReduce.h"

#include "runtime/dist/EmulatedNccl.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace mtc::driver {

namespace {
double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
} // namespace

namespace {
class AlreadySummed final : public dist::Communicator {
public:
  AlreadySummed(int rank, int size) : r(rank), n(size) {}
  int rank() const override { return r; }
  int size() const override { return n; }
  std::string name() const override { return "summed on the device"; }
  Status allreduceSum(float *, int64_t) override { return refuse(); }
  Status allreduceSum(double *, int64_t) override { return refuse(); }
  Status reduceScatterSum(const float *send, float *recv,
                          const std::vector<int64_t> &counts) override {
    int64_t off = 0;
    for (int q = 0; q < r; ++q)
      off += counts.at(q);
    std::memmove(recv, send + off, 4 * counts.at(r));
    return Status::success();
  }
  Status allgather(const void *, void *,
                   const std::vector<int64_t> &) override {
    return refuse();
  }
  Status broadcast(void *, int64_t, int) override { return refuse(); }
  Status barrier() override { return refuse(); }
  Expected<std::unique_ptr<Communicator>> duplicate() override {
    return std::unique_ptr<Communicator>(new AlreadySummed(r, n));
  }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }

private:
  static Status refuse() {
    return Status::error("internal: a collective on gradients already "
                         "summed on the device");
  }
  int r, n;
};
} // namespace

std::unique_ptr<dist::Communicator> alreadySummed(int rank, int size) {
  return std::make_unique<AlreadySummed>(rank, size);
}

Status checkDistBackend(const TrainOptions &opts) {
  const std::string &b = opts.distBackend;
  if (b != "auto" && b != "mpi" && b != "nccl")
    return Status::error("train: --dist-backend expects auto, mpi or nccl, "
                         "got '" +
                         b + "'");
  if (b == "nccl" && !deviceKindInfo(opts.device).collectives)
    return Status::error(
        "train: --dist-backend nccl sums gradients on a CUDA device, and "
        "--device is " +
        std::string(deviceKindName(opts.device)) +
        "; use --device cuda (or cuda-emu), or --dist-backend mpi");
  if (b == "nccl" && opts.deterministicReduce)
    return Status::error(
        "train: --deterministic-reduce adds the ranks' gradients in rank "
        "order with MPI; NCCL's sums are not rank-ordered: leave out "
        "--dist-backend nccl (auto then takes MPI) or --deterministic-reduce");
  return Status::success();
}

DeviceReduce::~DeviceReduce() {
  if (comm)
    (void)api->ncclCommDestroy(comm);
}

Status DeviceReduce::nccl(const char *call, int rc) const {
  if (rc == dist::kNcclSuccess)
    return Status::success();
  return Status::error(std::string("NCCL ") + call + " failed on rank " +
                       std::to_string(rank) + " of " + std::to_string(size) +
                       ": " + dist::ncclErrorText(*api, rc));
}

Status DeviceReduce::check() {
  int e = dist::kNcclSuccess;
  if (Status st =
          nccl("ncclCommGetAsyncError", api->ncclCommGetAsyncError(comm, &e));
      !st)
    return st;
  if (e == dist::kNcclSuccess || e == dist::kNcclInProgress)
    return Status::success();
  return nccl("collective (asynchronous error)", e);
}

Status
DeviceReduce::reduce(device::Stream d2h,
                     const std::vector<std::pair<int64_t, int64_t>> &ranges,
                     bool last) {
  if (Status st = check(); !st)
    return st;
  int64_t n = 0;
  for (const auto &r : ranges)
    n += r.second;
  if (n == 0)
    return Status::success();
  if (Status st = dev.record(before, d2h); !st)
    return st;
  if (Status st = dev.wait(stream, before); !st)
    return st;
  Status st = dev.compute(
      stream,
      [&](void *cu) -> Status {
        if (Status s = nccl("ncclGroupStart", api->ncclGroupStart()); !s)
          return s;
        Status issued = Status::success();
        for (const auto &[off, count] : ranges) {
          Expected<void *> p = dev.at(off, 4 * count);
          if (!p) {
            issued = p.status();
            break;
          }
          issued = nccl("ncclAllReduce",
                        api->ncclAllReduce(*p, *p, static_cast<size_t>(count),
                                           dist::kNcclFloat32, dist::kNcclSum,
                                           comm, cu));
          if (!issued)
            break;
        }
        Status ended = nccl("ncclGroupEnd", api->ncclGroupEnd());
        return issued ? ended : issued;
      },
      "nccl allreduce " + std::to_string(4 * n) + " bytes");
  if (!st)
    return st;
  if (Status s = dev.record(after, stream); !s)
    return s;
  if (Status s = dev.wait(d2h, after); !s)
    return s;
  bytes_ += 4 * n;
  if (!last)
    return Status::success();
  // The step's last sum against the end of its compute: what the backward
  // did not hide.
  if (Status s = dev.launch(
          compute, [this] { computeEnd = now(); }, "compute done");
      !s)
    return s;
  return dev.launch(
      stream, [this] { reduceEnd = now(); }, "nccl done");
}

void DeviceReduce::beginStep() {
  bytes_ = 0;
  computeEnd = 0;
  reduceEnd = 0;
}

double DeviceReduce::exposedSeconds() const {
  const double c = computeEnd.load(), r = reduceEnd.load();
  return c > 0 && r > c ? r - c : 0.0;
}

Expected<std::unique_ptr<DeviceReduce>>
openDeviceReduce(const TrainOptions &opts, device::Device *streamDevice,
                 device::Stream compute, std::ostream &out) {
  using Result = Expected<std::unique_ptr<DeviceReduce>>;
  if (Status st = checkDistBackend(opts); !st)
    return st;
  const bool explicitNccl = opts.distBackend == "nccl";
  const int ranks = opts.world ? opts.world->size() : 1;
  if (opts.distBackend == "mpi" ||
      (!explicitNccl && (ranks == 1 || opts.deterministicReduce ||
                         !deviceKindInfo(opts.device).collectives)))
    return Result(std::unique_ptr<DeviceReduce>());
  auto *gpu = dynamic_cast<device::CudaDevice *>(streamDevice);
  if (!gpu) {
    if (!explicitNccl)
      return Result(std::unique_ptr<DeviceReduce>()); // gradients on the host
    return Status::error(
        "train: --dist-backend nccl sums the gradients in device memory, "
        "which only a step plan keeps there; add --device-memory SIZE (or "
        "train a bundle compiled with one), or use --dist-backend mpi");
  }
  std::shared_ptr<dist::Communicator> world =
      opts.world ? opts.world
                 : std::shared_ptr<dist::Communicator>(dist::singleProcess());
  Expected<std::shared_ptr<const dist::NcclApi>> api =
      gpu->driver().emulated
          ? dist::emulatedNccl(world, gpu->driver().cuLaunchHostFunc)
          : dist::loadNccl();
  // The ranks agree (their options already do): NCCL only where every rank
  // loaded it, else every rank takes MPI (auto) or stops (nccl).
  double loaded = api ? 1 : 0;
  if (Status st = world->allreduceSum(&loaded, 1); !st)
    return st;
  if (!api || loaded < world->size()) {
    const std::string why =
        !api ? api.message()
             : std::to_string(world->size() - static_cast<int>(loaded)) +
                   " of the " + std::to_string(world->size()) +
                   " ranks could not load it";
    if (explicitNccl)
      return Status::error("train: --dist-backend nccl: " + why);
    out << "note: NCCL not available (" << why
        << "); gradients are summed with MPI in host memory\n";
    return Result(std::unique_ptr<DeviceReduce>());
  }
  std::unique_ptr<DeviceReduce> r(new DeviceReduce(*gpu, *api));
  r->rank = world->rank();
  r->size = world->size();
  r->compute = compute;
  int version = 0;
  if (Status st = r->nccl("ncclGetVersion", (*api)->ncclGetVersion(&version));
      !st)
    return st;
  r->what =
      "NCCL " + dist::ncclVersionText(version) + " (" + (*api)->where + ")";
  // Rank 0's unique id, broadcast over MPI; then the communicator of the
  // world's ranks, on this device.
  dist::NcclUniqueId id{};
  if (r->rank == 0)
    if (Status st = r->nccl("ncclGetUniqueId", (*api)->ncclGetUniqueId(&id));
        !st)
      return st;
  if (Status st = world->broadcast(&id, sizeof id, 0); !st)
    return st.withPrefix("broadcasting NCCL's unique id");
  gpu->makeCurrent();
  if (Status st =
          r->nccl("ncclCommInitRank",
                  (*api)->ncclCommInitRank(&r->comm, r->size, id, r->rank));
      !st)
    return st;
  Expected<device::Stream> s = gpu->createStream("nccl");
  if (!s)
    return s.status();
  r->stream = *s;
  for (device::Event *e : {&r->before, &r->after}) {
    Expected<device::Event> ev = gpu->createEvent();
    if (!ev)
      return ev.status();
    *e = *ev;
  }
  return Result(std::move(r));
}

} // namespace mtc::driver
