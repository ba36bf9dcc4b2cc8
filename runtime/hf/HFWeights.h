//===- HFWeights.h - Parameters from a HuggingFace checkpoint ---*- C++ -*-===//
//
// Part of mtc. Fills a ParamStore from a HuggingFace safetensors checkpoint
// (model.safetensors or model.safetensors.index.json with its shards) using
// the bundle's hfNames, which `mtc import-hf` / `--hf DIR` record for every
// parameter instance (docs/hf.md, "Loading weights").
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_HF_HFWEIGHTS_H
#define MTC_RUNTIME_HF_HFWEIGHTS_H

#include "lib/Bundle/Bundle.h"
#include "lib/Support/Status.h"
#include "runtime/exec/ParamStore.h"

#include <string>

namespace mtc::driver {

/// The checkpoint file in HF model directory \p dirOrConfig (a directory or
/// its config.json): DIR/model.safetensors.index.json if present, else
/// DIR/model.safetensors if present, else "" (no weights: random init).
std::string hfWeightsPath(const std::string &dirOrConfig);

/// Reads every parameter instance of \p store from the checkpoint at
/// \p path (a file, an index or a directory; lib/Format/Safetensors.h),
/// converting bf16/f16 to f32 and transposing where the bundle's hfNames
/// say so. Fails, changing nothing, when the bundle has no HF name for an
/// instance, a tensor is missing or has the wrong shape (the message names
/// the tensor, the parameter and both shapes), or the checkpoint holds
/// tensors no parameter uses (all listed). Rotary `inv_freq` buffers, GPT-2's
/// causal-mask buffers (`h.{i}.attn.bias`, `.attn.masked_bias`) and, for a
/// tied model, `lm_head.weight` are not parameters and are ignored. A base
/// model's checkpoint (tensors without the `transformer.` / `model.` prefix,
/// as the published GPT-2 files) loads as transformers loads it.
Status loadHFWeights(exec::ParamStore &store, const bundle::Bundle &b,
                     const std::string &path);

} // namespace mtc::driver

#endif // MTC_RUNTIME_HF_HFWEIGHTS_H
