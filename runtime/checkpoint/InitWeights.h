//===- InitWeights.h - Start a model from given weights ---------*- C++ -*-===//
//
// Part of mtc. `mtc train MODEL --init-from FILE|DIR` (docs/training.md,
// "Starting from given weights"): fills a ParamStore from safetensors whose
// tensors carry the model's parameter instance names (`tok_emb`,
// `Block.3.wq`, the names of mtc checkpoints), so that a model written in
// .mt starts from weights made elsewhere — another mtc run, or llm.c or
// nanoGPT weights saved under these names — without forging a checkpoint.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CHECKPOINT_INITWEIGHTS_H
#define MTC_RUNTIME_CHECKPOINT_INITWEIGHTS_H

#include "lib/Support/Status.h"
#include "runtime/exec/ParamStore.h"

#include <string>

namespace mtc::driver {

/// Reads every parameter instance of \p store from \p path: a .safetensors
/// file, a model.safetensors.index.json, or a directory holding either (an
/// mtc checkpoint, an exported model). F32, BF16, F16 and F64 tensors are
/// converted to fp32. Names and shapes are checked from the headers first:
/// a parameter without a tensor, a tensor of another shape (both shapes
/// named) or dtype, and a tensor that is no parameter of the model are all
/// listed in one error, and nothing is changed. On success returns the
/// number of tensors read.
Expected<size_t> loadInitWeights(exec::ParamStore &store,
                                 const std::string &path);

} // namespace mtc::driver

#endif // MTC_RUNTIME_CHECKPOINT_INITWEIGHTS_H
