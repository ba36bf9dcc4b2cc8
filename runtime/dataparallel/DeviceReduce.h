//===- DeviceReduce.h - Gradient sums on the device with NCCL ---*- C++ -*-===//
//
// Part of mtc. `--dist-backend nccl` (docs/distributed.md, "GPUs and NCCL"):
// with a step plan on a CUDA device, each group's gradients (a layer
// instance's, then the model-level ones) are summed over the ranks on the
// device, in fp32 under every precision (the gradient buffers are fp32 under
// bf16 plans too), by an NCCL allreduce on a stream of its own ("nccl")
// that is ordered after the backward wrote them and before their
// device-to-host copy: the copy carries the sum, and nothing is summed in
// host memory. With a sharded optimizer each rank then keeps its range of
// the summed gradient (allreduce, then the own shard copied: NCCL's
// reduce-scatter takes equal parts, the shards are not). NCCL is libnccl.so.2
// on `--device cuda` and the emulated NCCL (dist/EmulatedNccl.h) on
// `--device cuda-emu`; its communicator spans the run's MPI world, from rank
// 0's unique id broadcast over MPI at start.
//
// Thread safety: reduce() on the thread queueing the step's commands; the
// counters after the step.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DATAPARALLEL_DEVICEREDUCE_H
#define MTC_RUNTIME_DATAPARALLEL_DEVICEREDUCE_H

#include "runtime/device/CudaDevice.h"
#include "runtime/dist/Communicator.h"
#include "runtime/dist/NcclApi.h"
#include "runtime/driver/TrainOptions.h"

#include <atomic>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace mtc::driver {

/// --dist-backend against --device: auto, mpi or nccl; nccl needs a CUDA
/// device. The error names the flag.
Status checkDistBackend(const TrainOptions &opts);

class DeviceReduce {
public:
  ~DeviceReduce();

  /// What sums (for the run's header): "NCCL 2.28.9 (libnccl.so.2)".
  const std::string &description() const { return what; }

  /// Queues the sum over the ranks of \p ranges (arena offset, fp32
  /// elements) of \p dev: after the commands queued on \p d2h so far,
  /// before those queued on it later. \p last: the step's last group (the
  /// exposed time is measured from it). The error of a collective that
  /// failed since the last call, or of this one's issue.
  Status reduce(device::Stream d2h,
                const std::vector<std::pair<int64_t, int64_t>> &ranges,
                bool last);
  /// The communicator's asynchronous error, if any (after a step).
  Status check();

  /// Bytes summed since beginStep(), and the seconds the step's last sum
  /// ended after its compute (the reduction the backward did not hide).
  void beginStep();
  int64_t bytes() const { return bytes_; }
  double exposedSeconds() const;

private:
  friend Expected<std::unique_ptr<DeviceReduce>>
  openDeviceReduce(const TrainOptions &, device::Device *, device::Stream,
                   std::ostream &);
  DeviceReduce(device::CudaDevice &dev,
               std::shared_ptr<const dist::NcclApi> api)
      : dev(dev), api(std::move(api)) {}
  Status nccl(const char *what, int rc) const;

  device::CudaDevice &dev;
  std::shared_ptr<const dist::NcclApi> api;
  dist::NcclComm comm = nullptr;
  int rank = 0, size = 1;
  device::Stream stream, compute;
  device::Event before, after;
  std::string what;
  int64_t bytes_ = 0;
  /// Host clocks (seconds) at the end of the last group's compute and of
  /// its sum, stamped by launches on those streams.
  std::atomic<double> computeEnd{0}, reduceEnd{0};
};

/// The communicator a sharded optimizer scatters through when the
/// gradients were already summed on the device: its reduceScatterSum copies
/// rank \p rank's part (of \p size) of the sum it is given, and every other
/// collective is an error.
std::unique_ptr<dist::Communicator> alreadySummed(int rank, int size);

/// What --dist-backend makes of this run: a DeviceReduce when the
/// gradients are summed with NCCL, null for the MPI path. \p streamDevice:
/// the step plan's device (null without a plan); \p compute: its compute
/// stream. auto takes NCCL with several ranks on a CUDA device under a step
/// plan (not with --deterministic-reduce, whose rank-ordered sums are MPI's),
/// and falls back to MPI with a one-line notice on \p out when NCCL cannot
/// be loaded on every rank (the ranks agree by an allreduce, so they never
/// take different paths); an explicit nccl that cannot be met is an error (also
/// with one rank, where it sums over a communicator of one).
Expected<std::unique_ptr<DeviceReduce>>
openDeviceReduce(const TrainOptions &opts, device::Device *streamDevice,
                 device::Stream compute, std::ostream &out);

} // namespace mtc::driver

#endif // MTC_RUNTIME_DATAPARALLEL_DEVICEREDUCE_H
