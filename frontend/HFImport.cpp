//===- HFImport.cpp - HuggingFace config.json to .mt source -----*- C++ -*-===//
//
// Part of mtc. See HFImport.h and docs/hf.md.
//
// The importer reads the config into an `Arch` (sizes, norms, biases, rope,
// per-layer attention and feed-forward kinds), then prints `.mt` source from
// it. What differs per model_type is read from the model type's row of
// traits (kArchTraits), never from its name. Errors are thrown as
// ImportError inside this file and returned as values at the two entry
// points; nlohmann-json's own exceptions are caught there too.
//
//===----------------------------------------------------------------------===//

#include "frontend/HFImport.h"

#include "lib/Format/Safetensors.h"
#include "lib/Support/JsonParse.h"
#include "lib/Support/JsonShow.h"
#include "lib/Support/Shape.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <tuple>

namespace mtc {

namespace {

using json = nlohmann::json;

struct ImportError {
  std::string message;
};

constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;
constexpr size_t kMaxConfigBytes = 16u << 20;

/// The largest value of each size field (docs/hf.md, "Limits"): far beyond
/// any published model, and checked before anything is allocated from it
/// (the importer keeps a record per layer, and a name per layer instance,
/// expert and tensor). Other integer fields are limited to kMaxDim.
int64_t maxSizeOf(const std::string &field) {
  static const std::map<std::string, int64_t> limits = {
      {"vocab_size", int64_t(1) << 24},
      {"hidden_size", int64_t(1) << 20},
      {"n_embd", int64_t(1) << 20},
      {"num_hidden_layers", int64_t(1) << 14},
      {"n_layer", int64_t(1) << 14},
      {"num_attention_heads", int64_t(1) << 14},
      {"n_head", int64_t(1) << 14},
      {"num_key_value_heads", int64_t(1) << 14},
      {"head_dim", int64_t(1) << 16},
      {"intermediate_size", int64_t(1) << 22},
      {"n_inner", int64_t(1) << 22},
      {"moe_intermediate_size", int64_t(1) << 22},
      {"shared_expert_intermediate_size", int64_t(1) << 22},
      {"num_experts", int64_t(1) << 14},
      {"num_local_experts", int64_t(1) << 14},
      {"num_experts_per_tok", int64_t(1) << 14},
      {"n_positions", int64_t(1) << 24},
      {"max_position_embeddings", int64_t(1) << 24},
  };
  auto it = limits.find(field);
  return it == limits.end() ? kMaxDim : it->second;
}

/// Layer instances x experts: the expert instances the importer names.
constexpr int64_t kMaxExpertInstances = int64_t(1) << 18;

std::string show(const json &v) { return showJson(v); }

/// Shortest decimal that reads back as \p v, always with a '.' or exponent
/// so that the .mt parser sees a float.
std::string fmtFloat(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
  }
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

//===----------------------------------------------------------------------===//
// Field access with the per-architecture defaults of transformers' config
// classes, recording which fields were read.
//===----------------------------------------------------------------------===//

class Fields {
public:
  Fields(const json &cfg, json defaults, std::set<std::string> nullable,
         std::string modelType, std::string file)
      : cfg(cfg), defaults(std::move(defaults)), nullable(std::move(nullable)),
        modelType(std::move(modelType)), file(std::move(file)) {}

  [[noreturn]] void fail(const std::string &msg) const {
    throw ImportError{file + ": " + msg};
  }

  /// The value of \p name: the config's value; when the field is absent,
  /// transformers' default for the model type (null when it has none). A
  /// field written as `null` is transformers' None, which is not its
  /// default: it is accepted (and read as null) only where transformers
  /// builds a model with None for that model type, and an error elsewhere.
  const json &get(const std::string &name) {
    used.insert(name);
    auto it = find(name);
    if (it != cfg.end()) {
      if (!it->is_null())
        return *it;
      if (!nullable.count(name)) {
        auto d = defaults.find(name);
        fail("field '" + name + "' is null, from which transformers builds " +
             "no model for model_type '" + modelType + "' (" +
             (d != defaults.end()
                  ? "leave the field out for its default, " + show(*d)
                  : std::string("leave the field out")) +
             ")");
      }
      return nullJson;
    }
    auto d = defaults.find(name);
    if (d != defaults.end())
      return *d;
    return nullJson;
  }
  /// Whether the config writes \p name as `null`.
  bool isNull(const std::string &name) const {
    auto it = find(name);
    return it != cfg.end() && it->is_null();
  }
  bool present(const std::string &name) const {
    auto it = find(name);
    return it != cfg.end() && !it->is_null();
  }
  /// \p name in the config, or the other name it may have there (a config
  /// class's attribute_map: GPT-2's `n_embd` is also `hidden_size`).
  json::const_iterator find(const std::string &name) const {
    auto it = cfg.find(name);
    auto alias = aliases.find(name);
    if (it == cfg.end() && alias != aliases.end()) {
      used.insert(alias->second);
      it = cfg.find(alias->second);
    }
    return it;
  }
  void markUsed(const std::string &name) { used.insert(name); }
  bool isUsed(const std::string &name) const { return used.count(name); }

  int64_t integer(const std::string &name, int64_t min, bool required = true,
                  int64_t fallback = 0) {
    const json &v = get(name);
    if (v.is_null()) {
      if (required)
        fail("missing field '" + name + "'");
      return fallback;
    }
    return checkInt(v, name, min);
  }
  int64_t checkInt(const json &v, const std::string &name, int64_t min) const {
    if (!v.is_number_integer())
      fail("field '" + name + "' must be an integer, got " + show(v));
    const int64_t max = maxSizeOf(name);
    auto tooLarge = [&] {
      fail("field '" + name + "' is " + show(v) + ", more than the limit of " +
           std::to_string(max));
    };
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max))
      tooLarge();
    int64_t x = v.get<int64_t>();
    if (x < min)
      fail("field '" + name + "' must be " +
           (min == 1   ? std::string("positive")
            : min == 0 ? std::string("non-negative")
                       : ">= " + std::to_string(min)) +
           ", got " + std::to_string(x));
    if (x > max)
      tooLarge();
    return x;
  }
  double number(const std::string &name, bool positive, double fallback,
                bool required = false) {
    const json &v = get(name);
    if (v.is_null()) {
      if (required)
        fail("missing field '" + name + "'");
      return fallback;
    }
    return checkNumber(v, name, positive);
  }
  double checkNumber(const json &v, const std::string &name,
                     bool positive) const {
    if (!v.is_number())
      fail("field '" + name + "' must be a number, got " + show(v));
    double x = v.get<double>();
    if (!std::isfinite(x) || (positive ? !(x > 0) : !(x >= 0)))
      fail("field '" + name + "' must be " +
           (positive ? "positive" : "non-negative") + ", got " + show(v));
    return x;
  }
  bool boolean(const std::string &name, bool fallback) {
    const json &v = get(name);
    if (v.is_null())
      return fallback;
    if (!v.is_boolean())
      fail("field '" + name + "' must be true or false, got " + show(v));
    return v.get<bool>();
  }
  std::string string(const std::string &name, const std::string &fallback) {
    const json &v = get(name);
    if (v.is_null())
      return fallback;
    if (!v.is_string())
      fail("field '" + name + "' must be a string, got " + show(v));
    return v.get<std::string>();
  }
  /// A field mtc cannot honour unless it has its neutral value (0, false or
  /// null): dropout, router jitter, bidirectional attention.
  void requireNeutral(const std::string &name, const std::string &why) {
    used.insert(name);
    auto it = cfg.find(name);
    if (it == cfg.end() || it->is_null())
      return;
    bool neutral = (it->is_boolean() && !it->get<bool>()) ||
                   (it->is_number() && it->get<double>() == 0);
    if (!neutral)
      fail(name + " " + show(*it) + " is not supported (" + why + ")");
  }

  const json &cfg;
  json defaults;
  std::set<std::string> nullable;
  std::string modelType;
  std::string file;
  /// Field name to the other name config.json may give it.
  std::map<std::string, std::string> aliases;
  mutable std::set<std::string> used;
  json nullJson;
};

//===----------------------------------------------------------------------===//
// The architecture, independent of model_type.
//===----------------------------------------------------------------------===//

struct Rope {
  double theta = 10000.0;
  bool llama3 = false;
  double factor = 0, lowFreq = 0, highFreq = 0;
  int64_t originalMax = 0;
  std::string thetaField = "rope_theta"; // for comments
};

enum class NormPlacement { Pre, Sandwich, Post };
enum class QKNorm { None, PerHead, Full };
enum class Act { Silu, GeluTanh, GeluErf };

struct LayerKind {
  bool sliding = false;
  bool moe = false;
  bool operator<(const LayerKind &o) const {
    return std::tie(sliding, moe) < std::tie(o.sliding, o.moe);
  }
  bool operator==(const LayerKind &o) const {
    return sliding == o.sliding && moe == o.moe;
  }
};

struct ArchTraits;

struct Arch {
  const ArchTraits *traits = nullptr; // the model type's row
  std::string modelType, modelName, file;
  int64_t vocab = 0, dim = 0, nLayers = 0, nHeads = 0, nKv = 0, headDim = 0,
          ffn = 0;
  bool headDimGiven = false;     // a number: the config's or the default
  bool headDimDefaulted = false; // the config class's default (qwen3, gemma)
  double eps = 1e-6, initStd = 0.02;
  std::string epsField = "rms_norm_eps";
  std::string ffnField = "intermediate_size"; // gpt2: "" for 4 * n_embd
  int64_t nPositions = 0;                     // gpt2: rows of the table
  bool tie = false;
  NormPlacement norms = NormPlacement::Pre;
  double normOffset = 0.0; // 1.0: Gemma's (1 + w)
  bool qkvBias = false, oBias = false, mlpBias = false;
  QKNorm qkNorm = QKNorm::None;
  bool fusedQKV = false, fusedGateUp = false;
  Act act = Act::Silu;
  std::string actField = "hidden_act", actValue = "silu";
  bool embScale = false;
  double attnSoftcap = 0, finalSoftcap = 0, queryPreAttnScalar = 0;
  /// gemma3_text's attn_logit_softcapping: in the config, not in the model.
  double unreadAttnSoftcap = 0;
  int64_t window = 0; // for layers whose kind is sliding
  Rope rope, ropeLocal;
  bool hasLocalRope = false;
  double ropeFraction = 1.0;
  std::vector<LayerKind> layers;
  // MoE
  int64_t nExperts = 0, topK = 0, moeFfn = 0, sharedFfn = 0;
  bool normalizeTopK = false, sharedExpert = false;
  double auxCoef = 0;
  bool outputRouterLogits = false;
  std::string layerTypesSource; // how the per-layer kinds were derived
  std::vector<std::string> unknownFields; // reported as warnings
  std::vector<std::string> notes;         // other warnings, without the file
};

