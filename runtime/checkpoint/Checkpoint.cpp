//===- Checkpoint.cpp - Full-state checkpoints and exact resume -*- C++ -*-===//
//
// Part of mtc. See Checkpoint.h for the files and the atomic protocol.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"

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
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc::driver {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json; // written in a readable order

namespace {

constexpr const char *kFormat = "mtc-checkpoint";
constexpr int kVersion = 1;
constexpr const char *kState = "trainer_state.json";
constexpr const char *kBundle = "model.mtb";
constexpr const char *kWeights = "model.safetensors";
constexpr const char *kMoments = "optimizer.safetensors";

//===----------------------------------------------------------------------===//
// Small file helpers
//===----------------------------------------------------------------------===//

bool exists(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// fsync of a directory (after renames in it); filesystems that cannot
/// (EINVAL) are fine.
Status syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(dir + ": cannot open: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0 && e != EINVAL)
    return Status::error(dir + ": fsync failed: " + std::strerror(e));
  return Status::success();
}

Status removeTree(const std::string &path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec)
    return Status::error(path + ": cannot remove: " + ec.message());
  return Status::success();
}

Status renamePath(const std::string &from, const std::string &to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    return Status::error("cannot rename '" + from + "' to '" + to +
                         "': " + std::strerror(errno));
  return Status::success();
}

Status writeText(const std::string &path, const std::string &text) {
  Expected<AtomicFileWriter> w = AtomicFileWriter::create(path);
  if (!w)
    return w.status();
  Status s = w->write(text.data(), text.size());
  if (s.ok())
    s = w->commit();
  return s;
}

/// \p path made absolute (so that --resume from another directory finds the
/// data file the checkpoint records).
std::string absolutePath(const std::string &path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

/// The path without trailing slashes ("ckpt/" -> "ckpt"), so that DIR.tmp and
/// DIR.bak are siblings of DIR.
std::string trimSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  return dir;
}

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
               {"grad_dtype", o.gradDtype},
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
    o.gradDtype = f.string("grad_dtype");
    if (o.gradDtype != "fp32" && o.gradDtype != "bf16")
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

/// "a.b.c" -> the value of the first differing option for messages.
std::string showNumber(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  // Shortest form that reads back (1e-3, not 0.0010000000000000000208).
  for (int p = 1; p <= 17; ++p) {
    std::ostringstream t;
    t.precision(p);
    t << v;
    if (std::strtod(t.str().c_str(), nullptr) == v)
      return t.str();
  }
  return os.str();
}

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
  for (const auto &[key, value] : saved->config) {
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
    if (!saved->config.count(key))
      return Status::error(prefix + "the model's config entry '" + key +
                           "' is not in the checkpoint's");
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

//===----------------------------------------------------------------------===//
// Resume checks
//===----------------------------------------------------------------------===//

Status checkResume(const TrainerState &ck, const std::string &dir,
                   const TrainOptions &opts, const DataIdentity &data,
                   std::vector<std::string> &notes) {
  const TrainOptions &c = ck.options;
  std::string where = " (" + dir + "/" + kState + ")";
  auto mismatch = [&](const char *flag, const std::string &now,
                      const std::string &then) {
    return Status::error(
        std::string(flag) + " " + now + " differs from the checkpoint's " +
        then + where +
        ": --batch, --seq, --micro-batches, --seed and --val-fraction must "
        "match to continue the run exactly (leave them out to use the "
        "checkpoint's; start a new run to change them)");
  };
  // Integers compared and shown exactly (a seed takes all 64 bits).
  const std::tuple<const char *, uint64_t, uint64_t> exact[] = {
      {"--batch", uint64_t(opts.batch), uint64_t(c.batch)},
      {"--seq", uint64_t(opts.seq), uint64_t(c.seq)},
      {"--micro-batches", uint64_t(opts.microBatches),
       uint64_t(c.microBatches)},
      {"--seed", opts.seed, c.seed}};
  for (const auto &[flag, now, then] : exact)
    if (now != then)
      return mismatch(flag, std::to_string(now), std::to_string(then));
  if (opts.valFraction != c.valFraction)
    return mismatch("--val-fraction", showNumber(opts.valFraction),
                    showNumber(c.valFraction));

  if (data.bytes != ck.data.bytes || data.fingerprint != ck.data.fingerprint)
    return Status::error(
        "data file '" + data.path + "' (" + std::to_string(data.bytes) +
        " bytes, fingerprint " + hex64(data.fingerprint) +
        ") is not the one checkpoint '" + dir + "' trained on ('" +
        ck.data.path + "', " + std::to_string(ck.data.bytes) +
        " bytes, fingerprint " + hex64(ck.data.fingerprint) +
        "); resuming needs the same tokens");
  if (data.path != ck.data.path)
    notes.push_back("data file '" + data.path + "' has the bytes of '" +
                    ck.data.path + "', which the checkpoint trained on");

  if (opts.steps < ck.step)
    return Status::error("--steps " + std::to_string(opts.steps) +
                         " is below the checkpoint's step " +
                         std::to_string(ck.step) + where +
                         " (--steps is the total, not the steps to add)");
  std::string diverges =
      ": the run continues with it, no longer identical to an uninterrupted "
      "run";
  if (opts.steps != c.steps)
    notes.push_back("--steps " + std::to_string(opts.steps) +
                    " (the checkpoint's run: " + std::to_string(c.steps) +
                    "): the learning-rate schedule now ends at step " +
                    std::to_string(opts.steps));
  const std::tuple<const char *, double, double> free[] = {
      {"--lr", opts.lr, c.lr},
      {"--warmup", double(opts.warmup), double(c.warmup)},
      {"--min-lr-ratio", opts.minLrRatio, c.minLrRatio},
      {"--weight-decay", opts.weightDecay, c.weightDecay},
      {"--beta1", opts.beta1, c.beta1},
      {"--beta2", opts.beta2, c.beta2},
      {"--clip", opts.clip, c.clip}};
  for (const auto &[flag, now, then] : free)
    if (now != then)
      notes.push_back(std::string(flag) + " " + showNumber(now) +
                      " (checkpoint: " + showNumber(then) + ")" + diverges);
  if (opts.useKernels != c.useKernels)
    notes.push_back(std::string("--kernels ") +
                    (opts.useKernels ? "on" : "off") +
                    " (checkpoint: " + (c.useKernels ? "on" : "off") +
                    "): losses may differ in the last bits from an "
                    "uninterrupted run");
  if (opts.gradDtype != c.gradDtype)
    notes.push_back("--grad-dtype " + opts.gradDtype +
                    " (checkpoint: " + c.gradDtype + ")" + diverges);
  if (opts.eps != c.eps)
    notes.push_back("AdamW eps " + showNumber(opts.eps) +
                    " (checkpoint: " + showNumber(c.eps) + ")" + diverges);
  return Status::success();
}

void inheritOptions(const TrainOptions &recorded,
                    const std::set<std::string> &given, TrainOptions &opts) {
  auto take = [&](const char *flag, auto &field, const auto &value) {
    if (!given.count(flag))
      field = value;
  };
  take("--data", opts.data, recorded.data);
  take("--data-format", opts.dataFormat, recorded.dataFormat);
  take("--steps", opts.steps, recorded.steps);
  take("--batch", opts.batch, recorded.batch);
  take("--seq", opts.seq, recorded.seq);
  take("--micro-batches", opts.microBatches, recorded.microBatches);
  take("--lr", opts.lr, recorded.lr);
  take("--warmup", opts.warmup, recorded.warmup);
  take("--min-lr-ratio", opts.minLrRatio, recorded.minLrRatio);
  take("--weight-decay", opts.weightDecay, recorded.weightDecay);
  take("--beta1", opts.beta1, recorded.beta1);
  take("--beta2", opts.beta2, recorded.beta2);
  take("--clip", opts.clip, recorded.clip);
  take("--grad-dtype", opts.gradDtype, recorded.gradDtype);
  take("--seed", opts.seed, recorded.seed);
  take("--eval-every", opts.evalEvery, recorded.evalEvery);
  take("--eval-batches", opts.evalBatches, recorded.evalBatches);
  take("--val-fraction", opts.valFraction, recorded.valFraction);
  take("--save-every", opts.saveEvery, recorded.saveEvery);
  opts.eps = recorded.eps; // no flag
}

Status checkCheckpointTarget(const std::string &dirArg) {
  std::string dir = trimSlashes(dirArg);
  if (!exists(dir))
    return Status::success();
  if (!isDirectory(dir))
    return Status::error("--out '" + dir + "' exists and is not a directory");
  if (exists(dir + "/" + kState))
    return Status::success();
  std::error_code ec;
  if (fs::is_empty(dir, ec) && !ec)
    return Status::success();
  return Status::error("--out '" + dir +
                       "' is a directory that holds no checkpoint (no " +
                       kState +
                       "); a checkpoint replaces its whole directory, so "
                       "give a new or empty one");
}

namespace {

/// \p dir with a symlink at its end followed (repeatedly): checkpoints are
/// written into the directory a symlink names, never over the link.
Expected<std::string> followSymlinks(std::string dir) {
  for (int depth = 0; depth < 40; ++depth) {
    struct stat st;
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
      return dir;
    std::error_code ec;
    fs::path target = fs::read_symlink(dir, ec);
    if (ec)
      return Status::error("--out '" + dir +
                           "': cannot read the symlink: " + ec.message());
    if (target.is_relative())
      target = fs::path(dir).parent_path() / target;
    dir = trimSlashes(target.lexically_normal().string());
  }
  return Status::error("--out '" + dir + "': too many levels of symlinks");
}

/// The pid written in lock file \p fd ("" if none).
std::string lockHolder(int fd) {
  char buf[32] = {0};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' '))
    pid.pop_back();
  return pid;
}

/// \p outDir spelled one way, so that every spelling of a directory takes
/// the same lock ("ck/.", "./ck/" and "ck" are "ck"); an error for a path
/// that names the current directory or one above it, which a checkpoint
/// cannot replace ("." would be renamed away under the process).
Expected<std::string> normalizeOutDir(const std::string &outDir) {
  std::string dir = trimSlashes(fs::path(outDir).lexically_normal().string());
  fs::path last = fs::path(dir).filename();
  std::error_code ec;
  fs::path here = fs::current_path(ec);
  fs::path full = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  bool aboveHere = false;
  if (!ec && !here.empty()) {
    // Whether `full` is the current directory or one of its ancestors.
    auto h = here.begin();
    aboveHere = true;
    for (auto f = full.begin(); f != full.end(); ++f, ++h)
      if (*f != "" && (h == here.end() || *f != *h)) {
        aboveHere = false;
        break;
      }
  }
  if (dir == "." || dir == ".." || dir == "/" || last == ".." || aboveHere)
    return Status::error("--out '" + outDir +
                         "' is the current directory or one above it; every "
                         "checkpoint replaces its whole directory, so give "
                         "one of its own (e.g. --out ./checkpoint)");
  return dir;
}

} // namespace

Expected<CheckpointLock> CheckpointLock::acquire(const std::string &outDir) {
  Expected<std::string> normal = normalizeOutDir(outDir);
  if (!normal)
    return normal.status();
  Expected<std::string> dir = followSymlinks(*normal);
  if (!dir)
    return dir.status();
  if (Status s = checkCheckpointTarget(*dir); !s.ok())
    return s;
  std::string shown = "--out '" + outDir + "'";
  std::string parent = fs::path(*dir).parent_path().string();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec)
      return Status::error(shown + ": cannot create directory '" + parent +
                           "': " + ec.message());
  }
  CheckpointLock lock;
  lock.resolved = *dir;
  lock.lockPath = *dir + ".lock";
  // The lock file may be removed by its holder between our open() and
  // flock(): then the lock is on a file nobody else will find; retry.
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::open(lock.lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      return Status::error(shown + ": cannot create the lock file '" +
                           lock.lockPath + "': " + std::strerror(errno) +
                           " (checkpoints are written beside it, so its "
                           "directory must be writable)");
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int e = errno;
      std::string pid = lockHolder(fd);
      ::close(fd);
      if (e == EWOULDBLOCK)
        return Status::error(
            shown + " is being written by another mtc train (" +
            (pid.empty() ? std::string("pid unknown") : "pid " + pid) +
            ", holding '" + lock.lockPath +
            "'); wait for it to finish or give another --out");
      return Status::error(shown + ": cannot lock '" + lock.lockPath +
                           "': " + std::strerror(e));
    }
    struct stat held, now;
    if (::fstat(fd, &held) == 0 && ::stat(lock.lockPath.c_str(), &now) == 0 &&
        held.st_dev == now.st_dev && held.st_ino == now.st_ino) {
      std::string pid = std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) !=
                                         static_cast<ssize_t>(pid.size())) {
        int e = errno;
        ::close(fd);
        return Status::error(shown + ": cannot write the lock file '" +
                             lock.lockPath + "': " + std::strerror(e));
      }
      lock.fd = fd;
      return Expected<CheckpointLock>(std::move(lock));
    }
    ::close(fd);
  }
  return Status::error(shown + ": cannot lock '" + lock.lockPath +
                       "': it keeps being replaced");
}

