//===- Generate.cpp - Sampling text from a trained model --------*- C++ -*-===//
//
// Part of mtc. See Generate.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/Generate.h"

#include "lib/Format/Safetensors.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/driver/CommandLine.h"
#include "runtime/driver/DeviceModel.h"
#include "runtime/exec/ParamStore.h"
#include "runtime/train/Random.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <ostream>

namespace mtc::driver {

namespace {

/// Samples the next token from logits [V] with temperature and top-k.
int32_t sampleToken(const float *logits, int64_t V, double temperature,
                    int64_t topK, train::Rng &rng) {
  std::vector<std::pair<float, int32_t>> cand(V);
  for (int64_t i = 0; i < V; ++i)
    cand[i] = {logits[i], static_cast<int32_t>(i)};
  if (temperature <= 0) {
    return std::max_element(cand.begin(), cand.end())->second;
  }
  int64_t k = topK > 0 ? std::min(topK, V) : V;
  std::partial_sort(cand.begin(), cand.begin() + k, cand.end(),
                    [](auto &a, auto &b) { return a.first > b.first; });
  double maxl = cand[0].first, total = 0;
  std::vector<double> p(k);
  for (int64_t i = 0; i < k; ++i)
    total += p[i] = std::exp((cand[i].first - maxl) / temperature);
  double r = rng.uniform() * total;
  for (int64_t i = 0; i < k; ++i) {
    r -= p[i];
    if (r <= 0)
      return cand[i].second;
  }
  return cand[k - 1].second;
}

/// Continues \p tokens by \p n tokens. Decodes incrementally with the KV
/// cache; when the cache holds \p context positions it is refilled with the
/// last context/2 tokens. Models the cache cannot decode (ops mixing
/// positions other than attention) fall back to recomputing the last
/// \p context tokens for every new token.
Expected<std::vector<int32_t>> continueTokens(
    exec::Executor &ex,
    const std::function<Expected<exec::Tensor>(const int32_t *, int64_t)>
        &logitsOf,
    std::vector<int32_t> tokens, int64_t n, int64_t context, double temperature,
    int64_t topK, train::Rng &rng, bool useCache) {
  std::vector<int32_t> generated;
  ex.resetCache();
  auto prefill = [&]() {
    ex.resetCache();
    int64_t keep =
        std::min<int64_t>(tokens.size(), std::max<int64_t>(context / 2, 1));
    return ex.decode(tokens.data() + tokens.size() - keep, keep);
  };
  exec::Tensor logits;
  if (useCache) {
    int64_t len = std::min<int64_t>(tokens.size(), context);
    Expected<exec::Tensor> first =
        ex.decode(tokens.data() + tokens.size() - len, len);
    if (first)
      logits = std::move(*first);
    else
      useCache = false;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!useCache) {
      int64_t len = std::min<int64_t>(tokens.size(), context);
      Expected<exec::Tensor> full =
          logitsOf(tokens.data() + tokens.size() - len, len);
      if (!full)
        return full.status();
      logits = std::move(*full);
    }
    int64_t V = logits.shape.back(), rows = logits.numel() / V;
    int32_t next =
        sampleToken(logits.data() + (rows - 1) * V, V, temperature, topK, rng);
    tokens.push_back(next);
    generated.push_back(next);
    if (useCache && i + 1 < n) {
      Expected<exec::Tensor> next = ex.cachedTokens() >= context
                                        ? prefill()
                                        : ex.decode(&tokens.back(), 1);
      if (!next)
        return next.status();
      logits = std::move(*next);
    }
  }
  return generated;
}

/// continueTokens on \p dm's device; KV-cache decoding is the host
/// executor's only (DeviceModel.h).
Expected<std::vector<int32_t>> continueTokens(DeviceModel &dm,
                                              std::vector<int32_t> tokens,
                                              int64_t n, int64_t context,
                                              double temperature, int64_t topK,
                                              train::Rng &rng, bool useCache) {
  auto logitsOf = [&](const int32_t *t, int64_t len) {
    return dm.logits(t, 1, len);
  };
  return continueTokens(dm.executor(), logitsOf, std::move(tokens), n, context,
                        temperature, topK, rng, useCache && dm.host());
}

std::string bytesToText(const std::vector<int32_t> &tokens) {
  std::string s;
  for (int32_t t : tokens)
    s.push_back(static_cast<char>(t));
  return s;
}

} // namespace

/// continueTokens on the host executor \p ex (the training run's sample).
Expected<std::vector<int32_t>> continueTokens(exec::Executor &ex,
                                              std::vector<int32_t> tokens,
                                              int64_t n, int64_t context,
                                              double temperature, int64_t topK,
                                              train::Rng &rng, bool useCache) {
  auto logitsOf = [&](const int32_t *t, int64_t len) {
    return ex.logits(t, 1, len);
  };
  return continueTokens(ex, logitsOf, std::move(tokens), n, context,
                        temperature, topK, rng, useCache);
}

/// The tokenizer text is turned into ids with: \p path (a tokenizer.json or
/// a directory holding one) if given, else the one the bundle carries (models
/// imported from HuggingFace), else none (bytes are tokens).
Expected<std::shared_ptr<tok::Tokenizer>>
modelTokenizer(const bundle::Bundle &b, const std::string &path) {
  if (!path.empty()) {
    Expected<tok::Tokenizer> t = tok::Tokenizer::load(path);
    if (!t)
      return t.status();
    return std::make_shared<tok::Tokenizer>(std::move(*t));
  }
  if (b.hfTokenizer.empty())
    return std::shared_ptr<tok::Tokenizer>();
  Expected<tok::Tokenizer> t =
      tok::Tokenizer::fromJson(b.hfTokenizer, "the model's tokenizer.json");
  if (!t)
    return t.status();
  return std::make_shared<tok::Tokenizer>(std::move(*t));
}