//===----------------------------------------------------------------------===//
// One row of traits per architecture: everything the importer does
// differently for a model_type is read from its row (kArchTraits).
//===----------------------------------------------------------------------===//

/// Which attention biases a model type has, and where that is decided.
enum class Bias {
  None,           ///< none (mistral, mixtral, phi3)
  AttentionField, ///< q, k, v and o from `attention_bias`
  Qkv,            ///< q, k and v always (qwen2's Qwen2Attention)
  QkvField,       ///< q, k and v from `qkv_bias` (qwen2_moe)
  All,            ///< every projection, MLP included (gpt2)
};

/// How the per-layer attention kinds (sliding or global) are derived.
enum class Windows {
  None,      ///< no sliding window in transformers' model
  Every,     ///< `sliding_window` applies to every layer
  EveryUsed, ///< every layer, with `use_sliding_window` (qwen3_moe)
  Qwen2,     ///< `layer_types`, else `i >= max_window_layers`
  Qwen2Moe,  ///< `layer_types`, else odd `i + 1` below `max_window_layers`
  Gemma2,    ///< `layer_types`, else even layers
  Gemma3,    ///< `layer_types`, else `sliding_window_pattern`
};

/// The feed-forward of the model type's MoE layers.
enum class Experts { None, Mixtral, Qwen2Moe, Qwen3Moe };

/// Tensor names and layer shape: Llama's (`model.layers.{i}.self_attn.q_proj`,
/// Linear [out, in] weights, RMSNorm, gated MLP, rope) or GPT-2's
/// (`transformer.h.{i}.attn.c_attn`, Conv1D [in, out] weights, LayerNorm with
/// bias, plain MLP, learned absolute positions).
enum class Layout { Llama, GPT2 };

/// Boolean traits (ArchTraits::flags).
enum Flag : unsigned {
  HeadsDivideHidden = 1u << 0, ///< the config class refuses h % heads != 0
  MlpBiasField = 1u << 1,      ///< `mlp_bias` (llama)
  GemmaNorms = 1u << 2,        ///< (1 + w) RMSNorms, embeddings * sqrt(h)
  HiddenActivation = 1u << 3,  ///< the MLP reads `hidden_activation`
  LegacyGeluTanh = 1u << 4,    ///< "gelu" is the tanh GELU (GemmaConfig)
  AttnSoftcap = 1u << 5,       ///< `attn_logit_softcapping` applied
  UnreadAttnSoftcap = 1u << 6, ///< ... kept in the config, not applied
  FinalSoftcap = 1u << 7,      ///< `final_logit_softcapping`
  QueryPreAttnScalar = 1u << 8,
  FusedProjections = 1u << 9, ///< one qkv_proj and one gate_up_proj (phi3)
  LocalRope = 1u << 10,       ///< sliding layers' own rope base (gemma3)
  PartialRotary = 1u << 11,   ///< `partial_rotary_factor` (phi3)
  DropoutWarns = 1u << 12,    ///< published configs carry dropout: warn
};

struct ArchTraits {
  const char *modelType, *modelName;
  Layout layout;
  NormPlacement norms;
  QKNorm qkNorm;
  Bias bias;
  Windows windows;
  Experts experts;
  unsigned flags;
  /// Fields the config class has but transformers' model does not read:
  /// ignored silently (space-separated).
  const char *unread;
  /// Fields whose `null` transformers' config class and model accept, read
  /// as None (not as the default): no window, no softcap,
  /// num_key_value_heads = num_attention_heads, head_dim = hidden_size //
  /// num_attention_heads. Any other field the importer reads is an error
  /// when null (space-separated).
  const char *nullable;
  /// transformers' defaults (the config class's own, transformers 5.23.0)
  /// for the fields the importer reads, over kCommonDefaults: a config.json
  /// that omits a field means what it means to transformers. A field
  /// without one has no value when absent (None) or one derived from other
  /// fields where it is read. docs/hf.md has the table.
  const char *defaults;

  bool has(Flag f) const { return (flags & f) != 0; }
};

const char *kCommonDefaults = R"({"initializer_range": 0.02,
    "hidden_act": "silu", "tie_word_embeddings": false,
    "rope_theta": 10000.0})";

// clang-format off
const ArchTraits kArchTraits[] = {
    {"llama", "Llama", Layout::Llama, NormPlacement::Pre, QKNorm::None,
     Bias::AttentionField, Windows::None, Experts::None,
     HeadsDivideHidden | MlpBiasField,
     "", "num_key_value_heads head_dim",
     R"({"vocab_size": 32000, "hidden_size": 4096,
         "intermediate_size": 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32, "rms_norm_eps": 1e-6})"},
    {"mistral", "Mistral", Layout::Llama, NormPlacement::Pre, QKNorm::None,
     Bias::None, Windows::Every, Experts::None, 0,
     "attention_bias", "head_dim sliding_window",
     R"({"vocab_size": 32000, "hidden_size": 4096,
         "intermediate_size": 14336, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8,
         "rms_norm_eps": 1e-6, "sliding_window": 4096})"},
    {"qwen2", "Qwen2", Layout::Llama, NormPlacement::Pre, QKNorm::None,
     Bias::Qkv, Windows::Qwen2, Experts::None, 0,
     "attention_bias", "num_key_value_heads sliding_window",
     R"({"vocab_size": 151936, "hidden_size": 4096,
         "intermediate_size": 22016, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 32,
         "rms_norm_eps": 1e-6, "sliding_window": 4096,
         "max_window_layers": 28})"},
    {"qwen3", "Qwen3", Layout::Llama, NormPlacement::Pre, QKNorm::PerHead,
     Bias::AttentionField, Windows::Qwen2, Experts::None, 0,
     "", "num_key_value_heads sliding_window",
     // head_dim: Qwen3Config's own 128, not hidden / heads.
     R"({"vocab_size": 151936, "hidden_size": 4096,
         "intermediate_size": 22016, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 32,
         "rms_norm_eps": 1e-6, "sliding_window": 4096,
         "max_window_layers": 28, "head_dim": 128})"},
    {"mixtral", "Mixtral", Layout::Llama, NormPlacement::Pre, QKNorm::None,
     Bias::None, Windows::Every, Experts::Mixtral, 0,
     "attention_bias", "head_dim sliding_window",
     R"({"vocab_size": 32000, "hidden_size": 4096,
         "intermediate_size": 14336, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8,
         "rms_norm_eps": 1e-5, "rope_theta": 1e6, "num_local_experts": 8,
         "num_experts_per_tok": 2, "router_aux_loss_coef": 0.001})"},
    {"qwen2_moe", "Qwen2Moe", Layout::Llama, NormPlacement::Pre, QKNorm::None,
     Bias::QkvField, Windows::Qwen2Moe, Experts::Qwen2Moe, 0,
     "", "sliding_window",
     R"({"vocab_size": 151936, "hidden_size": 2048,
         "intermediate_size": 5632, "num_hidden_layers": 24,
         "num_attention_heads": 16, "num_key_value_heads": 16,
         "rms_norm_eps": 1e-6, "sliding_window": 4096,
         "max_window_layers": 28, "decoder_sparse_step": 1,
         "moe_intermediate_size": 1408,
         "shared_expert_intermediate_size": 5632, "num_experts": 60,
         "num_experts_per_tok": 4, "norm_topk_prob": false,
         "router_aux_loss_coef": 0.001, "qkv_bias": true})"},
    {"qwen3_moe", "Qwen3Moe", Layout::Llama, NormPlacement::Pre,
     QKNorm::PerHead, Bias::AttentionField, Windows::EveryUsed,
     Experts::Qwen3Moe, 0,
     "max_window_layers", "sliding_window",
     R"({"vocab_size": 151936, "hidden_size": 2048,
         "intermediate_size": 6144, "num_hidden_layers": 24,
         "num_attention_heads": 32, "num_key_value_heads": 4,
         "rms_norm_eps": 1e-6, "sliding_window": 4096,
         "decoder_sparse_step": 1, "moe_intermediate_size": 768,
         "num_experts": 128, "num_experts_per_tok": 8,
         "norm_topk_prob": false, "router_aux_loss_coef": 0.001})"},
    {"gemma", "Gemma", Layout::Llama, NormPlacement::Pre, QKNorm::None,
     Bias::AttentionField, Windows::None, Experts::None,
     GemmaNorms | LegacyGeluTanh,
     "hidden_activation", "",
     R"({"vocab_size": 256000, "hidden_size": 3072,
         "intermediate_size": 24576, "num_hidden_layers": 28,
         "num_attention_heads": 16, "num_key_value_heads": 16,
         "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
         "rms_norm_eps": 1e-6, "tie_word_embeddings": true})"},
    {"gemma2", "Gemma2", Layout::Llama, NormPlacement::Sandwich, QKNorm::None,
     Bias::AttentionField, Windows::Gemma2, Experts::None,
     HeadsDivideHidden | GemmaNorms | HiddenActivation | AttnSoftcap |
         FinalSoftcap | QueryPreAttnScalar,
     "hidden_act", "attn_logit_softcapping final_logit_softcapping",
     R"({"vocab_size": 256000, "hidden_size": 2304,
         "intermediate_size": 9216, "num_hidden_layers": 26,
         "num_attention_heads": 8, "num_key_value_heads": 4,
         "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
         "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
         "query_pre_attn_scalar": 256, "sliding_window": 4096,
         "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0})"},
    {"gemma3_text", "Gemma3Text", Layout::Llama, NormPlacement::Sandwich,
     QKNorm::PerHead, Bias::AttentionField, Windows::Gemma3, Experts::None,
     HeadsDivideHidden | GemmaNorms | HiddenActivation | UnreadAttnSoftcap |
         FinalSoftcap | QueryPreAttnScalar | LocalRope,
     "hidden_act", "attn_logit_softcapping final_logit_softcapping",
     R"({"vocab_size": 262208, "hidden_size": 2304,
         "intermediate_size": 9216, "num_hidden_layers": 26,
         "num_attention_heads": 8, "num_key_value_heads": 4,
         "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
         "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
         "query_pre_attn_scalar": 256, "sliding_window": 4096,
         "rope_theta": 1e6, "rope_local_base_freq": 10000.0,
         "sliding_window_pattern": 6})"},
    {"phi3", "Phi3", Layout::Llama, NormPlacement::Pre, QKNorm::None,
     Bias::None, Windows::Every, Experts::None,
     FusedProjections | PartialRotary,
     // original_max_position_embeddings: longrope only (rejected).
     "attention_bias original_max_position_embeddings",
     "num_key_value_heads sliding_window",
     R"({"vocab_size": 32064, "hidden_size": 3072,
         "intermediate_size": 8192, "num_hidden_layers": 32,
         "num_attention_heads": 32, "rms_norm_eps": 1e-5})"},
    {"olmo2", "Olmo2", Layout::Llama, NormPlacement::Post, QKNorm::Full,
     Bias::AttentionField, Windows::None, Experts::None, 0,
     "", "num_key_value_heads",
     R"({"vocab_size": 50304, "hidden_size": 4096,
         "intermediate_size": 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32, "rms_norm_eps": 1e-5})"},
    {"gpt2", "GPT2", Layout::GPT2, NormPlacement::Pre, QKNorm::None,
     Bias::All, Windows::None, Experts::None,
     HeadsDivideHidden | DropoutWarns,
     // n_ctx: older configs' copy of n_positions, not read by the model;
     // summary_*: GPT2DoubleHeadsModel's classification head only.
     "n_ctx summary_type summary_use_proj summary_activation "
     "summary_proj_to_labels summary_first_dropout",
     "n_inner",
     R"({"vocab_size": 50257, "n_positions": 1024, "n_embd": 768,
         "n_layer": 12, "n_head": 12, "activation_function": "gelu_new",
         "layer_norm_epsilon": 1e-5, "tie_word_embeddings": true,
         "scale_attn_weights": true,
         "scale_attn_by_inverse_layer_idx": false,
         "reorder_and_upcast_attn": false, "add_cross_attention": false,
         "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1})"},
};
// clang-format on

