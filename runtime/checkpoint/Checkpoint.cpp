//===- Checkpoint.cpp - Full-state checkpoints and exact resume -*- C++ -*-===//
//
// Part of mtc. See Checkpoint.h for the files and the atomic protocol.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointFiles.h"

#include "lib/Bundle/Plan.h"
#include "lib/Format/MappedFile.h"
#include "lib/Format/Safetensors.h"
#include "lib/Support/Hash.h"
#include "lib/Support/JsonParse.h"
#include "runtime/exec/ParamStore.h"
#include "runtime/train/Data.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc::driver {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json; // written in a readable order
using namespace ckpt;

namespace {

//===----------------------------------------------------------------------===//
// The crash test hook
//===----------------------------------------------------------------------===//

/// MTC_TEST_CRASH_IN_CHECKPOINT=STAGE[@STEP]: exits at \p stage (of the
/// checkpoint of \p step, or of any step) the way a killed process would: no
/// destructors, no flushing, nothing cleaned up.
void crashPoint(const char *stage, int64_t step) {
  const char *env = std::getenv("MTC_TEST_CRASH_IN_CHECKPOINT");
  if (!env || !*env)
    return;
  std::string spec = env, name = spec;
  size_t at = spec.find('@');
  if (at != std::string::npos) {
    name = spec.substr(0, at);
    if (std::to_string(step) != spec.substr(at + 1))
      return;
  }
  if (name != stage)
    return;
  std::fprintf(stderr,
               "mtc: test hook MTC_TEST_CRASH_IN_CHECKPOINT=%s: exiting in the "
               "checkpoint of step %lld\n",
               env, static_cast<long long>(step));
  std::fflush(stderr);
  ::_exit(137);
}

//===----------------------------------------------------------------------===//
// Identities
//===----------------------------------------------------------------------===//

/// xxh64 of the parameter instances' names, dtypes and shapes, in order.
uint64_t paramsHash(const exec::ParamStore &store) {
  std::string text;
  for (const exec::ParamSlot &s : store.slots()) {
    text += s.name + ":f32:[";
    for (size_t i = 0; i < s.decl->shape.size(); ++i)
      text += (i ? "," : "") + std::to_string(s.decl->shape[i]);
    text += "];";
  }
  return xxh64(text.data(), text.size());
}

/// Size and xxh64 of a file.
struct FileSum {
  uint64_t bytes = 0, hash = 0;
};

Expected<FileSum> sumFile(const std::string &path) {
  Expected<MappedFile> f = MappedFile::open(path);
  if (!f)
    return f.status();
  return FileSum{f->size(), xxh64(f->data(), f->size())};
}

//===----------------------------------------------------------------------===//
// trainer_state.json
//===----------------------------------------------------------------------===//

/// The run's options; \p precision is the step plan's (fp32 without one),
/// which a resume without --precision takes.
ojson optionsJson(const TrainOptions &o, bundle::Precision precision) {
  return ojson{{"data", absolutePath(o.data)},
               {"steps", o.steps},
               {"batch", o.batch},
               {"seq", o.seq},
               {"micro_batches", o.microBatches},
               {"lr", o.lr},
               {"warmup", o.warmup},
               {"min_lr_ratio", o.minLrRatio},
               {"weight_decay", o.weightDecay},
               {"beta1", o.beta1},
               {"beta2", o.beta2},
               {"eps", o.eps},
               {"clip", o.clip},
               {"seed", o.seed},
               {"eval_every", o.evalEvery},
               {"eval_batches", o.evalBatches},
               {"val_fraction", o.valFraction},
               {"save_every", o.saveEvery},
               {"kernels", o.useKernels},
               {"data_format", o.dataFormat},
               {"grad_dtype", bundle::gradDTypeName(o.gradDtype)},
               {"precision", bundle::precisionName(precision)}};
}

/// A field error of trainer_state.json.
struct StateError {
  std::string message;
};

/// Typed access to trainer_state.json with messages naming the field.
class Fields {
public:
  Fields(const json &j, std::string where) : j(j), where(std::move(where)) {}

