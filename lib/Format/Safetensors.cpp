//===- Safetensors.cpp - Reading and writing .safetensors -----------------===//
//
// Part of mtc. The JSON header is parsed with nlohmann-json (header-only; used
// in this file only, with exceptions caught here: nothing escapes as an
// exception).
//
//===----------------------------------------------------------------------===//

#include "lib/Format/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_set>

namespace mtc {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

//===----------------------------------------------------------------------===//
// dtypes and conversions
//===----------------------------------------------------------------------===//

namespace {
struct TensorDTypeRow {
  TensorDType type;
  const char *name;
  size_t size;
};
constexpr TensorDTypeRow kTensorDTypes[] = {
    {TensorDType::BOOL, "BOOL", 1}, {TensorDType::U8, "U8", 1},
    {TensorDType::I8, "I8", 1},     {TensorDType::U16, "U16", 2},
    {TensorDType::I16, "I16", 2},   {TensorDType::F16, "F16", 2},
    {TensorDType::BF16, "BF16", 2}, {TensorDType::U32, "U32", 4},
    {TensorDType::I32, "I32", 4},   {TensorDType::F32, "F32", 4},
    {TensorDType::U64, "U64", 8},   {TensorDType::I64, "I64", 8},
    {TensorDType::F64, "F64", 8},
};
} // namespace

size_t dtypeSize(TensorDType t) {
  return kTensorDTypes[static_cast<int>(t)].size;
}
const char *dtypeName(TensorDType t) {
  return kTensorDTypes[static_cast<int>(t)].name;
}

bool parseTensorDType(std::string_view name, TensorDType &out) {
  for (const TensorDTypeRow &r : kTensorDTypes)
    if (name == r.name) {
      out = r.type;
      return true;
    }
  return false;
}

static inline uint32_t f32Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static inline float bitsF32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float bf16ToF32(uint16_t h) { return bitsF32(static_cast<uint32_t>(h) << 16); }

uint16_t f32ToBf16(float f) {
  uint32_t u = f32Bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep sign, force quiet
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // zero or subnormal: mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return bitsF32(f32Bits(v) | sign);
  }
  if (exp == 31)
    return bitsF32(sign | 0x7f800000u | (mant << 13));
  return bitsF32(sign | ((exp + 112u) << 23) | (mant << 13));
}

template <typename T>
static void convertInts(const uint8_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    dst[i] = static_cast<float>(v);
  }
}

void convertToF32(TensorDType dtype, const uint8_t *src, float *dst, size_t n) {
  if (n == 0)
    return;
  switch (dtype) {
  case TensorDType::F32:
    std::memcpy(dst, src, n * 4);
    return;
  case TensorDType::BF16:
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = bitsF32(static_cast<uint32_t>(h) << 16);
    }
    return;
  case TensorDType::F16:
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = f16ToF32(h);
    }
    return;
  case TensorDType::F64:
    return convertInts<double>(src, dst, n);
  case TensorDType::BOOL:
  case TensorDType::U8:
    return convertInts<uint8_t>(src, dst, n);
  case TensorDType::I8:
    return convertInts<int8_t>(src, dst, n);
  case TensorDType::U16:
    return convertInts<uint16_t>(src, dst, n);
  case TensorDType::I16:
    return convertInts<int16_t>(src, dst, n);
  case TensorDType::U32:
    return convertInts<uint32_t>(src, dst, n);
  case TensorDType::I32:
    return convertInts<int32_t>(src, dst, n);
  case TensorDType::U64:
    return convertInts<uint64_t>(src, dst, n);
  case TensorDType::I64:
    return convertInts<int64_t>(src, dst, n);
  }
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

std::string formatTensorShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

static std::string offsetsStr(uint64_t b, uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + "]";
}

/// Header length limit (as in the reference implementation).
static constexpr uint64_t kMaxHeader = 100u * 1000u * 1000u;

