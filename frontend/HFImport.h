//===- HFImport.h - HuggingFace config.json to .mt source -------*- C++ -*-===//
//
// Part of mtc. Reads a HuggingFace `config.json` (a decoder-only causal LM:
// llama, mistral, qwen2, qwen3, mixtral, qwen2_moe, qwen3_moe, gemma, gemma2,
// gemma3_text, phi3, olmo2) and writes readable, editable `.mt` source for
// the same architecture: a config block with the HF values under readable
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

/// Reads the config at \p configPath (a file; see hfConfigPath) and writes
/// the `.mt` source to \p mtSource. On failure returns false with \p err
/// naming the file and, where there is one, the field and its value
/// ("DIR/config.json: rope_scaling.type 'yarn' is not supported ..."). Fields
/// the importer does not know and that do not look like metadata are
/// appended to \p warnings (when given) as messages naming the file and field.
/// When \p names is given it receives the HF tensor of every parameter
/// instance of the generated source (docs/hf.md, "Loading weights").
bool importHFConfig(const std::string &configPath, std::string &mtSource,
                    std::string &err,
                    std::vector<std::string> *warnings = nullptr,
                    HFNameMap *names = nullptr);

/// The same from JSON text; \p displayName is used in messages.
bool importHFConfigText(const std::string &jsonText,
                        const std::string &displayName, std::string &mtSource,
                        std::string &err,
                        std::vector<std::string> *warnings = nullptr,
                        HFNameMap *names = nullptr);

} // namespace mtc

#endif // MTC_FRONTEND_HFIMPORT_H