/// The row of \p modelType, or null.
const ArchTraits *findTraits(const std::string &modelType) {
  for (const ArchTraits &t : kArchTraits)
    if (modelType == t.modelType)
      return &t;
  return nullptr;
}

/// The space-separated words of \p list.
std::set<std::string> words(const char *list) {
  std::set<std::string> out;
  std::istringstream in(list);
  for (std::string w; in >> w;)
    out.insert(w);
  return out;
}

json defaultsFor(const ArchTraits &t) {
  json d = json::parse(kCommonDefaults);
  json more = json::parse(t.defaults);
  for (auto it = more.begin(); it != more.end(); ++it)
    d[it.key()] = it.value();
  return d;
}

std::set<std::string> nullableFor(const ArchTraits &t) {
  std::set<std::string> n = words(t.nullable);
  n.insert(
      {"rope_scaling", "rope_parameters", "layer_types", "mlp_only_layers"});
  return n;
}

/// Fields that never change the computation (token ids, generation and
/// serving settings, bookkeeping); ignored silently.
const std::set<std::string> kMetadata = {"architectures",
                                         "model_type",
                                         "torch_dtype",
                                         "dtype",
                                         "transformers_version",
                                         "use_cache",
                                         "return_dict",
                                         "output_attentions",
                                         "output_hidden_states",
                                         "torchscript",
                                         "id2label",
                                         "label2id",
                                         "problem_type",
                                         "is_encoder_decoder",
                                         "is_decoder",
                                         "add_cross_attention",
                                         "chunk_size_feed_forward",
                                         "tokenizer_class",
                                         "prefix",
                                         "task_specific_params",
                                         "finetuning_task",
                                         "max_position_embeddings",
                                         "pretraining_tp",
                                         "auto_map",
                                         "cache_implementation",
                                         "num_labels",
                                         "tf_legacy_loss",
                                         "use_bfloat16",
                                         "pruned_heads",
                                         "tie_encoder_decoder",
                                         "cross_attention_hidden_size",
                                         "max_length",
                                         "min_length",
                                         "do_sample",
                                         "early_stopping",
                                         "num_beams",
                                         "num_beam_groups",
                                         "diversity_penalty",
                                         "temperature",
                                         "top_k",
                                         "top_p",
                                         "typical_p",
                                         "repetition_penalty",
                                         "length_penalty",
                                         "no_repeat_ngram_size",
                                         "encoder_no_repeat_ngram_size",
                                         "bad_words_ids",
                                         "num_return_sequences",
                                         "output_scores",
                                         "return_dict_in_generate",
                                         "forced_bos_token_id",
                                         "forced_eos_token_id",
                                         "remove_invalid_values",
                                         "exponential_decay_length_penalty",
                                         "suppress_tokens",
                                         "begin_suppress_tokens",
                                         "decoder_start_token_id",
                                         "sep_token_id",
                                         "name_or_path",
                                         "attn_implementation",
                                         "use_return_dict",
                                         "gradient_checkpointing",
                                         "base_model_tp_plan",
                                         "base_model_pp_plan",
                                         "tp_plan",
                                         "pp_plan"};

bool looksLikeMetadata(const std::string &k) {
  auto ends = [&](const char *suf) {
    size_t n = std::strlen(suf);
    return k.size() >= n && k.compare(k.size() - n, n, suf) == 0;
  };
  return kMetadata.count(k) || (!k.empty() && k[0] == '_') ||
         ends("_token_id") || ends("_token_ids") || ends("_token_index") ||
         ends("_token");
}

/// Reads a rope dictionary (legacy rope_scaling or a v5 rope_parameters
/// entry); \p where is its field name for messages.
void readRopeDict(Fields &f, const json &obj, const std::string &where,
                  Rope &rope, double *fraction) {
  if (obj.is_null())
    return;
  if (!obj.is_object())
    f.fail("field '" + where + "' must be an object, got " + show(obj));
  std::string typeKey = obj.contains("rope_type") ? "rope_type" : "type";
  std::string type = "default";
  if (obj.contains(typeKey) && !obj[typeKey].is_null()) {
    if (!obj[typeKey].is_string())
      f.fail("field '" + where + "." + typeKey + "' must be a string, got " +
             show(obj[typeKey]));
    type = obj[typeKey].get<std::string>();
  }
  std::set<std::string> known = {"rope_type", "type", "rope_theta",
                                 "partial_rotary_factor"};
  if (obj.contains("rope_theta") && !obj["rope_theta"].is_null()) {
    rope.theta = f.checkNumber(obj["rope_theta"], where + ".rope_theta", true);
    rope.thetaField = where + ".rope_theta";
  }
  if (obj.contains("partial_rotary_factor") &&
      !obj["partial_rotary_factor"].is_null()) {
    if (!fraction)
      f.fail(where + ".partial_rotary_factor is not supported here");
    *fraction = f.checkNumber(obj["partial_rotary_factor"],
                              where + ".partial_rotary_factor", true);
  }
  if (type == "default") {
    // no scaling
  } else if (type == "llama3") {
    auto need = [&](const char *k) -> const json & {
      if (!obj.contains(k) || obj[k].is_null())
        f.fail("missing field '" + where + "." + k + "' (rope type llama3)");
      return obj[k];
    };
    rope.llama3 = true;
    rope.factor = f.checkNumber(need("factor"), where + ".factor", true);
    rope.lowFreq = f.checkNumber(need("low_freq_factor"),
                                 where + ".low_freq_factor", true);
    rope.highFreq = f.checkNumber(need("high_freq_factor"),
                                  where + ".high_freq_factor", true);
    rope.originalMax =
        f.checkInt(need("original_max_position_embeddings"),
                   where + ".original_max_position_embeddings", 1);
    if (!(rope.highFreq > rope.lowFreq))
      f.fail(where + ".high_freq_factor " + show(obj["high_freq_factor"]) +
             " must be greater than low_freq_factor " +
             show(obj["low_freq_factor"]));
    known.insert({"factor", "low_freq_factor", "high_freq_factor",
                  "original_max_position_embeddings"});
  } else {
    f.fail(where + "." + typeKey + " '" + type +
           "' is not supported (supported: default, llama3)");
  }
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!known.count(it.key()) && !it.value().is_null())
      f.fail(where + "." + it.key() + " " + show(it.value()) +
             " is not supported with rope type '" + type + "'");
}

/// The activation transformers runs for \p field's value: ACT2FN's name,
/// as the model type maps it. GemmaConfig turns the legacy "gelu" of the
/// published Gemma 1 configs into "gelu_pytorch_tanh"; elsewhere "gelu" is
/// the exact (erf) GELU.
Act readAct(Fields &f, Arch &a, const std::string &field) {
  std::string v = f.string(field, "silu");
  a.actField = field;
  a.actValue = v;
  if (v == "silu" || v == "swish")
    return Act::Silu;
  // gelu_new, gelu_fast and gelu_python_tanh compute the same tanh formula
  // as gelu_pytorch_tanh (gelu_fast with sqrt(2 / pi) to 10 digits).
  if (v == "gelu_pytorch_tanh" || v == "gelu_new" || v == "gelu_fast" ||
      v == "gelu_python_tanh")
    return Act::GeluTanh;
  if (v == "gelu" && a.traits->has(LegacyGeluTanh))
    return Act::GeluTanh;
  if (v == "gelu" || v == "gelu_python")
    return Act::GeluErf;
  f.fail(field + " '" + v +
         "' is not supported (supported: silu, swish, gelu, gelu_python, "
         "gelu_pytorch_tanh, gelu_python_tanh, gelu_new, gelu_fast)");
}

/// Parses "layer_types" (a list of "full_attention"/"sliding_attention").
bool readLayerTypes(Fields &f, int64_t n, std::vector<LayerKind> &kinds) {
  const json &lt = f.get("layer_types");
  if (lt.is_null())
    return false;
  if (!lt.is_array())
    f.fail("field 'layer_types' must be a list, got " + show(lt));
  if (int64_t(lt.size()) != n)
    f.fail("field 'layer_types' has " + std::to_string(lt.size()) +
           " entries, num_hidden_layers is " + std::to_string(n));
  for (size_t i = 0; i < lt.size(); ++i) {
    const json &e = lt[i];
    std::string name = "layer_types[" + std::to_string(i) + "]";
    if (!e.is_string())
      f.fail("field '" + name + "' must be a string, got " + show(e));
    std::string s = e.get<std::string>();
    if (s == "sliding_attention")
      kinds[i].sliding = true;
    else if (s != "full_attention")
      f.fail(name + " '" + s +
             "' is not supported (supported: full_attention, "
             "sliding_attention)");
  }
  return true;
}