namespace {
/// Parses one tensor entry; returns an error message (without the file prefix)
/// or "".
std::string parseEntry(const std::string &name, const json &e,
                       uint64_t dataSize, TensorInfo &out) {
  std::string where = "tensor '" + name + "': ";
  if (!e.is_object())
    return where + "entry is not a JSON object";
  for (auto it = e.begin(); it != e.end(); ++it)
    if (it.key() != "dtype" && it.key() != "shape" &&
        it.key() != "data_offsets")
      return where + "unexpected key '" + it.key() + "'";
  auto dt = e.find("dtype");
  auto sh = e.find("shape");
  auto off = e.find("data_offsets");
  if (dt == e.end())
    return where + "missing 'dtype'";
  if (sh == e.end())
    return where + "missing 'shape'";
  if (off == e.end())
    return where + "missing 'data_offsets'";
  if (!dt->is_string())
    return where + "dtype is not a string";
  const std::string &dts = dt->get_ref<const std::string &>();
  if (!parseTensorDType(dts, out.dtype))
    return where + "unknown dtype '" + dts + "'";
  if (!sh->is_array())
    return where + "shape must be an array of non-negative integers";
  out.shape.clear();
  for (const json &d : *sh) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 62))
      return where + "shape must be an array of non-negative integers";
    out.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    return where + "data_offsets must be [begin, end] of non-negative integers";
  out.begin = (*off)[0].get<uint64_t>();
  out.end = (*off)[1].get<uint64_t>();
  if (out.begin > out.end)
    return where + "data_offsets " + offsetsStr(out.begin, out.end) +
           " end before they begin";
  if (out.end > dataSize)
    return where + "data_offsets " + offsetsStr(out.begin, out.end) +
           " run past the data section (" + std::to_string(dataSize) +
           " bytes)";
  uint64_t numel = 1;
  bool overflow = false;
  for (int64_t d : out.shape)
    overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel);
  uint64_t bytes = 0;
  overflow |= __builtin_mul_overflow(numel, dtypeSize(out.dtype), &bytes);
  if (overflow || bytes != out.end - out.begin)
    return where + "data_offsets " + offsetsStr(out.begin, out.end) +
           " do not match shape " + formatTensorShape(out.shape) + " of " +
           dts + " (" +
           (overflow ? std::string("too many") : std::to_string(bytes)) +
           " bytes)";
  out.name = name;
  return "";
}
} // namespace

namespace {

/// A SAX handler that records the first key seen twice in one object, and
/// the depth of that object (1: the header itself). Builds nothing.
struct DuplicateKeys {
  std::vector<std::unordered_set<std::string>> open;
  std::string duplicate;
  int depth = 0;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t &) {
    return true;
  }
  bool string(json::string_t &) { return true; }
  bool binary(json::binary_t &) { return true; }
  bool start_object(std::size_t) {
    open.emplace_back();
    return true;
  }
  bool key(json::string_t &k) {
    if (duplicate.empty() && !open.empty() && !open.back().insert(k).second) {
      duplicate = k;
      depth = static_cast<int>(open.size());
    }
    return true;
  }
  bool end_object() {
    if (!open.empty())
      open.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &e) {
    throw e;
  }
};

} // namespace

