//===- EmulatedNcclTest.cpp - NCCL over MPI on the emulated driver --------===//
//
// Part of mtc. The emulated NCCL (runtime/dist/EmulatedNccl.h) on the
// emulated driver's streams: its collectives run in stream order (after a
// command queued before them, before a copy queued after), through the
// communicator it was given, and bad arguments are errors at the call. The
// "other rank" is a mirror: a communicator of 2 whose peer holds what this
// rank holds, so a sum doubles.
//
//===----------------------------------------------------------------------===//

#include "runtime/dist/EmulatedNccl.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/emu/EmulatedDriver.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

using namespace mtc;
using namespace mtc::dist;

namespace {

/// Rank 0 of 2, the peer holding the same buffers as this rank.
class Mirror final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string name() const override { return "mirror"; }
  Status allreduceSum(float *b, int64_t n) override {
    ++calls;
    for (int64_t i = 0; i < n; ++i)
      b[i] *= 2;
    return Status::success();
  }
  Status allreduceSum(double *b, int64_t n) override {
    ++calls;
    for (int64_t i = 0; i < n; ++i)
      b[i] *= 2;
    return Status::success();
  }
  Status reduceScatterSum(const float *send, float *recv,
                          const std::vector<int64_t> &counts) override {
    ++calls;
    for (int64_t i = 0; i < counts[0]; ++i)
      recv[i] = 2 * send[i];
    return Status::success();
  }
  Status allgather(const void *send, void *recv,
                   const std::vector<int64_t> &counts) override {
    ++calls;
    std::memmove(recv, send, counts[0]);
    std::memcpy(static_cast<char *>(recv) + counts[0], send, counts[1]);
    return Status::success();
  }
  Status broadcast(void *, int64_t, int) override { return Status::success(); }
  Status barrier() override { return Status::success(); }
  Expected<std::unique_ptr<Communicator>> duplicate() override {
    return std::unique_ptr<Communicator>(new Mirror);
  }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
  static std::atomic<int> calls;
};
std::atomic<int> Mirror::calls{0};

const cuda::CudaDriverApi &driver() {
  static std::shared_ptr<const cuda::CudaDriverApi> api = [] {
    Expected<std::shared_ptr<const cuda::CudaDriverApi>> d =
        emu::emulatedCudaDriver();
    EXPECT_TRUE(d.ok()) << d.message();
    return *d;
  }();
  return *api;
}

