//===- MpiApi.h - The C interface of the libmtc-mpi.so plugin ---*- C++ -*-===//
//
// Part of mtc. mtc and mtc-run never link libmpi: they must start on machines
// without MPI (GPU hosts that run bundles). The MPI calls live in a small
// plugin, libmtc-mpi.so (runtime/dist/mpi/MpiPlugin.cpp, built only where
// CMake finds MPI), which the tools dlopen when they are launched under MPI
// (dist/Communicator.h). This header is the whole contract between the two:
// one C function, mtc_mpi_api_v1, returns a table of entry points.
//
// Communicators are small integer handles (0: MPI_COMM_WORLD as duplicated at
// init). Every entry returns 0 on success or an error code; error_string
// turns a code into MPI's message. Counts are elements (or bytes) as int64;
// the plugin splits them into MPI's int-sized pieces.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DIST_MPIAPI_H
#define MTC_RUNTIME_DIST_MPIAPI_H

#include <stddef.h>
#include <stdint.h>

extern "C" {

/// The version of the table below; the loader refuses another.
#define MTC_MPI_API_VERSION 1

/// Element types of the reductions.
enum MtcMpiType { MTC_MPI_F32 = 0, MTC_MPI_F64 = 1 };

struct MtcMpiApi {
  int version; ///< MTC_MPI_API_VERSION
  /// MPI_Init_thread with MPI_THREAD_MULTIPLE (at least SERIALIZED must be
  /// provided); the world's rank and size. A message in \p err on failure.
  int (*init)(int *rank, int *size, char *err, size_t errLen);
  /// MPI_Finalize (after freeing every communicator).
  int (*finalize)(void);
  /// A duplicate of \p comm (its collectives never match \p comm's).
  int (*dup)(int comm, int *out);
  int (*free_comm)(int comm);
  /// In-place sum over every rank.
  int (*allreduce_sum)(int comm, int type, void *buf, int64_t count);
  /// Sum over every rank of \p send (sum of counts elements); rank r
  /// receives counts[r] elements into \p recv.
  int (*reduce_scatter_sum)(int comm, int type, const void *send, void *recv,
                            const int64_t *counts);
  /// Rank r's counts[r] bytes of \p send, concatenated in rank order into
  /// \p recv on every rank.
  int (*allgatherv)(int comm, const void *send, void *recv,
                    const int64_t *counts);
  int (*broadcast)(int comm, void *buf, int64_t bytes, int root);
  int (*barrier)(int comm);
  /// MPI_Abort(MPI_COMM_WORLD, code): ends every rank.
  void (*abort)(int code);
  /// MPI's message for \p code, into \p buf.
  void (*error_string)(int code, char *buf, size_t len);
  /// The MPI library ("Open MPI v4.1.4, ...").
  void (*library_version)(char *buf, size_t len);
};

/// The plugin's one exported symbol.
typedef const MtcMpiApi *(*MtcMpiApiFn)(void);
const MtcMpiApi *mtc_mpi_api_v1(void);
}

#endif // MTC_RUNTIME_DIST_MPIAPI_H
