//===- MpiPlugin.cpp - libmtc-mpi.so: MPI behind a C table ------*- C++ -*-===//
//
// Part of mtc. The only code linked to libmpi (dist/MpiApi.h explains why).
// Each entry is a thin wrapper of one MPI call that returns MPI's error code
// instead of aborting (MPI_ERRORS_RETURN on every communicator), and splits
// int64 counts into the int-sized pieces MPI takes.
//
//===----------------------------------------------------------------------===//

#include "runtime/dist/MpiApi.h"

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

/// Handles to communicators; 0 is the world's duplicate. Guarded by `lock`
/// (dup and free may run on any thread).
std::mutex lock;
std::vector<MPI_Comm> comms;

MPI_Comm commOf(int h) {
  std::lock_guard<std::mutex> g(lock);
  return h >= 0 && static_cast<size_t>(h) < comms.size() ? comms[h]
                                                         : MPI_COMM_NULL;
}

MPI_Datatype typeOf(int t) { return t == MTC_MPI_F64 ? MPI_DOUBLE : MPI_FLOAT; }
size_t sizeOf(int t) { return t == MTC_MPI_F64 ? 8 : 4; }

int mpiInit(int *rank, int *size, char *err, size_t errLen) {
  // The gradient reducer's thread waits inside MPI while the backward runs
  // beside it: Open MPI then yields the core instead of spinning on it
  // (unless the user chose otherwise). Measured: 2.7x faster 2-rank steps on
  // a loaded 2-core machine (docs/distributed.md, "Performance").
  ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) {
    std::snprintf(err, errLen, "MPI_Init_thread failed (code %d)", rc);
    return rc;
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    std::snprintf(err, errLen,
                  "the MPI library provides thread level %d; mtc reduces "
                  "gradients on a thread of its own and needs "
                  "MPI_THREAD_MULTIPLE (%d)",
                  provided, MPI_THREAD_MULTIPLE);
    return MPI_ERR_OTHER;
  }
  MPI_Comm world;
  if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &world)) != MPI_SUCCESS)
    return rc;
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  {
    std::lock_guard<std::mutex> g(lock);
    comms.assign(1, world);
  }
  MPI_Comm_rank(world, rank);
  return MPI_Comm_size(world, size);
}

int mpiFinalize() {
  {
    std::lock_guard<std::mutex> g(lock);
    for (MPI_Comm &c : comms)
      if (c != MPI_COMM_NULL)
        MPI_Comm_free(&c);
    comms.clear();
  }
  return MPI_Finalize();
}

int mpiDup(int h, int *out) {
  MPI_Comm c = commOf(h), d;
  int rc = MPI_Comm_dup(c, &d);
  if (rc != MPI_SUCCESS)
    return rc;
  MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
  std::lock_guard<std::mutex> g(lock);
  comms.push_back(d);
  *out = static_cast<int>(comms.size() - 1);
  return MPI_SUCCESS;
}

int mpiFree(int h) {
  std::lock_guard<std::mutex> g(lock);
  if (h <= 0 || static_cast<size_t>(h) >= comms.size() ||
      comms[h] == MPI_COMM_NULL)
    return MPI_ERR_COMM;
  return MPI_Comm_free(&comms[h]);
}

int mpiAllreduceSum(int h, int type, void *buf, int64_t count) {
  MPI_Comm c = commOf(h);
  char *p = static_cast<char *>(buf);
  while (count > 0) {
    int n = count > INT_MAX ? INT_MAX : static_cast<int>(count);
    int rc = MPI_Allreduce(MPI_IN_PLACE, p, n, typeOf(type), MPI_SUM, c);
    if (rc != MPI_SUCCESS)
      return rc;
    p += static_cast<size_t>(n) * sizeOf(type);
    count -= n;
  }
  return MPI_SUCCESS;
}

int mpiReduceScatterSum(int h, int type, const void *send, void *recv,
                        const int64_t *counts) {
  MPI_Comm c = commOf(h);
  int size = 0;
  MPI_Comm_size(c, &size);
  std::vector<int> n(size);
  for (int r = 0; r < size; ++r) {
    if (counts[r] > INT_MAX)
      return MPI_ERR_COUNT;
    n[r] = static_cast<int>(counts[r]);
  }
  return MPI_Reduce_scatter(send, recv, n.data(), typeOf(type), MPI_SUM, c);
}

int mpiAllgatherv(int h, const void *send, void *recv, const int64_t *counts) {
  MPI_Comm c = commOf(h);
  int size = 0, rank = 0;
  MPI_Comm_size(c, &size);
  MPI_Comm_rank(c, &rank);
  std::vector<int> n(size), displs(size);
  int64_t at = 0;
  for (int r = 0; r < size; ++r) {
    if (counts[r] > INT_MAX || at > INT_MAX)
      return MPI_ERR_COUNT;
    n[r] = static_cast<int>(counts[r]);
    displs[r] = static_cast<int>(at);
    at += counts[r];
  }
  // This rank's part already in place in recv: MPI_IN_PLACE (MPI forbids
  // overlapping send and receive buffers).
  const void *src = send;
  if (static_cast<const char *>(send) ==
      static_cast<const char *>(recv) + displs[rank])
    src = MPI_IN_PLACE;
  return MPI_Allgatherv(src, n[rank], MPI_BYTE, recv, n.data(), displs.data(),
                        MPI_BYTE, c);
}

int mpiBroadcast(int h, void *buf, int64_t bytes, int root) {
  MPI_Comm c = commOf(h);
  char *p = static_cast<char *>(buf);
  while (bytes > 0) {
    int n = bytes > INT_MAX ? INT_MAX : static_cast<int>(bytes);
    int rc = MPI_Bcast(p, n, MPI_BYTE, root, c);
    if (rc != MPI_SUCCESS)
      return rc;
    p += n;
    bytes -= n;
  }
  return MPI_SUCCESS;
}

int mpiBarrier(int h) { return MPI_Barrier(commOf(h)); }

void mpiAbort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

void mpiErrorString(int code, char *buf, size_t len) {
  char msg[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(code, msg, &n) != MPI_SUCCESS)
    std::snprintf(msg, sizeof msg, "MPI error %d", code);
  std::snprintf(buf, len, "%s", msg);
}

void mpiLibraryVersion(char *buf, size_t len) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int n = 0;
  MPI_Get_library_version(v, &n);
  // The first line only ("Open MPI v4.1.4, package: ...").
  v[std::strcspn(v, "\n")] = 0;
  std::snprintf(buf, len, "%s", v);
}

const MtcMpiApi api = {MTC_MPI_API_VERSION,
                       mpiInit,
                       mpiFinalize,
                       mpiDup,
                       mpiFree,
                       mpiAllreduceSum,
                       mpiReduceScatterSum,
                       mpiAllgatherv,
                       mpiBroadcast,
                       mpiBarrier,
                       mpiAbort,
                       mpiErrorString,
                       mpiLibraryVersion};

} // namespace

extern "C" __attribute__((visibility("default"))) const MtcMpiApi *
mtc_mpi_api_v1(void) {
  return &api;
}