Expected<SafetensorsFile> SafetensorsFile::open(const std::string &path) {
  Expected<MappedFile> mf = MappedFile::open(path);
  if (!mf)
    return mf.status();
  const std::string &P = path;
  const uint8_t *base = mf->data();
  uint64_t size = mf->size();
  if (size < 8)
    return Status::error(P + ": file is truncated: " + std::to_string(size) +
                         " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | base[i];
  if (n > size - 8)
    return Status::error(P + ": header length " + std::to_string(n) +
                         " runs past the end of the file (" +
                         std::to_string(size) + " bytes)");
  if (n > kMaxHeader)
    return Status::error(P + ": header length " + std::to_string(n) +
                         " exceeds the limit of " + std::to_string(kMaxHeader) +
                         " bytes");
  if (n < 2)
    return Status::error(P + ": header is not a JSON object");
  uint64_t dataSize = size - 8 - n;

  // Parse, rejecting duplicate keys in any object: a SAX pass finds them
  // (nlohmann's parse with a callback takes time quadratic in the number of
  // keys: 11 s for 20,000 tensors), then the plain parse, linear too.
  DuplicateKeys dups;
  json header;
  try {
    const char *text = reinterpret_cast<const char *>(base + 8);
    json::sax_parse(text, text + n, &dups);
    if (dups.duplicate.empty())
      header = json::parse(text, text + n);
  } catch (const std::exception &e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at ..." -> the tail.
    size_t pos = what.find("] ");
    if (pos != std::string::npos)
      what = what.substr(pos + 2);
    return Status::error(P + ": header is not valid JSON: " + what);
  }
  if (!dups.duplicate.empty())
    return Status::error(
        P + (dups.depth <= 1
                 ? ": duplicate tensor name '" + dups.duplicate + "' in header"
                 : ": duplicate key '" + dups.duplicate + "' in header"));
  if (!header.is_object())
    return Status::error(P + ": header is not a JSON object");

  SafetensorsFile f;
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        if (!it.value().is_object())
          return Status::error(P + ": __metadata__ is not a JSON object");
        for (auto m = it.value().begin(); m != it.value().end(); ++m) {
          if (!m.value().is_string())
            return Status::error(P + ": __metadata__ value of '" + m.key() +
                                 "' is not a string");
          f.meta[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      TensorInfo info;
      std::string err = parseEntry(it.key(), it.value(), dataSize, info);
      if (!err.empty())
        return Status::error(P + ": " + err);
      f.infos.push_back(std::move(info));
    }
  } catch (const std::exception &e) {
    return Status::error(P + ": malformed header: " + e.what());
  }

  // Overlaps: sort by (begin, end); empty tensors overlap nothing.
  std::sort(f.infos.begin(), f.infos.end(),
            [](const TensorInfo &a, const TensorInfo &b) {
              if (a.begin != b.begin)
                return a.begin < b.begin;
              if (a.end != b.end)
                return a.end < b.end;
              return a.name < b.name;
            });
  const TensorInfo *prev = nullptr;
  for (const TensorInfo &t : f.infos) {
    if (t.begin == t.end)
      continue;
    if (prev && t.begin < prev->end)
      return Status::error(P + ": tensors '" + prev->name + "' " +
                           offsetsStr(prev->begin, prev->end) + " and '" +
                           t.name + "' " + offsetsStr(t.begin, t.end) +
                           " overlap");
    if (!prev || t.end > prev->end)
      prev = &t;
  }
  for (size_t i = 0; i < f.infos.size(); ++i)
    f.index.emplace(f.infos[i].name, i);
  f.file = std::move(mf.value());
  f.dataStart = f.file.data() + 8 + n;
  return Expected<SafetensorsFile>(std::move(f));
}

const TensorInfo *SafetensorsFile::find(std::string_view name) const {
  auto it = index.find(std::string(name));
  return it == index.end() ? nullptr : &infos[it->second];
}

Status SafetensorsFile::readAsF32(std::string_view name, float *dst,
                                  size_t n) const {
  const TensorInfo *t = find(name);
  if (!t)
    return Status::error(path() + ": no tensor '" + std::string(name) + "'");
  if (t->numel() != n)
    return Status::error(path() + ": tensor '" + t->name + "': has " +
                         std::to_string(t->numel()) + " elements (shape " +
                         formatTensorShape(t->shape) + "), destination has " +
                         std::to_string(n));
  convertToF32(t->dtype, rawData(*t), dst, n);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Sharded reading
//===----------------------------------------------------------------------===//

static bool isFile(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
static bool isDir(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
static bool endsWith(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Expected<SafetensorsModel> SafetensorsModel::open(const std::string &pathIn) {
  std::string path = pathIn;
  if (isDir(path)) {
    std::string single = path + "/model.safetensors";
    std::string idx = path + "/model.safetensors.index.json";
    if (isFile(single))
      path = single;
    else if (isFile(idx))
      path = idx;
    else
      return Status::error(pathIn +
                           ": directory holds neither model.safetensors nor "
                           "model.safetensors.index.json");
  }
  SafetensorsModel model;
  if (!endsWith(path, ".json")) {
    Expected<SafetensorsFile> f = SafetensorsFile::open(path);
    if (!f)
      return f.status();
    model.files.push_back(std::move(f.value()));
    for (const TensorInfo &t : model.files[0].tensors())
      model.where.emplace(t.name, 0);
    return Expected<SafetensorsModel>(std::move(model));
  }

  // Index file.
  Expected<MappedFile> mf = MappedFile::open(path);
  if (!mf)
    return mf.status();
  json idx;
  try {
    const char *text = reinterpret_cast<const char *>(mf->data());
    idx = json::parse(text, text + mf->size());
  } catch (const std::exception &e) {
    std::string what = e.what();
    size_t pos = what.find("] ");
    if (pos != std::string::npos)
      what = what.substr(pos + 2);
    return Status::error(path + ": not valid JSON: " + what);
  }
  if (!idx.is_object() || !idx.contains("weight_map") ||
      !idx["weight_map"].is_object())
    return Status::error(path + ": no 'weight_map' object");
  std::string dir = dirName(path);
  std::map<std::string, size_t> shardIndex;
  std::vector<std::pair<std::string, std::string>> mapping; // tensor, shard
  for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end();
       ++it) {
    if (!it.value().is_string())
      return Status::error(path + ": weight_map entry of '" + it.key() +
                           "' is not a file name");
    std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos)
      return Status::error(path + ": weight_map entry of '" + it.key() +
                           "' names '" + shard +
                           "', not a file beside the index");
    mapping.emplace_back(it.key(), shard);
    if (!shardIndex.count(shard)) {
      Expected<SafetensorsFile> f = SafetensorsFile::open(dir + "/" + shard);
      if (!f)
        return f.status();
      shardIndex[shard] = model.files.size();
      model.files.push_back(std::move(f.value()));
    }
  }
  // Every tensor of every shard is known once; mapped tensors are where the
  // index says.
  for (size_t i = 0; i < model.files.size(); ++i)
    for (const TensorInfo &t : model.files[i].tensors()) {
      auto [it, inserted] = model.where.emplace(t.name, i);
      if (!inserted)
        return Status::error(path + ": tensor '" + t.name + "' is in both " +
                             baseName(model.files[it->second].path()) +
                             " and " + baseName(model.files[i].path()));
    }
  for (const auto &[tensor, shard] : mapping) {
    size_t si = shardIndex[shard];
    if (!model.files[si].find(tensor))
      return Status::error(path + ": tensor '" + tensor + "' is mapped to " +
                           shard + ", which lacks it");
  }
  return Expected<SafetensorsModel>(std::move(model));
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  out.reserve(where.size());
  for (const auto &kv : where)
    out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

const SafetensorsFile *SafetensorsModel::shardOf(std::string_view name) const {
  auto it = where.find(std::string(name));
  return it == where.end() ? nullptr : &files[it->second];
}

const TensorInfo *SafetensorsModel::find(std::string_view name) const {
  const SafetensorsFile *f = shardOf(name);
  return f ? f->find(name) : nullptr;
}

Status SafetensorsModel::readAsF32(std::string_view name, float *dst,
                                   size_t n) const {
  const SafetensorsFile *f = shardOf(name);
  if (!f)
    return Status::error("checkpoint has no tensor '" + std::string(name) +
                         "'");
  return f->readAsF32(name, dst, n);
}

Expected<bool> tensorsEqual(const SafetensorsModel &m, std::string_view a,
                            std::string_view b) {
  const TensorInfo *ta = m.find(a), *tb = m.find(b);
  for (auto [t, name] : {std::pair{ta, a}, std::pair{tb, b}})
    if (!t)
      return Status::error("checkpoint has no tensor '" + std::string(name) +
                           "'");
  if (ta->shape != tb->shape)
    return false;
  const uint8_t *pa = m.shardOf(a)->rawData(*ta);
  const uint8_t *pb = m.shardOf(b)->rawData(*tb);
  const size_t sa = dtypeSize(ta->dtype), sb = dtypeSize(tb->dtype);
  if (ta->dtype == tb->dtype)
    return std::memcmp(pa, pb, ta->nbytes()) == 0;
  constexpr size_t kChunk = size_t(1) << 16;
  std::vector<float> fa(kChunk), fb(kChunk);
  for (uint64_t at = 0, n = ta->numel(); at < n; at += kChunk) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(kChunk, n - at));
    convertToF32(ta->dtype, pa + at * sa, fa.data(), k);
    convertToF32(tb->dtype, pb + at * sb, fb.data(), k);
    for (size_t i = 0; i < k; ++i)
      if (fa[i] != fb[i])
        return false;
  }
  return true;
}

const std::map<std::string, std::string> &SafetensorsModel::metadata() const {
  static const std::map<std::string, std::string> empty;
  return files.empty() ? empty : files[0].metadata();
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

static Status checkTensors(const std::string &path,
                           const std::vector<TensorToWrite> &tensors,
                           std::vector<uint64_t> &bytes) {
  std::set<std::string> seen;
  bytes.clear();
  for (const TensorToWrite &t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      return Status::error(path + ": invalid tensor name '" + t.name + "'");
    if (!seen.insert(t.name).second)
      return Status::error(path + ": duplicate tensor name '" + t.name + "'");
    if (t.dtype != TensorDType::F32 && t.dtype != TensorDType::BF16)
      return Status::error(path + ": tensor '" + t.name + "': cannot write " +
                           dtypeName(t.dtype) + " (only F32 and BF16)");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0)
        return Status::error(path + ": tensor '" + t.name +
                             "': negative dimension in shape " +
                             formatTensorShape(t.shape));
      numel *= static_cast<uint64_t>(d);
    }
    if (numel && !t.data)
      return Status::error(path + ": tensor '" + t.name + "': no data");
    bytes.push_back(numel * dtypeSize(t.dtype));
  }
  return Status::success();
}

static Status writeOne(const std::string &path,
                       const std::vector<const TensorToWrite *> &tensors,
                       const std::vector<uint64_t> &bytes,
                       const std::map<std::string, std::string> &metadata) {
  ojson header = ojson::object();
  if (!metadata.empty()) {
    ojson m = ojson::object();
    for (const auto &[k, v] : metadata)
      m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorToWrite &t = *tensors[i];
    ojson e = ojson::object();
    e["dtype"] = dtypeName(t.dtype);
    ojson shape = ojson::array();
    for (int64_t d : t.shape)
      shape.push_back(static_cast<uint64_t>(d));
    e["shape"] = std::move(shape);
    e["data_offsets"] = ojson::array({offset, offset + bytes[i]});
    header[t.name] = std::move(e);
    offset += bytes[i];
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const std::exception &e) {
    return Status::error(path + ": cannot encode header: " + e.what());
  }
  while (text.size() % 8)
    text.push_back(' ');
  uint8_t len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(n >> (8 * i));

  Expected<AtomicFileWriter> w = AtomicFileWriter::create(path);
  if (!w)
    return w.status();
  Status s = w->write(len, 8);
  if (s.ok())
    s = w->write(text.data(), text.size());
  std::vector<uint16_t> buf;
  constexpr size_t kChunk = 1u << 20;
  for (size_t i = 0; i < tensors.size() && s.ok(); ++i) {
    const TensorToWrite &t = *tensors[i];
    size_t numel = bytes[i] / dtypeSize(t.dtype);
    if (t.dtype == TensorDType::F32) {
      s = w->write(t.data, numel * 4);
      continue;
    }
    buf.resize(std::min(numel, kChunk));
    for (size_t b = 0; b < numel && s.ok(); b += kChunk) {
      size_t c = std::min(kChunk, numel - b);
      for (size_t j = 0; j < c; ++j)
        buf[j] = f32ToBf16(t.data[b + j]);
      s = w->write(buf.data(), c * 2);
    }
  }
  if (s.ok())
    s = w->commit();
  return s;
}

Status writeSafetensors(const std::string &path,
                        const std::vector<TensorToWrite> &tensors,
                        const std::map<std::string, std::string> &metadata) {
  std::vector<uint64_t> bytes;
  Status s = checkTensors(path, tensors, bytes);
  if (!s.ok())
    return s;
  std::vector<const TensorToWrite *> ptrs;
  for (const TensorToWrite &t : tensors)
    ptrs.push_back(&t);
  return writeOne(path, ptrs, bytes, metadata);
}

Status writeSafetensorsSharded(
    const std::string &dir, const std::vector<TensorToWrite> &tensors,
    uint64_t maxShardBytes, const std::map<std::string, std::string> &metadata,
    std::vector<std::string> *written) {
  std::vector<uint64_t> bytes;
  Status s = checkTensors(dir, tensors, bytes);
  if (!s.ok())
    return s;
  if (written)
    written->clear();
  uint64_t total = 0;
  for (uint64_t b : bytes)
    total += b;
  if (maxShardBytes == 0 || total <= maxShardBytes) {
    s = writeSafetensors(dir + "/model.safetensors", tensors, metadata);
    if (s.ok() && written)
      written->push_back("model.safetensors");
    return s;
  }
  // Group in order.
  std::vector<std::vector<size_t>> groups(1);
  uint64_t cur = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!groups.back().empty() && cur + bytes[i] > maxShardBytes) {
      groups.emplace_back();
      cur = 0;
    }
    groups.back().push_back(i);
    cur += bytes[i];
  }
  size_t nShards = groups.size();
  ojson weightMap = ojson::object();
  std::vector<std::string> names;
  for (size_t g = 0; g < nShards; ++g) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", g + 1,
                  nShards);
    std::vector<const TensorToWrite *> ptrs;
    std::vector<uint64_t> gb;
    for (size_t i : groups[g]) {
      ptrs.push_back(&tensors[i]);
      gb.push_back(bytes[i]);
      weightMap[tensors[i].name] = name;
    }
    s = writeOne(dir + "/" + name, ptrs, gb, metadata);
    if (!s.ok())
      return s;
    names.push_back(name);
  }
  ojson index = ojson::object();
  index["metadata"] = ojson::object({{"total_size", total}});
  index["weight_map"] = std::move(weightMap);
  std::string text = index.dump(2) + "\n";
  std::string idxPath = dir + "/model.safetensors.index.json";
  Expected<AtomicFileWriter> w = AtomicFileWriter::create(idxPath);
  if (!w)
    return w.status();
  s = w->write(text.data(), text.size());
  if (s.ok())
    s = w->commit();
  if (!s.ok())
    return s;
  names.push_back("model.safetensors.index.json");
  // A single-file checkpoint left from an earlier save would shadow the index
  // (readers prefer model.safetensors, as transformers does).
  std::string stale = dir + "/model.safetensors";
  if (isFile(stale))
    ::unlink(stale.c_str());
  if (written)
    *written = std::move(names);
  return Status::success();
}

} // namespace mtc
