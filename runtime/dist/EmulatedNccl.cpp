//===- EmulatedNccl.cpp - NCCL over MPI on the emulated driver ------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/dist/EmulatedNccl.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>

namespace mtc::dist {

namespace {

struct EmuComm {
  std::unique_ptr<Communicator> comm;
  LaunchHostFunc launch = nullptr;
  std::mutex mu; ///< one collective at a time on comm
  std::atomic<int> asyncError{kNcclSuccess};
  std::mutex pendingMu;
  std::condition_variable idle;
  int pending = 0; ///< collectives queued and not yet run
};

struct EmuState {
  std::mutex mu;
  /// Not owned: the world's last reference ends MPI, which must not wait
  /// for this process-wide state's destruction at exit.
  std::weak_ptr<Communicator> world;
  LaunchHostFunc launch = nullptr;
  int open = 0; ///< communicators not destroyed
};

EmuState &state() {
  static EmuState s;
  return s;
}

enum class Kind { AllReduce, ReduceScatter, AllGather };

struct Job {
  EmuComm *c = nullptr;
  Kind kind = Kind::AllReduce;
  const void *send = nullptr;
  void *recv = nullptr;
  size_t count = 0; ///< allreduce: elements; others: per rank
  int type = kNcclFloat32;
};

size_t elementBytes(int type) {
  switch (type) {
  case 0: // int8
  case 1: // uint8
    return 1;
  case 6: // float16
  case kNcclBfloat16:
    return 2;
  case 2: // int32
  case 3: // uint32
  case kNcclFloat32:
    return 4;
  case 4: // int64
  case 5: // uint64
  case kNcclFloat64:
    return 8;
  default:
    return 0;
  }
}

Status runJob(const Job &j) {
  Communicator &c = *j.c->comm;
  switch (j.kind) {
  case Kind::AllReduce:
    if (j.send != j.recv)
      std::memmove(j.recv, j.send, j.count * elementBytes(j.type));
    return j.type == kNcclFloat32
               ? c.allreduceSum(static_cast<float *>(j.recv),
                                static_cast<int64_t>(j.count))
               : c.allreduceSum(static_cast<double *>(j.recv),
                                static_cast<int64_t>(j.count));
  case Kind::ReduceScatter:
    return c.reduceScatterSum(
        static_cast<const float *>(j.send), static_cast<float *>(j.recv),
        std::vector<int64_t>(c.size(), static_cast<int64_t>(j.count)));
  case Kind::AllGather:
    return c.allgather(
        j.send, j.recv,
        std::vector<int64_t>(
            c.size(), static_cast<int64_t>(j.count * elementBytes(j.type))));
  }
  return Status::success();
}

/// The host function queued on the stream.
void runQueued(void *data) {
  std::unique_ptr<Job> j(static_cast<Job *>(data));
  EmuComm &c = *j->c;
  if (c.asyncError.load() == kNcclSuccess) {
    Status st = [&] {
      std::lock_guard<std::mutex> g(c.mu);
      return runJob(*j);
    }();
    if (!st) {
      c.asyncError = kNcclSystemError;
      std::fprintf(stderr, "emulated NCCL: collective failed: %s\n",
                   st.message().c_str());
    }
  }
  std::lock_guard<std::mutex> g(c.pendingMu);
  if (--c.pending == 0)
    c.idle.notify_all();
}

int enqueue(Job j, void *stream) {
  if (!j.c || (j.count > 0 && (!j.send || !j.recv)))
    return kNcclInvalidArgument;
  if (j.count == 0)
    return kNcclSuccess;
  EmuComm &c = *j.c;
  {
    std::lock_guard<std::mutex> g(c.pendingMu);
    ++c.pending;
  }
  auto *heap = new Job(j);
  if (c.launch(stream, runQueued, heap) != 0) {
    delete heap;
    std::lock_guard<std::mutex> g(c.pendingMu);
    --c.pending;
    return kNcclUnhandledCudaError;
  }
  return kNcclSuccess;
}

int getVersion(int *version) {
  if (!version)
    return kNcclInvalidArgument;
  *version = 22800; // the interface of NCCL 2.28
  return kNcclSuccess;
}

int getUniqueId(NcclUniqueId *id) {
  if (!id)
    return kNcclInvalidArgument;
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  std::memcpy(id->internal, "mtc-emu", 8);
  for (size_t i = 8; i < sizeof id->internal; i += 8) {
    uint64_t v = gen();
    std::memcpy(id->internal + i, &v, 8);
  }
  return kNcclSuccess;
}

int commInitRank(NcclComm *out, int nranks, NcclUniqueId id, int rank) {
  EmuState &s = state();
  std::lock_guard<std::mutex> g(s.mu);
  std::shared_ptr<Communicator> world = s.world.lock();
  if (!out || !world || nranks != world->size() || rank != world->rank())
    return kNcclInvalidArgument;
  // Every rank must hold rank 0's id (as NCCL's bootstrap requires).
  std::vector<NcclUniqueId> all(static_cast<size_t>(nranks));
  if (!world->allgather(&id, all.data(),
                        std::vector<int64_t>(nranks, sizeof id)))
    return kNcclSystemError;
  for (const NcclUniqueId &other : all)
    if (std::memcmp(other.internal, all[0].internal, sizeof id.internal))
      return kNcclInvalidUsage;
  Expected<std::unique_ptr<Communicator>> dup = world->duplicate();
  if (!dup)
    return kNcclSystemError;
  auto *c = new EmuComm;
  c->comm = std::move(*dup);
  c->launch = s.launch;
  ++s.open;
  *out = c;
  return kNcclSuccess;
}

int commDestroy(NcclComm comm) {
  if (!comm)
    return kNcclInvalidArgument;
  auto *c = static_cast<EmuComm *>(comm);
  {
    // NCCL finishes the communicator's queued work first.
    std::unique_lock<std::mutex> lk(c->pendingMu);
    c->idle.wait(lk, [&] { return c->pending == 0; });
  }
  delete c;
  std::lock_guard<std::mutex> g(state().mu);
  --state().open;
  return kNcclSuccess;
}

int allReduce(const void *send, void *recv, size_t count, int type, int op,
              NcclComm comm, NcclStream stream) {
  if (op != kNcclSum || (type != kNcclFloat32 && type != kNcclFloat64))
    return kNcclInvalidArgument;
  return enqueue(
      {static_cast<EmuComm *>(comm), Kind::AllReduce, send, recv, count, type},
      stream);
}

int reduceScatter(const void *send, void *recv, size_t recvCount, int type,
                  int op, NcclComm comm, NcclStream stream) {
  if (op != kNcclSum || type != kNcclFloat32)
    return kNcclInvalidArgument;
  return enqueue({static_cast<EmuComm *>(comm), Kind::ReduceScatter, send, recv,
                  recvCount, type},
                 stream);
}

int allGather(const void *send, void *recv, size_t sendCount, int type,
              NcclComm comm, NcclStream stream) {
  if (elementBytes(type) == 0)
    return kNcclInvalidArgument;
  return enqueue({static_cast<EmuComm *>(comm), Kind::AllGather, send, recv,
                  sendCount, type},
                 stream);
}

int groupStart() { return kNcclSuccess; }
int groupEnd() { return kNcclSuccess; }

const char *errorString(int result) {
  switch (result) {
  case kNcclSuccess:
    return "no error";
  case kNcclInvalidArgument:
    return "invalid argument (emulated NCCL: a count, type, operation, rank "
           "or pointer it does not take)";
  case kNcclInvalidUsage:
    return "invalid usage (emulated NCCL: the ranks passed different unique "
           "ids)";
  case kNcclSystemError:
    return "system error (emulated NCCL: the MPI collective under it failed)";
  case kNcclUnhandledCudaError:
    return "unhandled cuda error (emulated NCCL: cuLaunchHostFunc failed)";
  default:
    return "emulated NCCL error";
  }
}

int commGetAsyncError(NcclComm comm, int *error) {
  if (!comm || !error)
    return kNcclInvalidArgument;
  *error = static_cast<EmuComm *>(comm)->asyncError.load();
  return kNcclSuccess;
}

} // namespace

Expected<std::shared_ptr<const NcclApi>>
emulatedNccl(std::shared_ptr<Communicator> world,
             LaunchHostFunc launchHostFunc) {
  if (!world || !launchHostFunc)
    return Status::error("emulated NCCL: no communicator or no "
                         "cuLaunchHostFunc");
  EmuState &s = state();
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (s.open > 0 && s.world.lock() != world)
      return Status::error("emulated NCCL: a communicator of another world "
                           "is still open");
    s.world = world;
    s.launch = launchHostFunc;
  }
  auto api = std::make_shared<NcclApi>();
  api->ncclGetVersion = getVersion;
  api->ncclGetUniqueId = getUniqueId;
  api->ncclCommInitRank = commInitRank;
  api->ncclCommDestroy = commDestroy;
  api->ncclCommAbort = commDestroy;
  api->ncclAllReduce = allReduce;
  api->ncclReduceScatter = reduceScatter;
  api->ncclAllGather = allGather;
  api->ncclGroupStart = groupStart;
  api->ncclGroupEnd = groupEnd;
  api->ncclGetErrorString = errorString;
  api->ncclCommGetAsyncError = commGetAsyncError;
  api->where = "the emulated NCCL (MPI on the emulated driver's streams)";
  api->emulated = true;
  return std::shared_ptr<const NcclApi>(std::move(api));
}

} // namespace mtc::dist
