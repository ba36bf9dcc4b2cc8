//===- Generate.h - Sampling text from a trained model ----------*- C++ -*-===//
//
// Part of mtc. What `mtc generate` runs on a checkpoint, and the sampling the
// training run's --sample-prompt shares with it: tokenizing, continuing a
// token sequence (with the KV cache where the model allows it) and decoding.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_GENERATE_H
#define MTC_RUNTIME_DRIVER_GENERATE_H

#include "lib/Bundle/Bundle.h"
#include "lib/Support/Status.h"
#include "lib/Tokenizer/Tokenizer.h"
#include "runtime/driver/DeviceKind.h"
#include "runtime/exec/Executor.h"
#include "runtime/train/Random.h"

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace mtc::driver {

struct GenerateOptions {
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 0.8;
  int64_t topK = 40;
  uint64_t seed = 1;
  int64_t context = 0;  ///< 0: the sequence length the checkpoint trained at
  bool useCache = true; ///< false: recompute the whole context per token
  /// The device the model runs on: cpu, cuda or cuda-emu (driver/
  /// DeviceModel.h; no KV cache on a CUDA device), and on a CUDA device its
  /// memory in bytes.
  DeviceKind device = DeviceKind::Cpu;
  int64_t deviceMemory = 0;
  /// tokenizer.json (or its directory) for the prompt and the output; "" :
  /// the checkpoint bundle's (HF imports), else bytes.
  std::string tokenizer;
  /// The program the user ran: messages start with it (TrainOptions).
  std::string toolName = "mtc";
};

/// Loads a checkpoint directory written by train() and prints the prompt
/// followed by the sampled continuation.
int generate(const std::string &checkpointDir, const GenerateOptions &opts,
             std::ostream &out, std::ostream &err);

/// The tokenizer text is turned into ids with: \p path (a tokenizer.json or
/// a directory holding one) if given, else the one the bundle carries (models
/// imported from HuggingFace), else none (bytes are tokens).
Expected<std::shared_ptr<tok::Tokenizer>>
modelTokenizer(const bundle::Bundle &b, const std::string &path);

/// \p text as token ids: with the tokenizer, or its bytes.
Expected<std::vector<int32_t>> encodeText(const tok::Tokenizer *tok,
                                          const std::string &text);

/// \p ids as text: with the tokenizer, or as bytes.
std::string decodeText(const tok::Tokenizer *tok,
                       const std::vector<int32_t> &ids);

/// Continues \p tokens by \p n tokens sampled on the host executor \p ex
/// (the training run's sample) with \p temperature and \p topK, seeing at
/// most \p context tokens; with the KV cache where the model allows it.
Expected<std::vector<int32_t>>
continueTokens(exec::Executor &ex, std::vector<int32_t> tokens, int64_t n,
               int64_t context, double temperature, int64_t topK,
               train::Rng &rng, bool useCache = true);

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_GENERATE_H
