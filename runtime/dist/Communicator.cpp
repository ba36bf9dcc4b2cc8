//===- Communicator.cpp - One process, and choosing the world ---*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/dist/Communicator.h"

#include <cstdlib>
#include <cstring>

namespace mtc::dist {

namespace {

/// Rank 0 of 1: every sum and gather is the identity.
class SingleProcess final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "single process"; }
  Status allreduceSum(float *, int64_t) override { return Status::success(); }
  Status allreduceSum(double *, int64_t) override { return Status::success(); }
  Status reduceScatterSum(const float *send, float *recv,
                          const std::vector<int64_t> &counts) override {
    if (send != recv)
      std::memmove(recv, send, 4 * counts.at(0));
    return Status::success();
  }
  Status allgather(const void *send, void *recv,
                   const std::vector<int64_t> &counts) override {
    if (send != recv)
      std::memmove(recv, send, counts.at(0));
    return Status::success();
  }
  Status broadcast(void *, int64_t, int) override { return Status::success(); }
  Status barrier() override { return Status::success(); }
  Expected<std::unique_ptr<Communicator>> duplicate() override {
    return std::unique_ptr<Communicator>(new SingleProcess);
  }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
};

} // namespace

namespace {
template <typename T>
Status gatherAll(Communicator &c, const T *send, int64_t n,
                 std::vector<T> &all) {
  all.resize(static_cast<size_t>(n) * c.size());
  return c.allgather(send, all.data(),
                     std::vector<int64_t>(c.size(), n * sizeof(T)));
}

template <typename T> Status ordered(Communicator &c, T *buf, int64_t n) {
  std::vector<T> all;
  if (Status st = gatherAll(c, buf, n, all); !st)
    return st;
  for (int64_t i = 0; i < n; ++i) {
    T s = all[i];
    for (int r = 1; r < c.size(); ++r)
      s += all[static_cast<size_t>(r) * n + i];
    buf[i] = s;
  }
  return Status::success();
}
} // namespace

Status orderedSum(Communicator &c, float *buf, int64_t n) {
  return ordered(c, buf, n);
}
Status orderedSum(Communicator &c, double *buf, int64_t n) {
  return ordered(c, buf, n);
}

Status orderedReduceScatter(Communicator &c, const float *send, float *recv,
                            const std::vector<int64_t> &counts) {
  int64_t n = 0, off = 0;
  for (int r = 0; r < c.size(); ++r) {
    if (r < c.rank())
      off += counts[r];
    n += counts[r];
  }
  std::vector<float> all;
  if (Status st = gatherAll(c, send, n, all); !st)
    return st;
  for (int64_t i = 0; i < counts[c.rank()]; ++i) {
    float s = all[off + i];
    for (int r = 1; r < c.size(); ++r)
      s += all[static_cast<size_t>(r) * n + off + i];
    recv[i] = s;
  }
  return Status::success();
}

std::unique_ptr<Communicator> singleProcess() {
  return std::make_unique<SingleProcess>();
}

bool launchedUnderMpi() {
  for (const char *v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (const char *s = std::getenv(v); s && *s)
      return true;
  return false;
}

int launchRank() {
  for (const char *v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    const char *s = std::getenv(v);
    if (!s || !*s)
      continue;
    char *end = nullptr;
    long r = std::strtol(s, &end, 10);
    return *end || r < 0 || r > 1 << 30 ? -1 : static_cast<int>(r);
  }
  return -1;
}

Expected<std::shared_ptr<Communicator>> openWorld(const std::string &mode) {
  if (mode == "off" || (mode == "auto" && !launchedUnderMpi()))
    return std::shared_ptr<Communicator>(singleProcess());
  if (mode != "auto" && mode != "mpi")
    return Status::error("--data-parallel expects auto, mpi or off, got '" +
                         mode + "'");
  return openMpi();
}

} // namespace mtc::dist