/// \p text as token ids: with the tokenizer, or its bytes.
Expected<std::vector<int32_t>> encodeText(const tok::Tokenizer *tok,
                                          const std::string &text) {
  std::vector<int32_t> ids;
  if (!tok) {
    for (unsigned char c : text)
      ids.push_back(c);
    return ids;
  }
  Expected<std::vector<uint32_t>> e = tok->encode(text);
  if (!e)
    return e.status();
  for (uint32_t id : *e)
    ids.push_back(static_cast<int32_t>(id));
  return ids;
}

std::string decodeText(const tok::Tokenizer *tok,
                       const std::vector<int32_t> &ids) {
  if (!tok)
    return bytesToText(ids);
  std::vector<uint32_t> u(ids.begin(), ids.end());
  return tok->decode(u);
}

namespace {

int generateImpl(const std::string &ckpt, const GenerateOptions &opts,
                 std::ostream &out, std::ostream &err) {
  // The checkpoint resume would accept, checked as resume checks it, read
  // whole from one checkpoint while a run may be replacing it.
  bundle::Bundle b;
  std::unique_ptr<exec::ParamStore> stored;
  int64_t recordedSeq = 256;
  Status loaded = readStableCheckpoint(ckpt, [&](const std::string &dir) {
    if (Status st = verifyCheckpointFiles(dir); !st.ok())
      return st;
    Expected<bundle::Bundle> read = bundle::readFile(dir + "/model.mtb");
    if (!read)
      return Status::error(read.message() + " (is '" + dir +
                           "' a checkpoint written by mtc train --out?)");
    b = std::move(read).value();
    if (Status st = bundle::checkTokenShapes(b, 1, -1); !st.ok())
      return st;
    Expected<SafetensorsFile> weights =
        SafetensorsFile::open(dir + "/model.safetensors");
    if (!weights)
      return weights.status();
    Expected<std::unique_ptr<exec::ParamStore>> created =
        exec::ParamStore::create(b);
    if (!created)
      return created.status();
    stored = std::move(*created);
    for (exec::ParamSlot &s : stored->slots())
      if (Status st =
              weights->readAsF32(s.name, s.value.data(), s.value.size());
          !st.ok())
        return st;
    // options.seq (checkpoint/Checkpoint.h); older checkpoints: seq.
    Expected<TrainerState> state = readTrainerState(dir);
    if (state && state->options.seq > limits::kSeq)
      return Status::error(dir + "/trainer_state.json: options.seq " +
                           std::to_string(state->options.seq) +
                           " is more than the limit of --seq and --context, " +
                           std::to_string(limits::kSeq));
    if (state && state->options.seq > 0)
      recordedSeq = state->options.seq;
    return Status::success();
  });
  if (!loaded.ok()) {
    err << opts.toolName << ": error: " << loaded.message() << "\n";
    return 1;
  }
  exec::ParamStore &store = *stored;
  int64_t context = opts.context > 0 ? opts.context : recordedSeq;
  // A learned position table bounds the context: the KV cache takes the
  // rows at the tokens' absolute positions.
  if (Status st = bundle::checkSequenceFits(b, context, "--context");
      !st.ok()) {
    err << opts.toolName << ": error: " << st.message() << "\n";
    return 1;
  }
  int64_t vocab = b.vocabulary();
  Expected<std::shared_ptr<tok::Tokenizer>> tokenizer =
      modelTokenizer(b, opts.tokenizer);
  if (!tokenizer) {
    err << opts.toolName << ": error: " << tokenizer.message() << "\n";
    return 1;
  }
  std::shared_ptr<tok::Tokenizer> tok = *tokenizer;
  if (!tok && vocab != 256) {
    err << opts.toolName << ": error: model '" << b.model
        << "' has a vocabulary of " << vocab
        << " and no tokenizer: give --tokenizer tokenizer.json (models "
           "imported with --hf DIR carry DIR/tokenizer.json)\n";
    return 1;
  }
  if (tok && tok->vocabSize() > static_cast<uint32_t>(vocab)) {
    err << opts.toolName << ": error: " << tok->name() << " has "
        << tok->vocabSize() << " tokens, more than the model's vocabulary of "
        << vocab << "\n";
    return 1;
  }
  Expected<std::unique_ptr<DeviceModel>> dm =
      DeviceModel::open(b, store, opts.device, opts.deviceMemory);
  if (!dm) {
    err << opts.toolName << ": error: generate: " << dm.message() << "\n";
    return 1;
  }
  if (!(*dm)->host())
    err << "device " << (*dm)->describe() << "\n";
  train::Rng rng(opts.seed, 99);
  Expected<std::vector<int32_t>> prompt = encodeText(tok.get(), opts.prompt);
  if (!prompt) {
    err << opts.toolName << ": error: --prompt: " << prompt.message() << "\n";
    return 1;
  }
  if (prompt->empty())
    prompt->push_back(tok ? 0 : '\n');
  Expected<std::vector<int32_t>> gen =
      continueTokens(**dm, *prompt, opts.tokens, context, opts.temperature,
                     opts.topK, rng, opts.useCache);
  if (!gen) {
    err << opts.toolName << ": error: " << gen.message() << "\n";
    return 1;
  }
  out << opts.prompt << decodeText(tok.get(), *gen) << "\n";
  return 0;
}

} // namespace

int generate(const std::string &dir, const GenerateOptions &opts,
             std::ostream &out, std::ostream &err) {
  try {
    return generateImpl(dir, opts, out, err);
  } catch (const std::exception &e) {
    err << opts.toolName << ": error: " << e.what() << "\n";
  }
  return 1;
}

} // namespace mtc::driver