  const json &get(const char *key) const {
    if (!j.is_object() || !j.contains(key))
      throw StateError{"missing field '" + name(key) + "'"};
    return j[key];
  }
  Fields object(const char *key) const {
    const json &v = get(key);
    if (!v.is_object())
      throw StateError{"'" + name(key) + "' must be an object"};
    return Fields(v, name(key));
  }
  int64_t integer(const char *key) const {
    const json &v = get(key);
    if (!v.is_number_integer())
      throw StateError{"'" + name(key) + "' must be an integer"};
    return v.get<int64_t>();
  }
  uint64_t unsignedInt(const char *key) const {
    const json &v = get(key);
    if (!v.is_number_unsigned())
      throw StateError{"'" + name(key) + "' must be a non-negative integer"};
    return v.get<uint64_t>();
  }
  double number(const char *key) const {
    const json &v = get(key);
    if (!v.is_number())
      throw StateError{"'" + name(key) + "' must be a number"};
    return v.get<double>();
  }
  /// A number, or null for NaN.
  double numberOrNull(const char *key) const {
    const json &v = get(key);
    if (v.is_null())
      return std::nan("");
    return number(key);
  }
  std::string string(const char *key) const {
    const json &v = get(key);
    if (!v.is_string())
      throw StateError{"'" + name(key) + "' must be a string"};
    return v.get<std::string>();
  }
  bool boolean(const char *key) const {
    const json &v = get(key);
    if (!v.is_boolean())
      throw StateError{"'" + name(key) + "' must be true or false"};
    return v.get<bool>();
  }
  uint64_t hash(const char *key) const {
    uint64_t v;
    if (!parseHex64(string(key), v))
      throw StateError{"'" + name(key) + "' must be 16 hex digits"};
    return v;
  }
  const json &raw() const { return j; }

private:
  std::string name(const char *key) const {
    return where.empty() ? key : where + "." + key;
  }
  const json &j;
  std::string where;
};

TrainOptions parseOptions(const Fields &f) {
  TrainOptions o;
  o.data = f.string("data");
  o.steps = f.integer("steps");
  o.batch = f.integer("batch");
  o.seq = f.integer("seq");
  o.microBatches = f.integer("micro_batches");
  o.lr = f.number("lr");
  o.warmup = f.integer("warmup");
  o.minLrRatio = f.number("min_lr_ratio");
  o.weightDecay = f.number("weight_decay");
  o.beta1 = f.number("beta1");
  o.beta2 = f.number("beta2");
  o.eps = f.number("eps");
  o.clip = f.number("clip");
  o.seed = f.unsignedInt("seed");
  o.evalEvery = f.integer("eval_every");
  o.evalBatches = f.integer("eval_batches");
  o.valFraction = f.number("val_fraction");
  o.saveEvery = f.integer("save_every");
  o.useKernels = f.boolean("kernels");
  // Checkpoints written before --data-format existed: auto.
  if (f.raw().contains("data_format"))
    o.dataFormat = f.string("data_format");
  // Checkpoints written before the precision was recorded: unknown ("").
  if (f.raw().contains("precision")) {
    o.precision = f.string("precision");
    bundle::Precision p;
    if (!bundle::parsePrecision(o.precision, p))
      throw StateError{"'options.precision' must be \"fp32\" or \"bf16\""};
  }
  // Checkpoints written before --grad-dtype existed: fp32.
  if (f.raw().contains("grad_dtype")) {
    if (!bundle::parseGradDType(f.string("grad_dtype"), o.gradDtype))
      throw StateError{"'options.grad_dtype' must be \"fp32\" or \"bf16\""};
  }
  if (o.steps < 1 || o.batch < 1 || o.seq < 1 || o.microBatches < 1)
    throw StateError{"'options' has a step count, batch, seq or "
                     "micro-batch count below 1"};
  return o;
}

/// The files a checkpoint lists in trainer_state.json, in the order they are
/// checked.
const char *const kTensorFiles[] = {kBundle, kWeights, kMoments};

} // namespace

