//===- HFImport.h - HuggingFace config.json to .mt source -------*- C++ -*-===//
//
// Part of mtc. Reads a HuggingFace `config.json` (a decoder-only causal LM:
// llama, mistral, qwen2, qwen3, mixtral, qwen2_moe, qwen3_moe, gemma, gemma2,
// gemma3_text, phi3, olmo2, gpt2) and writes readable, editable `.mt` source
// for the same architecture: a config block with the HF values under readable
// names, parameters whose comments give the HF tensor names, layer templates
// and the forward. docs/hf.md lists the supported fields, the field policy
// and the parameter-name mapping.
//
// Pure C++ (nlohmann-json inside the .cpp); every failure, malformed input
// included, is returned as an error message, never thrown.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_FRONTEND_HFIMPORT_H
#define MTC_FRONTEND_HFIMPORT_H

#include "lib/Support/Status.h"

#include <map>
#include <string>
#include <vector>

namespace mtc {

/// Where one mtc parameter instance comes from in a HuggingFace checkpoint:
/// the tensor's full name (`model.layers.3.self_attn.q_proj.weight`) and
/// whether the mtc value is that tensor transposed (mtc stores matrices as
/// [in, out], HF Linear weights are [out, in]).
struct HFTensorName {
  std::string tensor;
  bool transpose = false;
};

/// Parameter instance name (ParamStore's `name`, `Layer.i.name`,
/// `Layer.i.Expert.e.name`) to its HF tensor.
using HFNameMap = std::map<std::string, HFTensorName>;

/// Resolves `DIR` or `DIR/config.json` to the config file's path: a
/// directory means its `config.json`. Does not check that the file exists.
std::string hfConfigPath(const std::string &dirOrConfig);

/// What importing a config gives.
struct HFImportResult {
  /// The `.mt` source.
  std::string source;
  /// Fields the importer does not know and that do not look like metadata,
  /// and fields it ignores on purpose, as messages naming the file and field.
  std::vector<std::string> warnings;
  /// The HF tensor of every parameter instance of the source (docs/hf.md,
  /// "Loading weights").
  HFNameMap names;
  /// Whether the head is the embedding matrix (tie_word_embeddings).
  bool tiedHead = false;
};

/// Reads the config at \p configPath (a file; see hfConfigPath) and writes
/// the `.mt` source. A config that ties the head to the embeddings
/// (`tie_word_embeddings`) whose directory holds weights with an
/// `lm_head.weight` of other values than the embeddings is imported untied,
/// with a warning: transformers then keeps the stored head (docs/hf.md,
/// "Loading weights"). An error names the file and, where there is one, the
/// field and its value ("DIR/config.json: rope_scaling.type 'yarn' is not
/// supported ...").
Expected<HFImportResult> importHFConfig(const std::string &configPath);

/// The same from JSON text; \p displayName is used in messages.
Expected<HFImportResult> importHFConfigText(const std::string &jsonText,
                                            const std::string &displayName);

} // namespace mtc

#endif // MTC_FRONTEND_HFIMPORT_H