TEST(EmulatedNcclTest, CollectivesRunInStreamOrderOverTheCommunicator) {
  const cuda::CudaDriverApi &d = driver();
  auto world = std::make_shared<Mirror>();
  Expected<std::shared_ptr<const NcclApi>> api =
      emulatedNccl(world, d.cuLaunchHostFunc);
  ASSERT_TRUE(api.ok()) << api.message();
  const NcclApi &nc = **api;
  EXPECT_TRUE(nc.emulated);
  NcclUniqueId id;
  ASSERT_EQ(nc.ncclGetUniqueId(&id), kNcclSuccess);
  NcclComm comm = nullptr;
  // The world has 2 ranks and this is rank 0: anything else is refused.
  EXPECT_EQ(nc.ncclCommInitRank(&comm, 3, id, 0), kNcclInvalidArgument);
  EXPECT_EQ(nc.ncclCommInitRank(&comm, 2, id, 1), kNcclInvalidArgument);
  ASSERT_EQ(nc.ncclCommInitRank(&comm, 2, id, 0), kNcclSuccess);

  void *s = nullptr;
  ASSERT_EQ(d.cuStreamCreate(&s, cuda::kCuStreamNonBlocking), 0);
  const int n = 64;
  unsigned long long a = 0, b = 0;
  ASSERT_EQ(d.cuMemAlloc_v2(&a, 2 * n * sizeof(float)), 0);
  ASSERT_EQ(d.cuMemAlloc_v2(&b, 2 * n * sizeof(float)), 0);
  std::vector<float> in(2 * n), sum(2 * n, -1), part(n, -1), all(2 * n, -1);
  for (int i = 0; i < 2 * n; ++i)
    in[i] = static_cast<float>(i) + 0.5f;
  ASSERT_EQ(d.cuMemcpyHtoDAsync_v2(a, in.data(), in.size() * 4, s), 0);
  // The values in, then a gate holding the stream: the collective must
  // wait for both (it is queued, not run by the call). (A copy from
  // pageable memory waits for the stream's earlier work: it comes first.)
  static std::atomic<int> open{0}, gateDone{0};
  open = 0;
  gateDone = 0;
  ASSERT_EQ(d.cuLaunchHostFunc(
                s,
                [](void *) {
                  while (!open.load())
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                  gateDone = 1;
                },
                nullptr),
            0);
  struct Opener { // a failed assertion must not leave the stream held
    ~Opener() { open = 1; }
  } opener;
  Mirror::calls = 0;
  auto *pa = reinterpret_cast<float *>(a);
  auto *pb = reinterpret_cast<float *>(b);
  ASSERT_EQ(nc.ncclGroupStart(), kNcclSuccess);
  ASSERT_EQ(nc.ncclAllReduce(pa, pb, 2 * n, kNcclFloat32, kNcclSum, comm, s),
            kNcclSuccess);
  ASSERT_EQ(nc.ncclGroupEnd(), kNcclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(Mirror::calls.load(), 0); // queued behind the gate
  open = 1;
  ASSERT_EQ(d.cuMemcpyDtoHAsync_v2(sum.data(), b, sum.size() * 4, s), 0);
  // In place, then a reduce-scatter of the result and an all-gather.
  ASSERT_EQ(nc.ncclAllReduce(pa, pa, 2 * n, kNcclFloat32, kNcclSum, comm, s),
            kNcclSuccess);
  ASSERT_EQ(nc.ncclReduceScatter(pa, pb, n, kNcclFloat32, kNcclSum, comm, s),
            kNcclSuccess);
  ASSERT_EQ(d.cuMemcpyDtoHAsync_v2(part.data(), b, n * 4, s), 0);
  ASSERT_EQ(nc.ncclAllGather(pb, pa, n, kNcclFloat32, comm, s), kNcclSuccess);
  ASSERT_EQ(d.cuMemcpyDtoHAsync_v2(all.data(), a, all.size() * 4, s), 0);
  ASSERT_EQ(d.cuStreamSynchronize(s), 0);
  EXPECT_EQ(gateDone.load(), 1);
  EXPECT_EQ(Mirror::calls.load(), 4);
  for (int i = 0; i < 2 * n; ++i)
    ASSERT_EQ(sum[i], 2 * in[i]) << i;
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(part[i], 4 * in[i]) << i;
  for (int i = 0; i < 2 * n; ++i)
    ASSERT_EQ(all[i], 4 * in[i % n]) << i;
  int err = -1;
  ASSERT_EQ(nc.ncclCommGetAsyncError(comm, &err), kNcclSuccess);
  EXPECT_EQ(err, kNcclSuccess);

  // What NCCL-as-emulated does not take: an error at the call.
  EXPECT_EQ(nc.ncclAllReduce(pa, pa, n, kNcclFloat32, kNcclMax, comm, s),
            kNcclInvalidArgument);
  EXPECT_EQ(nc.ncclAllReduce(pa, pa, n, kNcclBfloat16, kNcclSum, comm, s),
            kNcclInvalidArgument);
  EXPECT_NE(std::string(nc.ncclGetErrorString(kNcclInvalidArgument))
                .find("invalid argument"),
            std::string::npos);
  EXPECT_EQ(nc.ncclCommDestroy(comm), kNcclSuccess);
  ASSERT_EQ(d.cuMemFree_v2(a), 0);
  ASSERT_EQ(d.cuMemFree_v2(b), 0);
  ASSERT_EQ(d.cuStreamDestroy_v2(s), 0);
}

} // namespace