//===----------------------------------------------------------------------===//
// Data identity
//===----------------------------------------------------------------------===//

Expected<DataIdentity> identifyData(const train::TokenDataset &data) {
  DataIdentity id;
  id.path = absolutePath(data.path());
  id.format = train::tokenFileFormatName(data.format());
  id.tokens = data.numTokens();
  id.trainTokens = data.trainTokens();
  id.valTokens = data.valTokens();
  Expected<MappedFile> f = MappedFile::open(data.path());
  if (!f)
    return f.status();
  id.bytes = f->size();
  constexpr size_t kWhole = size_t(64) << 20, kBlock = size_t(1) << 20;
  constexpr int kBlocks = 16;
  if (f->size() <= kWhole) {
    id.fingerprint = xxh64(f->data(), f->size());
  } else {
    uint64_t sums[kBlocks + 1];
    for (int i = 0; i < kBlocks; ++i) {
      size_t off = (f->size() - kBlock) / (kBlocks - 1) * i;
      if (i == kBlocks - 1)
        off = f->size() - kBlock;
      sums[i] = xxh64(f->data() + off, kBlock);
    }
    sums[kBlocks] = f->size();
    id.fingerprint = xxh64(sums, sizeof(sums));
  }
  // A loss mask changes what is trained: it is part of the data's identity.
  if (data.hasMask()) {
    Expected<MappedFile> m = MappedFile::open(data.maskPath());
    if (!m)
      return m.status();
    uint64_t both[2] = {id.fingerprint, xxh64(m->data(), m->size())};
    id.fingerprint = xxh64(both, sizeof(both));
    id.format += " + loss mask";
  }
  return id;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

Status writeCheckpoint(const std::string &dirArg, const bundle::Bundle &b,
                       const exec::ParamStore &store,
                       const TrainerState &state) {
  std::string dir = trimSlashes(dirArg);
  std::string tmp = dir + ".tmp", bak = dir + ".bak";
  std::string parent = dirName(dir);
  int64_t step = state.step;
  if (Status s = checkCheckpointTarget(dir); !s.ok())
    return s;
  {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec)
      return Status::error("cannot create directory '" + parent +
                           "': " + ec.message());
  }
  // A DIR.tmp left by an interrupted write is never read: start afresh.
  if (Status s = removeTree(tmp); !s.ok())
    return s;
  if (::mkdir(tmp.c_str(), 0755) != 0)
    return Status::error("cannot create directory '" + tmp +
                         "': " + std::strerror(errno));

  if (Status s = writeText(tmp + "/" + kBundle, bundle::toJson(b)); !s.ok())
    return s;
  std::vector<TensorToWrite> weights, moments;
  for (const exec::ParamSlot &s : store.slots()) {
    std::vector<int64_t> shape(s.decl->shape.begin(), s.decl->shape.end());
    weights.push_back({s.name, TensorDType::F32, shape, s.value.data()});
    moments.push_back(
        {s.name + ".exp_avg", TensorDType::F32, shape, s.m.data()});
    moments.push_back(
        {s.name + ".exp_avg_sq", TensorDType::F32, shape, s.v.data()});
  }
  if (Status s = writeSafetensors(tmp + "/" + kWeights, weights,
                                  {{"format", "pt"}, {"producer", "mtc"}});
      !s.ok())
    return s;
  crashPoint("weights", step);
  if (Status s = writeSafetensors(tmp + "/" + kMoments, moments,
                                  {{"format", "pt"},
                                   {"producer", "mtc"},
                                   {"optimizer", "adamw"},
                                   {"step", std::to_string(step)}});
      !s.ok())
    return s;

  ojson files = ojson::object();
  for (const char *name : kTensorFiles) {
    Expected<FileSum> sum = sumFile(tmp + "/" + name);
    if (!sum)
      return sum.status();
    files[name] = {{"bytes", sum->bytes}, {"xxh64", hex64(sum->hash)}};
  }
  const TrainOptions &o = state.options;
  const DataIdentity &d = state.data;
  ojson j = {
      {"format", kFormat},
      {"version", kVersion},
      {"step", step},
      {"loss", state.loss},
      {"val_loss", state.valStep > 0 ? ojson(state.valLoss) : ojson(nullptr)},
      {"val_step", state.valStep},
      {"model",
       {{"name", b.model},
        {"parameters", store.totalParams()},
        {"tensors", store.slots().size()},
        {"params_xxh64", hex64(paramsHash(store))}}},
      {"optimizer",
       {{"name", "adamw"},
        {"step", step},
        {"moments", kMoments},
        {"names", "<param>.exp_avg, <param>.exp_avg_sq"}}},
      {"options", optionsJson(o, bundle::planPrecision(b))},
      {"data",
       {{"path", d.path},
        {"format", d.format},
        {"bytes", d.bytes},
        {"fingerprint", hex64(d.fingerprint)},
        {"tokens", d.tokens},
        {"train_tokens", d.trainTokens},
        {"val_tokens", d.valTokens},
        {"next_step", step + 1}}},
      {"rng",
       {{"generator", "philox4x32-10"},
        {"seed", o.seed},
        {"data_counter",
         "the windows of step t, micro-batch m, row r come from (seed, t - 1, "
         "m, r); no other generator state"},
        {"next_step", step + 1}}},
      {"files", files}};
  if (Status s = writeText(tmp + "/" + kState, j.dump(1) + "\n"); !s.ok())
    return s;
  if (Status s = syncDirectory(tmp); !s.ok())
    return s;
  crashPoint("files", step);

  // Swap. Invariant: DIR, or while DIR is missing DIR.bak, is complete.
  if (exists(dir)) {
    // DIR is complete, so an older DIR.bak is not needed.
    if (Status s = removeTree(bak); !s.ok())
      return s;
    if (Status s = renamePath(dir, bak); !s.ok())
      return s;
    if (Status s = syncDirectory(parent); !s.ok())
      return s;
    crashPoint("swap", step);
  }
  // (DIR missing and DIR.bak present: an earlier write stopped here; DIR.bak
  // stays until the new DIR is in place.)
  if (Status s = renamePath(tmp, dir); !s.ok())
    return s;
  if (Status s = syncDirectory(parent); !s.ok())
    return s;
  crashPoint("cleanup", step);
  return removeTree(bak);
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

Expected<std::string> resolveCheckpoint(const std::string &dirArg,
                                        std::string *note) {
  std::string dir = trimSlashes(dirArg);
  std::string bak = dir + ".bak";
  if (exists(dir)) {
    if (!isDirectory(dir))
      return Status::error("checkpoint '" + dir + "' is not a directory");
    if (!exists(dir + "/" + kState))
      return Status::error("'" + dir + "' is not a checkpoint: it has no " +
                           kState +
                           " (give a directory written by mtc train --out)");
    return dir;
  }
  if (isDirectory(bak) && exists(bak + "/" + kState)) {
    if (note)
      *note = "'" + dir + "' is missing; resuming from '" + bak +
              "', the checkpoint before the one whose write was interrupted";
    return bak;
  }
  return Status::error("checkpoint directory '" + dir + "' does not exist");
}

namespace {

/// Which directory \p dir is at this moment; all zero when it is gone.
struct DirStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t ctimeNs = 0;
  bool operator==(const DirStamp &o) const {
    return dev == o.dev && ino == o.ino && ctimeNs == o.ctimeNs;
  }
};

DirStamp stampOf(const std::string &dir) {
  struct stat st;
  DirStamp s;
  if (::stat(dir.c_str(), &st) == 0) {
    s.dev = st.st_dev;
    s.ino = st.st_ino;
    s.ctimeNs = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 +
                st.st_ctim.tv_nsec;
  }
  return s;
}

} // namespace