/// Every field read or deliberately ignored; the rest is reported.
void finishFields(const json &cfg, const Fields &f, Arch &a) {
  std::vector<std::string> unknown;
  for (auto it = cfg.begin(); it != cfg.end(); ++it)
    if (!f.isUsed(it.key()) && !looksLikeMetadata(it.key()))
      unknown.push_back(it.key());
  a.unknownFields = std::move(unknown);
}

Arch readArch(const json &cfg, const std::string &file) {
  if (!cfg.is_object())
    throw ImportError{file + ": expected a JSON object at the top level, got " +
                      std::string(cfg.type_name())};
  auto mtIt = cfg.find("model_type");
  if (mtIt == cfg.end() || mtIt->is_null())
    throw ImportError{file + ": missing field 'model_type'"};
  if (!mtIt->is_string())
    throw ImportError{file + ": field 'model_type' must be a string, got " +
                      show(*mtIt)};
  Arch a;
  a.file = file;
  a.modelType = mtIt->get<std::string>();
  const ArchTraits *traits = findTraits(a.modelType);
  if (!traits) {
    std::string list;
    for (const ArchTraits &t : kArchTraits)
      list += std::string(list.empty() ? "" : ", ") + t.modelType;
    throw ImportError{file + ": model_type '" + a.modelType +
                      "' is not supported (supported: " + list + ")"};
  }
  const ArchTraits &t = *traits;
  a.traits = traits;
  a.modelName = t.modelName;
  const std::string &mt = a.modelType;
  const bool gpt2 = t.layout == Layout::GPT2;
  Fields f(cfg, defaultsFor(t), nullableFor(t), mt, file);
  f.markUsed("model_type");
  for (const std::string &k : words(t.unread))
    f.markUsed(k);
  // GPT2Config's attribute_map: the common names stand for GPT-2's own.
  if (gpt2)
    f.aliases = {{"n_embd", "hidden_size"},
                 {"n_layer", "num_hidden_layers"},
                 {"n_head", "num_attention_heads"},
                 {"n_positions", "max_position_embeddings"}};

  if (cfg.contains("quantization_config"))
    f.fail("quantization_config is not supported (quantized checkpoints)");
  if (cfg.contains("text_config") || cfg.contains("vision_config"))
    f.fail("multimodal configs (text_config/vision_config) are not "
           "supported; import the text model's config");

  a.vocab = f.integer("vocab_size", 1);
  a.dim = f.integer(gpt2 ? "n_embd" : "hidden_size", 1);
  a.nLayers = f.integer(gpt2 ? "n_layer" : "num_hidden_layers", 1);
  a.nHeads = f.integer(gpt2 ? "n_head" : "num_attention_heads", 1);
  a.nKv =
      gpt2 ? a.nHeads : f.integer("num_key_value_heads", 1, false, a.nHeads);
  if (a.nHeads % a.nKv != 0)
    f.fail("num_attention_heads " + std::to_string(a.nHeads) +
           " is not a multiple of num_key_value_heads " +
           std::to_string(a.nKv));
  // LlamaConfig, Gemma2Config, Gemma3TextConfig and GPT2Attention refuse a
  // hidden_size that is not a multiple of num_attention_heads, head_dim or
  // not; the other config classes take it.
  if (t.has(HeadsDivideHidden) && a.dim % a.nHeads != 0)
    f.fail(std::string(gpt2 ? "n_embd " : "hidden_size ") +
           std::to_string(a.dim) + " is not a multiple of " +
           (gpt2 ? "n_head " : "num_attention_heads ") +
           std::to_string(a.nHeads) + " (transformers requires it for " +
           "model_type '" + mt + "')");
  // head_dim: the config's, else the class default (qwen3: 128, gemma: 256),
  // else hidden_size // num_attention_heads, rounded down as in
  // transformers' attention modules.
  const json &headDim = gpt2 ? json() : f.get("head_dim");
  a.headDimGiven = !headDim.is_null();
  a.headDimDefaulted = a.headDimGiven && !f.present("head_dim");
  if (a.headDimGiven) {
    a.headDim = f.checkInt(headDim, "head_dim", 1);
  } else {
    a.headDim = a.dim / a.nHeads;
    if (a.headDim == 0)
      f.fail("hidden_size " + std::to_string(a.dim) +
             " is smaller than num_attention_heads " +
             std::to_string(a.nHeads) +
             ": head_dim (hidden_size // num_attention_heads) would be 0");
  }
  if (gpt2) {
    // n_inner: null or absent is 4 * n_embd (GPT2MLP).
    a.ffn = f.integer("n_inner", 1, false, 4 * a.dim);
    a.ffnField = f.present("n_inner") ? "n_inner" : "";
    a.nPositions = f.integer("n_positions", 1);
    a.eps = f.number("layer_norm_epsilon", true, 1e-5);
    a.epsField = "layer_norm_epsilon";
  } else {
    a.ffn = f.integer("intermediate_size", 1);
    a.eps = f.number("rms_norm_eps", true, 1e-6);
  }
  a.initStd = f.number("initializer_range", false, 0.02);
  a.tie = f.boolean("tie_word_embeddings", false);

  // Training-time randomness mtc does not implement: only the neutral value.
  // GPT-2's published configs all carry dropout 0.1 (its default), so there
  // a warning says it is not applied.
  for (const char *k :
       {"attention_dropout", "hidden_dropout", "embd_pdrop", "resid_pdrop",
        "dropout", "attn_pdrop", "mlp_dropout", "hidden_dropout_prob",
        "attention_probs_dropout_prob"}) {
    if (!t.has(DropoutWarns)) {
      f.requireNeutral(k, "mtc trains without dropout");
      continue;
    }
    const json &v = f.get(k);
    if (!v.is_null() && !(v.is_number() && v.get<double>() == 0))
      a.notes.push_back(std::string(k) + " " + show(v) +
                        (f.present(k) ? "" : " (transformers' default)") +
                        " is ignored: mtc trains without dropout (as "
                        "transformers' model in eval mode)");
  }
  f.requireNeutral("router_jitter_noise", "mtc has no router jitter");
  f.requireNeutral("use_bidirectional_attention", "mtc's attention is causal");
  f.requireNeutral("use_mrope", "multimodal rotary embeddings");
  if (gpt2) {
    // Attention variants of GPT2Attention mtc does not have: only the
    // values of GPT-2 itself.
    if (!f.boolean("scale_attn_weights", true))
      f.fail("scale_attn_weights false is not supported (mtc scales "
             "attention scores by 1/sqrt(head_dim))");
    if (f.boolean("scale_attn_by_inverse_layer_idx", false))
      f.fail("scale_attn_by_inverse_layer_idx true is not supported (one "
             "attention scale for every layer)");
    if (f.boolean("reorder_and_upcast_attn", false))
      f.fail("reorder_and_upcast_attn true is not supported (mtc computes "
             "attention as GPT-2 does)");
    if (f.boolean("add_cross_attention", false))
      f.fail("add_cross_attention true is not supported (decoder-only "
             "models)");
  }

  // Activation: Gemma2MLP and Gemma3MLP read hidden_activation only, GPT2MLP
  // activation_function, every other model (Gemma 1's included) hidden_act
  // only; the other field is one transformers' model does not read.
  a.act = readAct(f, a,
                  gpt2                      ? "activation_function"
                  : t.has(HiddenActivation) ? "hidden_activation"
                                            : "hidden_act");

  // Biases.
  switch (t.bias) {
  case Bias::None:
    break;
  case Bias::AttentionField:
    a.qkvBias = a.oBias = f.boolean("attention_bias", false);
    break;
  case Bias::Qkv:
    a.qkvBias = true; // hard-wired in transformers' Qwen2Attention
    break;
  case Bias::QkvField:
    a.qkvBias = f.boolean("qkv_bias", true);
    break;
  case Bias::All:
    a.qkvBias = a.oBias = a.mlpBias = true;
    break;
  }
  if (t.has(MlpBiasField))
    a.mlpBias = f.boolean("mlp_bias", false);

  // Norms, q/k norms, fused projections, embedding scale, softcaps.
  a.norms = t.norms;
  a.qkNorm = t.qkNorm;
  if (t.has(GemmaNorms)) {
    a.normOffset = 1.0;
    a.embScale = true;
  }
  if (t.has(QueryPreAttnScalar))
    a.queryPreAttnScalar = f.number("query_pre_attn_scalar", true, 256);
  // transformers' Gemma3Attention never passes attn_logit_softcapping to
  // its attention (Gemma 3 has q/k norms instead; the published configs set
  // it to null): gemma3_text models compute without it whatever its value,
  // so it is a field the model does not read.
  if (t.has(AttnSoftcap))
    a.attnSoftcap = f.number("attn_logit_softcapping", false, 0);
  if (t.has(UnreadAttnSoftcap))
    a.unreadAttnSoftcap = f.number("attn_logit_softcapping", false, 0);
  if (t.has(FinalSoftcap))
    a.finalSoftcap = f.number("final_logit_softcapping", false, 0);
  if (t.has(FusedProjections))
    a.fusedQKV = a.fusedGateUp = true;

  // Positions: rope, or (gpt2) a learned table of n_positions rows.
  if (gpt2) {
    a.layers.assign(a.nLayers, LayerKind{});
    finishFields(cfg, f, a);
    return a;
  }
  bool v5 = f.present("rope_parameters");
  a.rope.theta = f.number("rope_theta", true, 10000.0);
  if (t.has(LocalRope)) {
    a.hasLocalRope = true;
    a.ropeLocal.theta = f.number("rope_local_base_freq", true, 10000.0);
    a.ropeLocal.thetaField = "rope_local_base_freq";
  }
  if (v5) {
    f.markUsed("rope_scaling");
    const json &rp = f.get("rope_parameters");
    if (t.has(LocalRope) && rp.is_object() &&
        (rp.contains("full_attention") || rp.contains("sliding_attention"))) {
      for (auto it = rp.begin(); it != rp.end(); ++it) {
        if (it.key() == "full_attention")
          readRopeDict(f, it.value(), "rope_parameters.full_attention", a.rope,
                       nullptr);
        else if (it.key() == "sliding_attention")
          readRopeDict(f, it.value(), "rope_parameters.sliding_attention",
                       a.ropeLocal, nullptr);
        else
          f.fail("rope_parameters." + it.key() +
                 " is not supported (expected full_attention and "
                 "sliding_attention)");
      }
      if (a.ropeLocal.llama3)
        f.fail("rope_parameters.sliding_attention: llama3 scaling on "
               "sliding layers is not supported");
    } else {
      readRopeDict(f, rp, "rope_parameters", a.rope, &a.ropeFraction);
    }
  } else {
    readRopeDict(f, f.get("rope_scaling"), "rope_scaling", a.rope,
                 &a.ropeFraction);
  }
  if (t.has(PartialRotary) && f.isNull("partial_rotary_factor"))
    f.get("partial_rotary_factor"); // an error: Phi3Config rejects None
  if (f.present("partial_rotary_factor")) {
    if (!t.has(PartialRotary))
      f.fail("partial_rotary_factor is not supported for model_type '" + mt +
             "'");
    a.ropeFraction = f.number("partial_rotary_factor", true, 1.0);
  }
  if (!(a.ropeFraction > 0 && a.ropeFraction <= 1))
    f.fail("partial_rotary_factor " + fmtFloat(a.ropeFraction) +
           " must be in (0, 1]");
  // transformers' int(head_dim * partial_rotary_factor) frequencies,
  // rotating that many dims rounded up to even (mt.rope, lib/Support/Shape.h
  // ropeDims): at least one frequency, at most head_dim dims.
  {
    rules::RopeDims r = rules::ropeDims(a.ropeFraction, a.headDim);
    if (r.freq < 1 || r.rotary > a.headDim)
      f.fail("head_dim " + std::to_string(a.headDim) +
             (a.ropeFraction != 1.0
                  ? " with partial_rotary_factor " + fmtFloat(a.ropeFraction)
                  : std::string()) +
             " gives " + std::to_string(r.freq) +
             " rotary frequency dimensions (int(head_dim * "
             "partial_rotary_factor)), rotating " +
             std::to_string(r.rotary) +
             "; RoPE needs at least one, rotating "
             "at most head_dim");
  }

  // Per-layer kinds: attention window and feed-forward.
  a.layers.assign(a.nLayers, LayerKind{});
  auto windowField = [&]() -> int64_t {
    const json &w = f.get("sliding_window");
    if (w.is_null())
      return 0;
    return f.checkInt(w, "sliding_window", 0);
  };
  switch (t.windows) {
  case Windows::None:
    break; // no sliding window in transformers' model
  case Windows::Every:
    a.window = windowField();
    for (auto &k : a.layers)
      k.sliding = a.window > 0;
    a.layerTypesSource = "sliding_window applies to every layer";
    break;
  case Windows::EveryUsed: {
    bool use = f.boolean("use_sliding_window", false);
    a.window = use ? windowField() : (f.markUsed("sliding_window"), 0);
    for (auto &k : a.layers)
      k.sliding = a.window > 0;
    break;
  }
  case Windows::Qwen2:
  case Windows::Qwen2Moe: {
    bool moeRule = t.windows == Windows::Qwen2Moe;
    bool use = f.boolean("use_sliding_window", false);
    if (moeRule && use && f.isNull("sliding_window"))
      f.fail("sliding_window null with use_sliding_window true is not "
             "supported: transformers' Qwen2Moe sliding layers fail "
             "without a window size");
    int64_t w = windowField();
    int64_t maxWindow = f.integer("max_window_layers", 0, false, 28);
    if (readLayerTypes(f, a.nLayers, a.layers)) {
      a.layerTypesSource = "layer_types";
    } else if (use && w > 0) {
      for (int64_t i = 0; i < a.nLayers; ++i)
        a.layers[i].sliding =
            moeRule ? ((i + 1) % 2 != 0 && i < maxWindow) : i >= maxWindow;
      a.layerTypesSource = "use_sliding_window and max_window_layers";
    }
    a.window = use ? w : 0;
    if (a.window == 0)
      for (auto &k : a.layers)
        k.sliding = false; // transformers: no window without use_sliding_window
    break;
  }
  case Windows::Gemma2:
  case Windows::Gemma3:
    a.window = windowField();
    if (readLayerTypes(f, a.nLayers, a.layers)) {
      a.layerTypesSource = "layer_types";
      f.markUsed("sliding_window_pattern");
    } else if (t.windows == Windows::Gemma2) {
      for (int64_t i = 0; i < a.nLayers; ++i)
        a.layers[i].sliding = i % 2 == 0;
      a.layerTypesSource = "even layers slide (transformers' Gemma2 default)";
    } else {
      int64_t p = f.integer("sliding_window_pattern", 1, false, 6);
      for (int64_t i = 0; i < a.nLayers; ++i)
        a.layers[i].sliding = (i + 1) % p != 0;
      a.layerTypesSource = "sliding_window_pattern " + std::to_string(p);
    }
    if (a.window == 0)
      for (auto &k : a.layers)
        k.sliding = false;
    break;
  }

  // Mixture of experts.
  if (t.experts != Experts::None) {
    bool mixtral = t.experts == Experts::Mixtral;
    std::string expertsField =
        t.experts == Experts::Qwen2Moe   ? "num_experts"
        : f.present("num_local_experts") ? "num_local_experts"
        : f.present("num_experts")
            ? "num_experts"
            : (mixtral ? "num_local_experts" : "num_experts");
    // MixtralConfig and Qwen3MoeConfig alias num_experts to
    // num_local_experts: either written as null is None, an error there.
    if (t.experts != Experts::Qwen2Moe)
      for (const char *k : {"num_experts", "num_local_experts"})
        if (f.isNull(k))
          f.get(k);
    f.markUsed("num_experts");
    f.markUsed("num_local_experts");
    a.nExperts = f.integer(expertsField, 1);
    if (a.nLayers * a.nExperts > kMaxExpertInstances)
      f.fail("num_hidden_layers " + std::to_string(a.nLayers) + " x " +
             expertsField + " " + std::to_string(a.nExperts) + " = " +
             std::to_string(a.nLayers * a.nExperts) +
             " expert instances, more than the limit of " +
             std::to_string(kMaxExpertInstances));
    a.topK = f.integer("num_experts_per_tok", 1);
    if (a.topK > a.nExperts)
      f.fail("num_experts_per_tok " + std::to_string(a.topK) +
             " exceeds the number of experts " + std::to_string(a.nExperts));
    a.auxCoef = f.number("router_aux_loss_coef", false, 0.001);
    a.outputRouterLogits = f.boolean("output_router_logits", false);
    if (mixtral) {
      a.moeFfn = a.ffn;
      a.normalizeTopK = true;
      for (auto &k : a.layers)
        k.moe = true;
    } else {
      a.moeFfn = f.integer("moe_intermediate_size", 1);
      a.normalizeTopK = f.boolean("norm_topk_prob", false);
      if (t.experts == Experts::Qwen2Moe) {
        a.sharedFfn = f.integer("shared_expert_intermediate_size", 1);
        a.sharedExpert = true;
      }
      int64_t step = f.integer("decoder_sparse_step", 1, false, 1);
      std::set<int64_t> dense;
      const json &mol = f.get("mlp_only_layers");
      if (!mol.is_null()) {
        if (!mol.is_array())
          f.fail("field 'mlp_only_layers' must be a list, got " + show(mol));
        for (size_t i = 0; i < mol.size(); ++i) {
          std::string name = "mlp_only_layers[" + std::to_string(i) + "]";
          int64_t l = f.checkInt(mol[i], name, 0);
          if (l >= a.nLayers)
            f.fail(name + " " + std::to_string(l) +
                   " is not a layer index (num_hidden_layers " +
                   std::to_string(a.nLayers) + ")");
          dense.insert(l);
        }
      }
      for (int64_t i = 0; i < a.nLayers; ++i)
        a.layers[i].moe = !dense.count(i) && (i + 1) % step == 0;
    }
  }
  finishFields(cfg, f, a);
  return a;
}