CheckpointLock::CheckpointLock(CheckpointLock &&other) noexcept
    : fd(other.fd), resolved(std::move(other.resolved)),
      lockPath(std::move(other.lockPath)) {
  other.fd = -1;
}

CheckpointLock &CheckpointLock::operator=(CheckpointLock &&other) noexcept {
  if (this != &other) {
    release();
    fd = other.fd;
    resolved = std::move(other.resolved);
    lockPath = std::move(other.lockPath);
    other.fd = -1;
  }
  return *this;
}

CheckpointLock::~CheckpointLock() { release(); }

void CheckpointLock::release() {
  if (fd < 0)
    return;
  // Removed while still held, so that no other process can take a lock on
  // this file and then lose it to a fresh one.
  ::unlink(lockPath.c_str());
  ::close(fd);
  fd = -1;
}

Status trimMetrics(const std::string &path, int64_t step) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::success();
  std::string line, kept;
  bool dropped = false;
  while (std::getline(in, line)) {
    if (in.eof()) {
      // The last line has no newline: it was cut short while being written.
      dropped = true;
      break;
    }
    // A line that is not JSON (or holds a number past a double) is kept.
    Expected<json> parsed = parseJson(line, path);
    const json r = parsed ? std::move(*parsed) : json();
    if (r.is_object() && r.contains("step") && r["step"].is_number_integer() &&
        r["step"].get<int64_t>() > step) {
      dropped = true;
      continue;
    }
    kept += line + "\n";
  }
  if (!dropped)
    return Status::success();
  return writeText(path, kept);
}

} // namespace mtc::driver
