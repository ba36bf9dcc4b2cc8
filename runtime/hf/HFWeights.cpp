//===- HFWeights.cpp - Parameters from a HuggingFace checkpoint -*- C++ -*-===//
//
// Part of mtc. See HFWeights.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/hf/HFWeights.h"

#include "lib/Format/Safetensors.h"

#include <algorithm>
#include <set>
#include <sys/stat.h>
#include <vector>

namespace mtc::driver {

namespace {

bool isFile(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool endsWith(const std::string &s, const std::string &tail) {
  return s.size() >= tail.size() &&
         s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// Lists at most 8 names, then a count.
std::string listNames(const std::vector<std::string> &names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 8; ++i)
    out += (i ? ", " : "") + names[i];
  if (names.size() > 8)
    out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

/// \p tensor without its base-model prefix (`transformer.`, `model.`), or
/// "" if it has none: a checkpoint of the base model (GPT2Model, LlamaModel:
/// the published GPT-2 files) names `h.0.ln_1.weight` what the causal-LM
/// model names `transformer.h.0.ln_1.weight`, and transformers loads either.
std::string withoutBasePrefix(const std::string &tensor) {
  for (const char *prefix : {"transformer.", "model."}) {
    std::string p = prefix;
    if (tensor.compare(0, p.size(), p) == 0)
      return tensor.substr(p.size());
  }
  return "";
}

/// Buffers some checkpoints carry that are not parameters: rotary
/// `inv_freq`, GPT-2's causal masks `h.{i}.attn.bias` / `.attn.masked_bias`.
bool isBuffer(const std::string &name) {
  return endsWith(name, "rotary_emb.inv_freq") ||
         endsWith(name, ".attn.bias") || endsWith(name, ".attn.masked_bias");
}

} // namespace

std::string hfWeightsPath(const std::string &dirOrConfig) {
  struct stat st;
  std::string dir = dirOrConfig;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? "." : dir.substr(0, slash);
  }
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  for (const char *f : {"/model.safetensors.index.json", "/model.safetensors"})
    if (isFile(dir + f))
      return dir + f;
  return "";
}

Status loadHFWeights(exec::ParamStore &store, const bundle::Bundle &b,
                     const std::string &path) {
  Expected<SafetensorsModel> ckpt = SafetensorsModel::open(path);
  if (!ckpt)
    return Status::error(ckpt.message());
  if (b.hfNames.empty())
    return Status::error(
        "model '" + b.model +
        "' has no HuggingFace tensor names (only models imported with "
        "`--hf DIR` or `mtc compile --hf DIR` carry them), so '" +
        path + "' cannot be loaded into it");

  std::vector<std::string> unmapped, missing, shapeErrors;
  std::set<std::string> used;
  // Pass 1 checks every name and shape from the headers (no tensor data is
  // read); pass 2 converts each tensor straight into the store, through one
  // tensor-sized buffer only where a transpose is needed.
  struct Load {
    size_t slot;
    const bundle::HFTensorRef *ref;
    std::string tensor; ///< its name in the checkpoint
    int64_t rows, cols; ///< HF shape, for transposed matrices
  };
  std::vector<Load> loads;
  for (size_t k = 0; k < store.slots().size(); ++k) {
    const exec::ParamSlot &s = store.slots()[k];
    auto it = b.hfNames.find(s.name);
    if (it == b.hfNames.end()) {
      unmapped.push_back(s.name);
      continue;
    }
    const bundle::HFTensorRef &ref = it->second;
    std::string tensor = ref.tensor;
    const TensorInfo *t = ckpt->find(tensor);
    if (std::string base = withoutBasePrefix(tensor);
        !t && !base.empty() && ckpt->find(base)) {
      tensor = base;
      t = ckpt->find(base);
    }
    used.insert(tensor);
    if (!t) {
      missing.push_back(ref.tensor + " (for " + s.name + ")");
      continue;
    }
    std::vector<int64_t> want(s.decl->shape.begin(), s.decl->shape.end());
    std::vector<int64_t> hfWant = want;
    if (ref.transpose) {
      if (want.size() != 2) {
        shapeErrors.push_back(s.name + " is marked transposed but has shape " +
                              formatTensorShape(want));
        continue;
      }
      std::swap(hfWant[0], hfWant[1]);
    }
    if (t->shape != hfWant) {
      shapeErrors.push_back("tensor '" + tensor + "' has shape " +
                            formatTensorShape(t->shape) + ", expected " +
                            formatTensorShape(hfWant) + " (parameter " +
                            s.name + " " + formatTensorShape(want) +
                            (ref.transpose ? ", transposed)" : ")"));
      continue;
    }
    if (t->dtype != TensorDType::F32 && t->dtype != TensorDType::BF16 &&
        t->dtype != TensorDType::F16 && t->dtype != TensorDType::F64) {
      shapeErrors.push_back("tensor '" + tensor + "' has dtype " +
                            dtypeName(t->dtype) +
                            " (expected F32, BF16, F16 or F64)");
      continue;
    }
    loads.push_back({k, &ref, tensor, hfWant.size() == 2 ? hfWant[0] : 0,
                     hfWant.size() == 2 ? hfWant[1] : 0});
  }

  // Tensors no parameter reads. Buffers are not parameters; a tied model's
  // lm_head.weight is transformers' alias of the embeddings.
  bool tied = !used.count("lm_head.weight");
  std::vector<std::string> unexpected;
  for (const std::string &name : ckpt->names())
    if (!used.count(name) && !isBuffer(name) &&
        !(tied && name == "lm_head.weight"))
      unexpected.push_back(name);

  std::string msg;
  auto add = [&](const std::string &what, const std::vector<std::string> &v) {
    if (v.empty())
      return;
    msg += (msg.empty() ? "" : "; ") + what + ": " + listNames(v);
  };
  add("parameters without a HuggingFace name", unmapped);
  add("missing tensors", missing);
  add("shape mismatches", shapeErrors);
  add("unexpected tensors (not parameters of the model)", unexpected);
  if (!msg.empty())
    return Status::error(path + ": cannot load into model '" + b.model +
                         "': " + msg);
  std::vector<float> buf;
  for (const Load &l : loads) {
    exec::ParamSlot &s = store.slots()[l.slot];
    size_t n = s.value.size();
    if (!l.ref->transpose) {
      if (Status st = ckpt->readAsF32(l.tensor, s.value.data(), n); !st.ok())
        return st;
      continue;
    }
    buf.resize(n);
    if (Status st = ckpt->readAsF32(l.tensor, buf.data(), n); !st.ok())
      return st;
    // HF [out, in] row-major to mtc [in, out].
    float *dst = s.value.data();
    for (int64_t r = 0; r < l.rows; ++r)
      for (int64_t c = 0; c < l.cols; ++c)
        dst[c * l.rows + r] = buf[r * l.cols + c];
  }
  return Status::success();
}

} // namespace mtc::driver