//===----------------------------------------------------------------------===//
// Printing .mt source.
//===----------------------------------------------------------------------===//

struct Template {
  LayerKind kind;
  std::string name;
  std::vector<int64_t> hfIndices; // model.layers.{i} of each instance
};

class Printer {
public:
  explicit Printer(const Arch &a) : a(a) {}

  std::string run() {
    buildTemplates();
    header();
    os << "model " << a.modelName << " {\n";
    if (gpt2())
      return runGPT2();
    config();
    os << "\n  param tok_emb: [vocab, dim] = normal(init_std)"
       << "   # model.embed_tokens.weight\n";
    record("tok_emb", "model.embed_tokens.weight");
    for (const Template &t : templates) {
      current = &t;
      layer(t);
      current = nullptr;
    }
    os << "\n  param final_norm: [dim] = " << normInit()
       << "   # model.norm.weight\n";
    record("final_norm", "model.norm.weight");
    if (!a.tie) {
      os << "  param lm_head: [dim, vocab] = normal(init_std)"
            "   # lm_head.weight (transposed)\n";
      record("lm_head", "lm_head.weight (transposed)");
    }
    modelForward();
    os << "}\n";
    return os.str();
  }

  /// Parameter instance name to HF tensor, filled by run().
  HFNameMap names;

private:
  bool gpt2() const { return a.traits->layout == Layout::GPT2; }
  /// Mixtral's experts (w1/w3/w2 under block_sparse_moe.), not Qwen's.
  bool mixtralExperts() const { return a.traits->experts == Experts::Mixtral; }

