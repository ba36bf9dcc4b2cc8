//===- HFExport.h - Checkpoints back to HuggingFace layout ------*- C++ -*-===//
//
// Part of mtc. `mtc export-hf CKPT -o DIR`: the weights of an `mtc train`
// checkpoint of a model imported from HuggingFace, under their HF tensor
// names and in HF's layout (projections back to [out, in]), as
// DIR/model.safetensors (sharded with an index above a size), plus the
// config.json the model was imported from. A model loads from DIR with
// transformers' from_pretrained, and with `mtc train --hf DIR`.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_HF_HFEXPORT_H
#define MTC_RUNTIME_HF_HFEXPORT_H

#include "lib/Format/Safetensors.h"
#include "lib/Support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mtc::driver {

struct HFExportOptions {
  TensorDType dtype = TensorDType::F32; ///< F32, BF16 or F16
  uint64_t maxShardBytes = 0;           ///< 0: one file
};

/// Writes \p outDir from checkpoint \p ckptDir (model.mtb with HF names,
/// model.safetensors). Returns the files written in \p written. Errors name
/// the file and the problem; nothing is left half-written (every file is
/// written atomically).
Status exportHF(const std::string &ckptDir, const std::string &outDir,
                const HFExportOptions &opts,
                std::vector<std::string> *written = nullptr);

} // namespace mtc::driver

#endif // MTC_RUNTIME_HF_HFEXPORT_H
