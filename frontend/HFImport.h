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

#include <string>
#include <vector>

namespace mtc {

/// Resolves `DIR` or `DIR/config.json` to the config file's path: a
/// directory means its `config.json`. Does not check that the file exists.
std::string hfConfigPath(const std::string &dirOrConfig);

/// Reads the config at \p configPath (a file; see hfConfigPath) and writes
/// the `.mt` source to \p mtSource. On failure returns false with \p err
/// naming the file and, where there is one, the field and its value
/// ("DIR/config.json: rope_scaling.type 'yarn' is not supported ..."). Fields
/// the importer does not know and that do not look like metadata are
/// appended to \p warnings (when given) as messages naming the file and field.
bool importHFConfig(const std::string &configPath, std::string &mtSource,
                    std::string &err,
                    std::vector<std::string> *warnings = nullptr);

/// The same from JSON text; \p displayName is used in messages.
bool importHFConfigText(const std::string &jsonText,
                        const std::string &displayName, std::string &mtSource,
                        std::string &err,
                        std::vector<std::string> *warnings = nullptr);

} // namespace mtc

#endif // MTC_FRONTEND_HFIMPORT_H