  /// GPT-2 (Layout::GPT2): learned absolute positions, pre-norm LayerNorm
  /// blocks, one fused c_attn with bias, a plain gelu MLP, biases on every
  /// projection. Its Conv1D weights are [in, out] like mtc's: none is
  /// transposed.
  std::string runGPT2() {
    os << "  config {\n";
    entry("vocab", std::to_string(a.vocab), "vocab_size");
    entry("n_ctx", std::to_string(a.nPositions),
          "n_positions: rows of the position table");
    entry("dim", std::to_string(a.dim), "n_embd");
    entry("n_layers", std::to_string(a.nLayers), "n_layer");
    entry("n_heads", std::to_string(a.nHeads), "n_head");
    entry("head_dim", "dim / n_heads",
          "n_embd / n_head = " + std::to_string(a.headDim));
    if (a.ffnField.empty())
      entry("ffn", "4 * dim", "n_inner absent: 4 * n_embd");
    else
      entry("ffn", std::to_string(a.ffn), a.ffnField);
    entry("eps", fmtFloat(a.eps), a.epsField);
    entry("init_std", fmtFloat(a.initStd), "initializer_range");
    os << "  }\n\n";
    param("tok_emb", "[vocab, dim]", "normal(init_std)",
          "transformer.wte.weight", "  ");
    param("pos_emb", "[n_ctx, dim]", "normal(init_std)",
          "transformer.wpe.weight", "  ");
    const Template &t = templates.at(0);
    current = &t;
    os << "\n  layer " << t.name << " x " << t.hfIndices.size() << " {\n";
    param("attn_norm", "[dim]", "ones", "ln_1.weight");
    param("attn_norm_b", "[dim]", "zeros", "ln_1.bias");
    param("w_qkv", "[dim, 3 * dim]", "normal(init_std)",
          "attn.c_attn.weight (q, k, v columns in order)");
    param("b_qkv", "[3 * dim]", "zeros", "attn.c_attn.bias");
    // GPT2PreTrainedModel draws the residual projections (c_proj) with
    // std / sqrt(2 * n_layer): scaled_normal.
    param("wo", "[dim, dim]", "scaled_normal(init_std)", "attn.c_proj.weight");
    param("bo", "[dim]", "zeros", "attn.c_proj.bias");
    param("mlp_norm", "[dim]", "ones", "ln_2.weight");
    param("mlp_norm_b", "[dim]", "zeros", "ln_2.bias");
    param("w_up", "[dim, ffn]", "normal(init_std)", "mlp.c_fc.weight");
    param("b_up", "[ffn]", "zeros", "mlp.c_fc.bias");
    param("w_down", "[ffn, dim]", "scaled_normal(init_std)",
          "mlp.c_proj.weight");
    param("b_down", "[dim]", "zeros", "mlp.c_proj.bias");
    os << "\n    forward(x: [B, S, dim]) -> [B, S, dim] {\n"
       << "      h = layernorm(x, attn_norm, attn_norm_b, eps)\n"
       << "      q, k, v = split(matmul(h, w_qkv, b_qkv), [dim, dim, dim], "
          "axis = -1)\n"
       << "      q = reshape(q, [B, S, n_heads, head_dim])\n"
       << "      k = reshape(k, [B, S, n_heads, head_dim])\n"
       << "      v = reshape(v, [B, S, n_heads, head_dim])\n"
       << "      a = attention(q, k, v, causal = true)\n"
       << "      x = x + matmul(reshape(a, [B, S, dim]), wo, bo)\n\n"
       << "      m = layernorm(x, mlp_norm, mlp_norm_b, eps)\n"
       << "      m = " << actCall("matmul(m, w_up, b_up)") << "\n"
       << "      return x + matmul(m, w_down, b_down)\n"
       << "    }\n  }\n\n";
    current = nullptr;
    param("final_norm", "[dim]", "ones", "transformer.ln_f.weight", "  ");
    param("final_norm_b", "[dim]", "zeros", "transformer.ln_f.bias", "  ");
    if (!a.tie)
      param("lm_head", "[dim, vocab]", "normal(init_std)",
            "lm_head.weight (transposed)", "  ");
    os << "\n  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {\n"
       << "    # The first S rows of the position table: positions 0..S-1.\n"
       << "    x = embedding(tokens, tok_emb) + slice(pos_emb, 0, 0, S)\n"
       << "    x = " << t.name << "(x)\n"
       << "    x = layernorm(x, final_norm, final_norm_b, eps)\n"
       << "    logits = "
       << (a.tie ? "x @ transpose(tok_emb)   # tie_word_embeddings: the head "
                   "is tok_emb"
                 : "x @ lm_head")
       << "\n"
       << "    return cross_entropy(logits, targets, ignore_index = -100)\n"
       << "  }\n}\n";
    return os.str();
  }

  const Arch &a;
  const Template *current = nullptr; // the layer being printed
  int64_t expertCount = 0;           // inside its expert block
  std::ostringstream os;
  std::vector<Template> templates;
  std::vector<std::pair<size_t, int64_t>> runs; // template index, count

  bool anyMoe() const {
    for (auto &k : a.layers)
      if (k.moe)
        return true;
    return false;
  }
  bool anyDenseWithMoe() const {
    bool m = false, d = false;
    for (auto &k : a.layers)
      (k.moe ? m : d) = true;
    return m && d;
  }
  std::string normInit() const { return a.normOffset != 0 ? "zeros" : "ones"; }
  std::string normCall(const std::string &x, const std::string &w) const {
    return "rmsnorm(" + x + ", " + w + ", eps" +
           (a.normOffset != 0 ? ", offset = 1.0" : "") + ")";
  }

  void buildTemplates() {
    std::set<bool> slidingSeen, moeSeen;
    for (auto &k : a.layers) {
      slidingSeen.insert(k.sliding);
      moeSeen.insert(k.moe);
    }
    bool varyS = slidingSeen.size() > 1, varyM = moeSeen.size() > 1;
    for (int64_t i = 0; i < a.nLayers; ++i) {
      const LayerKind &k = a.layers[i];
      size_t t = 0;
      while (t < templates.size() && !(templates[t].kind == k))
        ++t;
      if (t == templates.size()) {
        std::string name;
        if (varyS)
          name += k.sliding ? "Local" : "Global";
        if (varyM)
          name += k.moe ? "Sparse" : "Dense";
        if (name.empty())
          name = "Block";
        templates.push_back({k, name, {}});
      }
      templates[t].hfIndices.push_back(i);
      if (!runs.empty() && runs.back().first == t)
        ++runs.back().second;
      else
        runs.push_back({t, 1});
    }
  }

  /// The HF name of layer i's tensors is this prefix, i, '.', the name.
  std::string layerPrefix() const {
    return gpt2() ? "transformer.h." : "model.layers.";
  }

  void header() {
    os << "# Imported from " << a.file << " (model_type '" << a.modelType
       << "') by `mtc import-hf`.\n"
       << "# Edit freely: the config names below carry the config.json "
          "values;\n"
       << "# each parameter's comment names its HuggingFace tensor. Tensor "
          "names\n";
    if (gpt2())
      os << "# are relative to `transformer.h.{i}.` inside a layer. GPT-2's "
            "Conv1D\n"
         << "# weights are stored [in, out], as mtc stores matrices: none is\n"
         << "# transposed. docs/hf.md has the full mapping.\n";
    else
      os << "# are relative to `model.layers.{i}.` inside a layer; mtc "
            "stores\n"
         << "# matrices as [in, out], so `(transposed)` tensors are the HF "
            "weight\n"
         << "# transposed ([out, in] in the checkpoint). docs/hf.md has the "
            "full\n"
         << "# mapping.\n";
    if (templates.size() > 1) {
      os << "#\n# Layer templates (instance j of a template is model.layers.{i}"
            " with i from\n# this list):\n";
      for (const Template &t : templates) {
        os << "#   " << t.name << ": ";
        std::string list;
        for (size_t j = 0; j < t.hfIndices.size(); ++j)
          list += (j ? ", " : "") + std::to_string(t.hfIndices[j]);
        // wrap long lists
        size_t col = 0;
        for (char c : list) {
          os << c;
          ++col;
          if (c == ' ' && col > 60) {
            os << "\n#     ";
            col = 0;
          }
        }
        os << "\n";
      }
    }
    if (!a.layerTypesSource.empty() && templates.size() > 1)
      os << "# (per-layer attention from " << a.layerTypesSource << ")\n";
    os << "\n";
  }

  void entry(const std::string &name, const std::string &value,
             const std::string &comment) {
    std::string line = "    " + name + " = " + value;
    os << line;
    if (!comment.empty()) {
      if (line.size() < 36)
        os << std::string(36 - line.size(), ' ');
      else
        os << "  ";
      os << "# " << comment;
    }
    os << "\n";
  }

  void config() {
    os << "  config {\n";
    entry("vocab", std::to_string(a.vocab), "vocab_size");
    entry("dim", std::to_string(a.dim), "hidden_size");
    entry("n_layers", std::to_string(a.nLayers), "num_hidden_layers");
    entry("n_heads", std::to_string(a.nHeads), "num_attention_heads");
    entry("n_kv", std::to_string(a.nKv), "num_key_value_heads");
    if (a.headDimDefaulted)
      entry("head_dim", std::to_string(a.headDim),
            "head_dim absent: transformers' " + a.modelName + "Config default");
    else if (a.headDimGiven)
      entry("head_dim", std::to_string(a.headDim), "head_dim");
    else if (a.dim % a.nHeads == 0)
      entry("head_dim", "dim / n_heads",
            "hidden_size / num_attention_heads = " + std::to_string(a.headDim));
    else
      entry("head_dim", "(dim - dim % n_heads) / n_heads",
            "hidden_size // num_attention_heads = " +
                std::to_string(a.headDim) + " (rounded down)");
    entry("ffn", std::to_string(a.ffn), "intermediate_size");
    if (anyMoe()) {
      if (!mixtralExperts())
        entry("moe_ffn", std::to_string(a.moeFfn), "moe_intermediate_size");
      if (a.sharedExpert)
        entry("shared_ffn", std::to_string(a.sharedFfn),
              "shared_expert_intermediate_size");
      entry("n_experts", std::to_string(a.nExperts),
            mixtralExperts() ? "num_local_experts" : "num_experts");
      entry("top_k", std::to_string(a.topK), "num_experts_per_tok");
      entry("router_aux_loss_coef", fmtFloat(a.auxCoef),
            "router_aux_loss_coef");
      entry("output_router_logits", a.outputRouterLogits ? "1" : "0",
            "output_router_logits (1: true): transformers adds the aux loss "
            "only then");
      entry("aux_coef", "output_router_logits * router_aux_loss_coef * top_k",
            "per layer; see docs/hf.md");
    }
    entry("theta", fmtFloat(a.rope.theta), a.rope.thetaField);
    if (a.hasLocalRope)
      entry("theta_local", fmtFloat(a.ropeLocal.theta),
            a.ropeLocal.thetaField + " (sliding layers)");
    if (a.ropeFraction != 1.0)
      entry("rope_fraction", fmtFloat(a.ropeFraction), "partial_rotary_factor");
    if (a.rope.llama3) {
      entry("rope_factor", fmtFloat(a.rope.factor), "rope_scaling.factor");
      entry("rope_low_freq_factor", fmtFloat(a.rope.lowFreq),
            "rope_scaling.low_freq_factor");
      entry("rope_high_freq_factor", fmtFloat(a.rope.highFreq),
            "rope_scaling.high_freq_factor");
      entry("rope_original_max", std::to_string(a.rope.originalMax),
            "rope_scaling.original_max_position_embeddings");
    }
    entry("eps", fmtFloat(a.eps), "rms_norm_eps");
    entry("init_std", fmtFloat(a.initStd), "initializer_range");
    bool anySliding = false;
    for (auto &k : a.layers)
      anySliding |= k.sliding;
    if (anySliding)
      entry("window", std::to_string(a.window), "sliding_window");
    if (a.embScale)
      entry("emb_scale", "sqrt(dim)", "Gemma: embeddings * sqrt(hidden_size)");
    if (a.queryPreAttnScalar > 0) {
      double q = a.queryPreAttnScalar;
      entry("query_pre_attn_scalar",
            q == std::floor(q) && q < 1e15 ? std::to_string(int64_t(q))
                                           : fmtFloat(q),
            "query_pre_attn_scalar");
      entry("attn_scale", "1.0 / sqrt(query_pre_attn_scalar)",
            "attention scores scale");
    }
    if (a.attnSoftcap > 0)
      entry("attn_softcap", fmtFloat(a.attnSoftcap), "attn_logit_softcapping");
    if (a.unreadAttnSoftcap > 0)
      os << "    # attn_logit_softcapping (" << fmtFloat(a.unreadAttnSoftcap)
         << ") is not applied: transformers' Gemma 3 attention does not "
            "read it\n";
    if (a.finalSoftcap > 0)
      entry("final_softcap", fmtFloat(a.finalSoftcap),
            "final_logit_softcapping");
    if (a.traits->has(LegacyGeluTanh) && a.actValue == "gelu")
      os << "    # hidden_act 'gelu' is the tanh-approximated GELU: "
            "transformers' GemmaConfig\n    # maps it to gelu_pytorch_tanh\n";
    os << "  }\n";
  }