Status
readStableCheckpoint(const std::string &dir,
                     const std::function<Status(const std::string &)> &read) {
  constexpr int kAttempts = 50;
  Status last = Status::success();
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (attempt > 0)
      ::usleep(20000);
    Expected<std::string> resolved = resolveCheckpoint(dir);
    if (!resolved) {
      // DIR looked at before a rename and DIR.bak after the next one: a
      // replacement seen at the wrong moment resolves on a second look.
      if (attempt >= 2)
        return resolved.status();
      last = resolved.status();
      continue;
    }
    DirStamp before = stampOf(*resolved);
    last = read(*resolved);
    Expected<std::string> after = resolveCheckpoint(dir);
    if (after && *after == *resolved && stampOf(*resolved) == before)
      return last;
  }
  return Status::error("checkpoint '" + dir + "' kept being replaced while " +
                       "it was read (" + std::to_string(kAttempts) +
                       " tries); the last error: " +
                       (last.ok() ? std::string("none") : last.message()));
}

namespace {

/// trainer_state.json, parsed and checked.
struct ParsedState {
  TrainerState state;
  std::map<std::string, FileSum> files; ///< as recorded
};

Expected<ParsedState> parseState(const std::string &dir) {
  std::string path = dir + "/" + kState;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(path + ": cannot open: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  Expected<json> parsed = parseJson(ss.str(), path);
  if (!parsed)
    return parsed.status();
  const json &j = *parsed;
  try {
    Fields f(j, "");
    if (!j.is_object() || !j.contains("format") || j["format"] != json(kFormat))
      throw StateError{"not a resumable checkpoint (no \"format\": \"" +
                       std::string(kFormat) +
                       "\"; checkpoints of older mtc versions lack the "
                       "optimizer state)"};
    if (f.integer("version") != kVersion)
      throw StateError{
          "unsupported version " + std::to_string(f.integer("version")) +
          " (this mtc reads version " + std::to_string(kVersion) + ")"};
    ParsedState p;
    TrainerState &st = p.state;
    st.step = f.integer("step");
    if (st.step < 1)
      throw StateError{"'step' must be at least 1"};
    st.loss = f.numberOrNull("loss");
    st.valStep = f.integer("val_step");
    st.valLoss = f.numberOrNull("val_loss");
    st.options = parseOptions(f.object("options"));
    Fields d = f.object("data");
    st.data.path = d.string("path");
    st.data.format = d.string("format");
    st.data.bytes = d.unsignedInt("bytes");
    st.data.fingerprint = d.hash("fingerprint");
    st.data.tokens = d.unsignedInt("tokens");
    st.data.trainTokens = d.unsignedInt("train_tokens");
    st.data.valTokens = d.unsignedInt("val_tokens");
    if (d.integer("next_step") != st.step + 1)
      throw StateError{"'data.next_step' is not step + 1"};
    Fields files = f.object("files");
    for (const char *name : kTensorFiles) {
      Fields e = files.object(name);
      p.files[name] = FileSum{e.unsignedInt("bytes"), e.hash("xxh64")};
    }
    f.object("model").hash("params_xxh64");
    return p;
  } catch (const StateError &e) {
    return Status::error(path + ": " + e.message);
  }
}

/// Every file as trainer_state.json recorded it (written last, so these were
/// complete then): a truncated, extended or altered file is refused.
Status verifyFiles(const std::string &dir, const ParsedState &parsed) {
  for (const char *name : kTensorFiles) {
    std::string path = dir + "/" + name;
    const FileSum &recorded = parsed.files.at(name);
    if (!exists(path))
      return Status::error(path + ": missing (the checkpoint is incomplete)");
    Expected<FileSum> sum = sumFile(path);
    if (!sum)
      return sum.status();
    if (sum->bytes != recorded.bytes)
      return Status::error(path + ": " + std::to_string(sum->bytes) +
                           " bytes, but " + kState + " records " +
                           std::to_string(recorded.bytes) +
                           " (truncated or replaced)");
    if (sum->hash != recorded.hash)
      return Status::error(path + ": checksum mismatch (xxh64 " +
                           hex64(sum->hash) + ", " + kState + " records " +
                           hex64(recorded.hash) + "): the file is corrupt");
  }
  return Status::success();
}

} // namespace

Status verifyCheckpointFiles(const std::string &dir) {
  Expected<ParsedState> parsed = parseState(dir);
  if (!parsed)
    return parsed.status();
  return verifyFiles(dir, *parsed);
}

Expected<TrainerState> readTrainerState(const std::string &dir) {
  Expected<ParsedState> p = parseState(dir);
  if (!p)
    return p.status();
  return std::move(p->state);
}

namespace {

/// The config of \p saved (a checkpoint's model) against \p b's, entry by
/// entry; \p prefix starts the error.
Status compareConfig(const bundle::Bundle &saved, const bundle::Bundle &b,
                     const std::string &prefix) {
  for (const auto &[key, value] : saved.config) {
    auto it = b.config.find(key);
    if (it == b.config.end())
      return Status::error(prefix + "config entry '" + key +
                           "' is missing in the model");
    if (it->second != value)
      return Status::error(prefix + "config entry '" + key + "' is " +
                           showNumber(value) + " in the checkpoint, " +
                           showNumber(it->second) + " in the model");
  }
  for (const auto &[key, value] : b.config)
    if (!saved.config.count(key))
      return Status::error(prefix + "the model's config entry '" + key +
                           "' is not in the checkpoint's");
  return Status::success();
}

} // namespace

Expected<TrainerState> readCheckpoint(const std::string &dir,
                                      const bundle::Bundle &b,
                                      exec::ParamStore &store,
                                      std::vector<std::string> *notes,
                                      bool allowModelChange) {
  Expected<ParsedState> parsed = parseState(dir);
  if (!parsed)
    return parsed.status();
  if (Status s = verifyFiles(dir, *parsed); !s.ok())
    return s;
  uint64_t bundleHash = parsed->files[kBundle].hash;

  // The model: parameter instances and config as the checkpoint's.
  std::string prefix = "checkpoint '" + dir +
                       "' was written for another model than '" + b.model +
                       "': ";
  Expected<bundle::Bundle> saved = bundle::readFile(dir + "/" + kBundle);
  if (!saved)
    return saved.status().withPrefix(dir + "/" + kBundle);
  if (Status st = compareConfig(*saved, b, prefix); !st)
    return st;
  bool modelChanged = !saved->modelHash.empty() && !b.modelHash.empty() &&
                      saved->modelHash != b.modelHash;
  if (modelChanged && !allowModelChange)
    return Status::error(
        "checkpoint '" + dir + "' was trained by another model than '" +
        b.model +
        "': the parameters and config are the same but the computation "
        "differs (model hash " +
        b.modelHash + ", the checkpoint's " + saved->modelHash +
        "); resume with the checkpoint's own model (leave out the model "
        "argument) or pass --allow-model-change to continue with this one");

  // A run computes in one precision for its life: the fp32 state carries
  // over to another, but the losses are no longer an uninterrupted run's.
  const bundle::Precision then = bundle::planPrecision(*saved),
                          now = bundle::planPrecision(b);
  bool precisionChanged = then != now;
  if (precisionChanged && !allowModelChange)
    return Status::error("checkpoint '" + dir + "' was trained in " +
                         bundle::precisionName(then) + " (--precision " +
                         bundle::precisionName(then) +
                         ", its model.mtb) and this run computes "
                         "in " +
                         bundle::precisionName(now) +
                         "; resume with --precision " +
                         bundle::precisionName(then) +
                         " (what a resume without --precision takes), or pass "
                         "--allow-model-change to continue in " +
                         bundle::precisionName(now) +
                         " from the checkpoint's fp32 weights and AdamW state");

  Expected<SafetensorsFile> weights =
      SafetensorsFile::open(dir + "/" + kWeights);
  if (!weights)
    return Status::error("checkpoint '" + dir + "': " + weights.message());
  Expected<SafetensorsFile> moments =
      SafetensorsFile::open(dir + "/" + kMoments);
  if (!moments)
    return Status::error("checkpoint '" + dir + "': " + moments.message());
  auto find = [&](const SafetensorsFile &f, const std::string &name,
                  const exec::ParamSlot &slot) -> Expected<const TensorInfo *> {
    const TensorInfo *t = f.find(name);
    std::vector<int64_t> shape(slot.decl->shape.begin(),
                               slot.decl->shape.end());
    if (!t)
      return Status::error(prefix + baseName(f.path()) + " has no tensor '" +
                           name + "' (the model's " + formatTensorShape(shape) +
                           ")");
    if (t->shape != shape)
      return Status::error(prefix + "'" + name + "' is " +
                           formatTensorShape(t->shape) + " in " +
                           baseName(f.path()) + ", " +
                           formatTensorShape(shape) + " in the model");
    if (t->dtype != TensorDType::F32)
      return Status::error(dir + "/" + baseName(f.path()) + ": tensor '" +
                           name + "' is " + dtypeName(t->dtype) +
                           ", not F32 (resuming needs the exact fp32 state)");
    return t;
  };
  for (exec::ParamSlot &s : store.slots()) {
    const std::pair<const SafetensorsFile *, std::pair<std::string, float *>>
        parts[] = {{&*weights, {s.name, s.value.data()}},
                   {&*moments, {s.name + ".exp_avg", s.m.data()}},
                   {&*moments, {s.name + ".exp_avg_sq", s.v.data()}}};
    for (const auto &[file, target] : parts) {
      Expected<const TensorInfo *> t = find(*file, target.first, s);
      if (!t)
        return t.status();
      if (Status r =
              file->readAsF32(target.first, target.second, s.value.size());
          !r.ok())
        return Status::error("checkpoint '" + dir + "': " + r.message());
    }
  }
  auto extra = [&](const SafetensorsFile &f,
                   size_t expected) -> std::optional<std::string> {
    if (f.tensors().size() == expected)
      return std::nullopt;
    for (const TensorInfo &t : f.tensors()) {
      std::string name = t.name;
      if (&f == &*moments) {
        for (const char *suffix : {".exp_avg_sq", ".exp_avg"})
          if (name.size() > std::strlen(suffix) &&
              name.compare(name.size() - std::strlen(suffix), std::string::npos,
                           suffix) == 0) {
            name.resize(name.size() - std::strlen(suffix));
            break;
          }
      }
      if (!store.find(name))
        return prefix + baseName(f.path()) + " holds '" + t.name +
               "', which is not a parameter of the model";
    }
    return prefix + baseName(f.path()) + " holds " +
           std::to_string(f.tensors().size()) + " tensors, expected " +
           std::to_string(expected);
  };
  if (auto e = extra(*weights, store.slots().size()))
    return Status::error(*e);
  if (auto e = extra(*moments, 2 * store.slots().size()))
    return Status::error(*e);

  if (notes) {
    if (saved->model != b.model)
      notes->push_back("the checkpoint's model is named '" + saved->model +
                       "', this one '" + b.model +
                       "' (same parameters and config)");
    std::string text = bundle::toJson(b);
    if (precisionChanged)
      notes->push_back(std::string("the checkpoint was trained in ") +
                       bundle::precisionName(then) + "; the run continues in " +
                       bundle::precisionName(now) +
                       " (--allow-model-change) from its fp32 weights and "
                       "AdamW state, no longer identical to an uninterrupted "
                       "run");
    if (modelChanged)
      notes->push_back("the model's computation differs from the "
                       "checkpoint's (--allow-model-change): the run "
                       "continues with this model");
    else if (!precisionChanged && xxh64(text.data(), text.size()) != bundleHash)
      notes->push_back("the model's compiled functions differ from the "
                       "checkpoint's model.mtb (another compiler, --recompute "
                       "or --cpu?); losses may differ in the last bits from an "
                       "uninterrupted run");
  }
  return std::move(parsed->state);
}

} // namespace mtc::driver
