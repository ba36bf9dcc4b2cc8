//===- KernelTable.h - One kernel per op kind, per backend ------*- C++ -*-===//
//
// Part of mtc. The executor runs a decoded op (DecodedOp.h) by calling the
// entry of its kind in the kernel table of the backend it runs on: no op
// names are compared while a model runs. The CPU backend fills its table
// today (runtime/exec/Exec*.cpp, one file per op family); a CUDA backend
// fills its own. A bundle holding an op whose entry is empty is refused when
// the executor is constructed, naming the op.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_KERNELTABLE_H
#define MTC_RUNTIME_EXEC_KERNELTABLE_H

#include "lib/Bundle/OpKind.h"
#include "lib/Support/Status.h"

#include <array>
#include <string>

namespace mtc::exec {

class DecodedProgram;
class OpContext;

/// Runs one decoded op: reads its operands and attributes and sets its
/// results through the context (runtime/exec/OpContext.h).
using OpKernel = void (*)(OpContext &);

/// A backend's kernels, indexed by op kind; an empty entry means the backend
/// cannot run that op.
class KernelTable {
public:
  explicit KernelTable(std::string backend) : name(std::move(backend)) {}

  void set(bundle::OpKind kind, OpKernel kernel) {
    entries[static_cast<size_t>(kind)] = kernel;
  }
  OpKernel operator[](bundle::OpKind kind) const {
    return entries[static_cast<size_t>(kind)];
  }
  /// "CPU", "CUDA": for messages.
  const std::string &backend() const { return name; }

  /// An error naming the first op of \p program this table has no kernel
  /// for ("the CPU backend has no kernel for ..."), or success.
  Status covers(const DecodedProgram &program) const;

private:
  std::string name;
  std::array<OpKernel, bundle::kNumOpKinds> entries{};
};

/// The CPU backend's table (runtime/cpu kernels), filled once.
const KernelTable &cpuKernelTable();
/// The CPU kernels over a bf16 plan's storage (the CPU device under
/// `--precision bf16`): each runs on fp32 copies of its bf16 operands and
/// rounds its bf16 results into place (ExecConvert.cpp).
const KernelTable &cpuBf16KernelTable();

} // namespace mtc::exec

#endif // MTC_RUNTIME_EXEC_KERNELTABLE_H