  void param(const std::string &name, const std::string &shape,
             const std::string &init, const std::string &hf,
             const std::string &indent = "    ") {
    record(name, hf);
    std::string line = indent + "param " + name + ": " + shape + " = " + init;
    os << line;
    if (line.size() < 58)
      os << std::string(58 - line.size(), ' ');
    else
      os << "  ";
    os << "# " << hf << "\n";
  }

  /// The HF tensor of a parameter from its comment: the first word is the
  /// name (relative to `model.layers.{i}.` inside a layer, with `{e}` for the
  /// expert index), "(transposed" marks a transposed matrix.
  void record(const std::string &name, const std::string &hf) {
    std::string tensor = hf.substr(0, hf.find(' '));
    bool transpose = hf.find("(transposed") != std::string::npos;
    if (!current) {
      names[name] = {tensor, transpose};
      return;
    }
    for (size_t j = 0; j < current->hfIndices.size(); ++j) {
      std::string prefix =
          layerPrefix() + std::to_string(current->hfIndices[j]) + ".";
      std::string inst = current->name + "." + std::to_string(j) + ".";
      if (expertCount == 0) {
        names[inst + name] = {prefix + tensor, transpose};
        continue;
      }
      size_t at = tensor.find("{e}");
      for (int64_t e = 0; e < expertCount; ++e)
        names[inst + "FFN." + std::to_string(e) + "." + name] = {
            prefix + tensor.substr(0, at) + std::to_string(e) +
                tensor.substr(at + 3),
            transpose};
    }
  }

  std::string ropeCall(const Template &t, const std::string &x) const {
    bool local = t.kind.sliding && a.hasLocalRope;
    const Rope &r = local ? a.ropeLocal : a.rope;
    std::string s = "rope(" + x + ", " + (local ? "theta_local" : "theta");
    if (a.ropeFraction != 1.0)
      s += ", fraction = rope_fraction";
    if (r.llama3)
      s += ", scaling = llama3(rope_factor, rope_low_freq_factor, "
           "rope_high_freq_factor, rope_original_max)";
    return s + ")";
  }

  std::string actCall(const std::string &x) const {
    switch (a.act) {
    case Act::Silu:
      return "silu(" + x + ")";
    case Act::GeluTanh:
      return "gelu(" + x + ", approximate = \"tanh\")";
    case Act::GeluErf:
      return "gelu(" + x + ")";
    }
    return x;
  }

  static std::string proj(const std::string &x, const std::string &w,
                          const std::string &b, bool bias) {
    return bias ? "matmul(" + x + ", " + w + ", " + b + ")" : x + " @ " + w;
  }

  void layer(const Template &t) {
    const bool moe = t.kind.moe;
    const std::string init = normInit();
    os << "\n";
    if (templates.size() > 1) {
      os << "  # " << t.name << ": "
         << (t.kind.sliding ? "sliding-window attention" : "global attention");
      if (anyDenseWithMoe() || anyMoe())
        os << (moe ? ", mixture-of-experts feed-forward"
                   : ", dense feed-forward");
      os << ".\n";
    }
    os << "  layer " << t.name << " x " << t.hfIndices.size() << " {\n";
    // Attention parameters.
    if (a.norms != NormPlacement::Post)
      param("attn_norm", "[dim]", init, "input_layernorm.weight");
    if (a.fusedQKV) {
      param("w_qkv", "[dim, (n_heads + 2 * n_kv) * head_dim]",
            "normal(init_std)",
            "self_attn.qkv_proj.weight (transposed; q, k, v rows in order)");
    } else {
      param("wq", "[dim, n_heads * head_dim]", "normal(init_std)",
            "self_attn.q_proj.weight (transposed)");
      if (a.qkvBias)
        param("bq", "[n_heads * head_dim]", "zeros", "self_attn.q_proj.bias");
      param("wk", "[dim, n_kv * head_dim]", "normal(init_std)",
            "self_attn.k_proj.weight (transposed)");
      if (a.qkvBias)
        param("bk", "[n_kv * head_dim]", "zeros", "self_attn.k_proj.bias");
      param("wv", "[dim, n_kv * head_dim]", "normal(init_std)",
            "self_attn.v_proj.weight (transposed)");
      if (a.qkvBias)
        param("bv", "[n_kv * head_dim]", "zeros", "self_attn.v_proj.bias");
    }
    if (a.qkNorm == QKNorm::PerHead) {
      param("q_norm", "[head_dim]", init, "self_attn.q_norm.weight");
      param("k_norm", "[head_dim]", init, "self_attn.k_norm.weight");
    } else if (a.qkNorm == QKNorm::Full) {
      param("q_norm", "[n_heads * head_dim]", init, "self_attn.q_norm.weight");
      param("k_norm", "[n_kv * head_dim]", init, "self_attn.k_norm.weight");
    }
    param("wo", "[n_heads * head_dim, dim]", "normal(init_std)",
          "self_attn.o_proj.weight (transposed)");
    if (a.oBias)
      param("bo", "[dim]", "zeros", "self_attn.o_proj.bias");
    if (a.norms == NormPlacement::Sandwich) {
      param("post_attn_norm", "[dim]", init, "post_attention_layernorm.weight");
      param("pre_ffw_norm", "[dim]", init, "pre_feedforward_layernorm.weight");
    } else if (a.norms == NormPlacement::Post) {
      param("post_attn_norm", "[dim]", init, "post_attention_layernorm.weight");
    } else {
      param("mlp_norm", "[dim]", init, "post_attention_layernorm.weight");
    }
    // Feed-forward parameters.
    std::string mlpPrefix = mixtralExperts() ? "block_sparse_moe." : "mlp.";
    if (!moe) {
      if (a.fusedGateUp) {
        param("w_gate_up", "[dim, 2 * ffn]", "normal(init_std)",
              "mlp.gate_up_proj.weight (transposed; gate rows, then up)");
      } else {
        param("w_gate", "[dim, ffn]", "normal(init_std)",
              "mlp.gate_proj.weight (transposed)");
        if (a.mlpBias)
          param("b_gate", "[ffn]", "zeros", "mlp.gate_proj.bias");
        param("w_up", "[dim, ffn]", "normal(init_std)",
              "mlp.up_proj.weight (transposed)");
        if (a.mlpBias)
          param("b_up", "[ffn]", "zeros", "mlp.up_proj.bias");
      }
      param("w_down", "[ffn, dim]", "normal(init_std)",
            "mlp.down_proj.weight (transposed)");
      if (a.mlpBias)
        param("b_down", "[dim]", "zeros", "mlp.down_proj.bias");
    } else {
      param("router", "[dim, n_experts]", "normal(init_std)",
            mlpPrefix + "gate.weight (transposed)");
      if (a.sharedExpert) {
        param("shared_gate_proj", "[dim, shared_ffn]", "normal(init_std)",
              "mlp.shared_expert.gate_proj.weight (transposed)");
        param("shared_up_proj", "[dim, shared_ffn]", "normal(init_std)",
              "mlp.shared_expert.up_proj.weight (transposed)");
        param("shared_down_proj", "[shared_ffn, dim]", "normal(init_std)",
              "mlp.shared_expert.down_proj.weight (transposed)");
        param("shared_gate", "[dim, 1]", "normal(init_std)",
              "mlp.shared_expert_gate.weight (transposed)");
      }
    }
    if (a.norms == NormPlacement::Sandwich)
      param("post_ffw_norm", "[dim]", init,
            "post_feedforward_layernorm.weight");
    else if (a.norms == NormPlacement::Post)
      param("post_ffw_norm", "[dim]", init,
            "post_feedforward_layernorm.weight");
    if (moe) {
      bool mx = mixtralExperts();
      std::string F = mx ? "ffn" : "moe_ffn";
      std::string ep = mlpPrefix + "experts.{e}.";
      os << "\n    # Routed experts: expert e is " << ep << "*\n";
      os << "    expert FFN x n_experts {\n";
      auto eparam = [&](const std::string &n, const std::string &shape,
                        const std::string &hf) {
        expertCount = a.nExperts;
        record(n, ep + hf + " (transposed)");
        expertCount = 0;
        std::string line =
            "      param " + n + ": " + shape + " = normal(init_std)";
        os << line << std::string(line.size() < 58 ? 58 - line.size() : 2, ' ')
           << "# " << ep << hf << " (transposed)\n";
      };
      if (mx) {
        eparam("w1", "[dim, ffn]", "w1.weight");
        eparam("w3", "[dim, ffn]", "w3.weight");
        eparam("w2", "[ffn, dim]", "w2.weight");
      } else {
        eparam("w_gate", "[dim, " + F + "]", "gate_proj.weight");
        eparam("w_up", "[dim, " + F + "]", "up_proj.weight");
        eparam("w_down", "[" + F + ", dim]", "down_proj.weight");
      }
      os << "\n      forward(t: [T, dim]) -> [T, dim] {\n";
      if (mx)
        os << "        return (" << actCall("t @ w1") << " * (t @ w3)) @ w2\n";
      else
        os << "        return (" << actCall("t @ w_gate")
           << " * (t @ w_up)) @ w_down\n";
      os << "      }\n    }\n";
    }
    // Forward.
    os << "\n    forward(x: [B, S, dim]) -> [B, S, dim] {\n";
    std::string in = a.norms == NormPlacement::Post ? "x" : "h";
    if (a.norms != NormPlacement::Post)
      os << "      h = " << normCall("x", "attn_norm") << "\n";
    if (a.fusedQKV) {
      os << "      q, k, v = split(" << in
         << " @ w_qkv, [n_heads * head_dim, n_kv * head_dim, n_kv * "
            "head_dim], axis = -1)\n";
    } else {
      os << "      q = " << proj(in, "wq", "bq", a.qkvBias) << "\n";
      os << "      k = " << proj(in, "wk", "bk", a.qkvBias) << "\n";
      os << "      v = " << proj(in, "wv", "bv", a.qkvBias) << "\n";
    }
    if (a.qkNorm == QKNorm::Full) {
      os << "      q = " << normCall("q", "q_norm") << "   # over all heads\n";
      os << "      k = " << normCall("k", "k_norm") << "\n";
    }
    os << "      q = reshape(q, [B, S, n_heads, head_dim])\n";
    os << "      k = reshape(k, [B, S, n_kv, head_dim])\n";
    os << "      v = reshape(v, [B, S, n_kv, head_dim])\n";
    if (a.qkNorm == QKNorm::PerHead) {
      os << "      q = " << normCall("q", "q_norm") << "   # per head\n";
      os << "      k = " << normCall("k", "k_norm") << "\n";
    }
    os << "      q = " << ropeCall(t, "q") << "\n";
    os << "      k = " << ropeCall(t, "k") << "\n";
    os << "      a = attention(q, k, v, causal = true";
    if (t.kind.sliding)
      os << ", window = window";
    if (a.attnSoftcap > 0)
      os << ", softcap = attn_softcap";
    if (a.queryPreAttnScalar > 0)
      os << ", scale = attn_scale";
    os << ")\n";
    os << "      a = "
       << proj("reshape(a, [B, S, n_heads * head_dim])", "wo", "bo", a.oBias)
       << "\n";
    if (a.norms != NormPlacement::Pre)
      os << "      a = " << normCall("a", "post_attn_norm") << "\n";
    os << "      x = x + a\n\n";
    std::string min = "m";
    if (a.norms == NormPlacement::Pre)
      os << "      m = " << normCall("x", "mlp_norm") << "\n";
    else if (a.norms == NormPlacement::Sandwich)
      os << "      m = " << normCall("x", "pre_ffw_norm") << "\n";
    else
      min = "x";
    if (!moe) {
      if (a.fusedGateUp) {
        os << "      g, u = split(" << min
           << " @ w_gate_up, [ffn, ffn], axis = -1)\n";
        os << "      m = (" << actCall("g") << " * u) @ w_down\n";
      } else {
        os << "      m = " +
                  proj("(" + actCall(proj(min, "w_gate", "b_gate", a.mlpBias)) +
                           " * (" + proj(min, "w_up", "b_up", a.mlpBias) + "))",
                       "w_down", "b_down", a.mlpBias)
           << "\n";
      }
    } else {
      os << "      r = moe(" << min
         << ", router, FFN, top_k = top_k, normalize = "
         << (a.normalizeTopK ? "true" : "false") << ", aux_loss = aux_coef)\n";
      if (a.sharedExpert) {
        os << "      s = (" << actCall(min + " @ shared_gate_proj") << " * ("
           << min << " @ shared_up_proj)) @ shared_down_proj\n";
        os << "      m = r + sigmoid(" << min
           << " @ shared_gate) * s   # [B, S, 1] gate\n";
      } else {
        os << "      m = r\n";
      }
    }
    if (a.norms != NormPlacement::Pre)
      os << "      m = " << normCall("m", "post_ffw_norm") << "\n";
    os << "      return x + m\n";
    os << "    }\n  }\n";
  }

  void modelForward() {
    os << "\n  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {\n";
    os << "    x = embedding(tokens, tok_emb)"
       << (a.embScale ? " * emb_scale" : "") << "\n";
    if (templates.size() == 1) {
      os << "    x = " << templates[0].name << "(x)\n";
    } else {
      // Smallest period p of the run sequence that repeats at least twice:
      // `repeat n { ... }`, then the remaining runs.
      size_t n = runs.size(), period = n;
      for (size_t p = 1; p < n; ++p) {
        bool ok = true;
        for (size_t i = p; i < n && ok; ++i)
          ok = runs[i] == runs[i - p];
        // the final run may be a shorter copy of its counterpart
        if (!ok) {
          ok = true;
          for (size_t i = p; i + 1 < n && ok; ++i)
            ok = runs[i] == runs[i - p];
          ok = ok && n > p && runs[n - 1].first == runs[n - 1 - p].first &&
               runs[n - 1].second < runs[n - 1 - p].second;
        }
        if (ok) {
          period = p;
          break;
        }
      }
      size_t reps = period < n ? n / period : 1;
      // full repetitions only: every run of the group equals the period's
      while (reps > 1) {
        bool ok = true;
        for (size_t i = 0; i < reps * period && ok; ++i)
          ok = runs[i] == runs[i % period];
        if (ok)
          break;
        --reps;
      }
      size_t start = 0;
      if (reps > 1) {
        os << "    repeat " << reps << " {\n";
        for (size_t i = 0; i < period; ++i)
          os << "      x = " << templates[runs[i].first].name << "["
             << runs[i].second << "](x)\n";
        os << "    }\n";
        start = reps * period;
      }
      for (size_t i = start; i < n; ++i)
        os << "    x = " << templates[runs[i].first].name << "["
           << runs[i].second << "](x)\n";
    }
    os << "    x = " << normCall("x", "final_norm") << "\n";
    std::string logits =
        a.tie ? "x @ transpose(tok_emb)" : std::string("x @ lm_head");
    if (a.finalSoftcap > 0)
      logits = "softcap(" + logits + ", final_softcap)";
    os << "    logits = " << logits
       << (a.tie ? "   # tie_word_embeddings: the head is tok_emb" : "")
       << "\n";
    os << "    return cross_entropy(logits, targets, ignore_index = -100)\n";
    os << "  }\n";
  }
};

} // namespace

std::string hfConfigPath(const std::string &dirOrConfig) {
  struct stat st;
  if (::stat(dirOrConfig.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::string d = dirOrConfig;
    while (d.size() > 1 && d.back() == '/')
      d.pop_back();
    return d + "/config.json";
  }
  return dirOrConfig;
}

Expected<HFImportResult> importHFConfigText(const std::string &jsonText,
                                            const std::string &displayName) {
  try {
    // Every failure of the parser (a number past a double's range
    // included) is an error with its place.
    Expected<json> parsed = parseJson(jsonText, displayName);
    if (!parsed)
      return parsed.status();
    const json &cfg = *parsed;
    Arch arch = readArch(cfg, displayName);
    HFImportResult out;
    for (const std::string &k : arch.unknownFields)
      out.warnings.push_back(
          displayName + ": field '" + k + "' (" + show(cfg[k]) +
          ") is not known to the importer for model_type '" + arch.modelType +
          "' and is ignored; check that it does not change the computation");
    for (const std::string &w : arch.notes)
      out.warnings.push_back(displayName + ": " + w);
    Printer printer(arch);
    out.source = printer.run();
    out.names = std::move(printer.names);
    out.tiedHead = arch.tie;
    return out;
  } catch (const ImportError &e) {
    return Status::error(e.message);
  } catch (const std::exception &e) {
    return Status::error(displayName + ": " + e.what());
  } catch (...) {
    return Status::error(displayName + ": unexpected error while importing");
  }
}

namespace {

/// Whether the checkpoint beside \p configPath stores an `lm_head.weight` of
/// other values than the embeddings \p embedding (names from the import;
/// without a base-model prefix when the checkpoint has none); false when
/// there are no weights, no such tensor, or the weights cannot be read (the
/// loader reports those).
bool storedHeadDiffers(const std::string &configPath,
                       const std::string &embedding) {
  size_t slash = configPath.rfind('/');
  std::string dir =
      slash == std::string::npos ? "." : configPath.substr(0, slash);
  struct stat st;
  if (::stat((dir + "/model.safetensors").c_str(), &st) != 0 &&
      ::stat((dir + "/model.safetensors.index.json").c_str(), &st) != 0)
    return false;
  Expected<SafetensorsModel> m = SafetensorsModel::open(dir);
  if (!m)
    return false;
  std::string emb = embedding;
  if (!m->find(emb) && emb.compare(0, 6, "model.") == 0)
    emb = emb.substr(6);
  else if (!m->find(emb) && emb.compare(0, 12, "transformer.") == 0)
    emb = emb.substr(12);
  Expected<bool> same = tensorsEqual(*m, "lm_head.weight", emb);
  return same && !*same;
}

} // namespace

Expected<HFImportResult> importHFConfig(const std::string &configPath) {
  struct stat st;
  if (::stat(configPath.c_str(), &st) != 0)
    return Status::error("cannot open '" + configPath +
                         "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Status::error("'" + configPath + "' is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxConfigBytes)
    return Status::error(configPath + ": file is " +
                         std::to_string(st.st_size) +
                         " bytes; config.json is limited to " +
                         std::to_string(kMaxConfigBytes) + " bytes");
  std::ifstream in(configPath, std::ios::binary);
  if (!in)
    return Status::error("cannot open '" + configPath +
                         "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  Expected<HFImportResult> tied = importHFConfigText(ss.str(), configPath);
  if (!tied || !tied->tiedHead || !tied->names.count("tok_emb") ||
      !storedHeadDiffers(configPath, tied->names.at("tok_emb").tensor))
    return tied;
  // transformers does not tie a head whose checkpoint stores other values
  // than the embeddings: it keeps the stored head, with a warning.
  json cfg = json::parse(ss.str());
  cfg["tie_word_embeddings"] = false;
  Expected<HFImportResult> untied = importHFConfigText(cfg.dump(), configPath);
  if (!untied)
    return untied;
  untied->warnings.push_back(
      configPath +
      ": tie_word_embeddings is true, but the checkpoint's "
      "lm_head.weight differs from the embeddings (" +
      tied->names.at("tok_emb").tensor +
      "); the model keeps it as its own head (untied), as transformers "
      "does; set tie_word_embeddings to false in the config to silence this");
  return untied;
}

} // namespace mtc
