//===- Safetensors.h - Reading and writing .safetensors ---------*- C++ -*-===//
//
// Part of mtc. The HuggingFace safetensors format:
//
//   [u64 little-endian N][N bytes of JSON header][data section]
//
// The header is a JSON object mapping tensor names to
// {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]} (offsets
// relative to the data section) plus an optional "__metadata__" string->string
// map.
//
// Reading memory-maps the file and validates the header strictly; every error
// is a value (Status / Expected) whose message names the file and the tensor:
//
//   model.safetensors: tensor 'w': data_offsets [0, 100] do not match shape
//   [8, 4] of F32 (128 bytes)
//
// Sharded checkpoints (model.safetensors.index.json + model-0000i-of-0000N
// .safetensors) are read through SafetensorsModel and written by
// writeSafetensorsSharded. Every write is atomic (path.tmp, fsync, rename,
// fsync of the directory). No LLVM, no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_FORMAT_SAFETENSORS_H
#define MTC_LIB_FORMAT_SAFETENSORS_H

#include "lib/Format/MappedFile.h"
#include "lib/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mtc {

/// The dtypes of the safetensors format (distinct from the language's
/// mtc::DType in lib/Support/Shape.h).
enum class TensorDType : uint8_t {
  BOOL,
  U8,
  I8,
  U16,
  I16,
  F16,
  BF16,
  U32,
  I32,
  F32,
  U64,
  I64,
  F64
};

/// Bytes per element.
size_t dtypeSize(TensorDType t);
/// "F32", "BF16", ...
const char *dtypeName(TensorDType t);
/// Parses a dtype name; false when unknown (F8 variants are not supported).
bool parseTensorDType(std::string_view name, TensorDType &out);

/// IEEE half / bfloat16 conversions. f32ToBf16 rounds to nearest, ties to even
/// (NaN stays NaN, quiet).
float bf16ToF32(uint16_t h);
uint16_t f32ToBf16(float f);
float f16ToF32(uint16_t h);

/// One tensor of a safetensors file. Offsets are relative to the data section.
struct TensorInfo {
  std::string name;
  TensorDType dtype = TensorDType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;

  uint64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

/// "[8, 4]".
std::string formatTensorShape(const std::vector<int64_t> &shape);

/// One .safetensors file, memory-mapped; move-only.
class SafetensorsFile {
public:
  /// Opens, maps and validates \p path. Errors name the file (its base name)
  /// and, where one is concerned, the tensor.
  static Expected<SafetensorsFile> open(const std::string &path);

  const std::string &path() const { return file.path(); }
  /// The tensors in order of their data offsets.
  const std::vector<TensorInfo> &tensors() const { return infos; }
  /// nullptr when absent.
  const TensorInfo *find(std::string_view name) const;
  const std::map<std::string, std::string> &metadata() const { return meta; }

  /// The raw little-endian bytes of \p t (t.nbytes() of them; unaligned).
  const uint8_t *rawData(const TensorInfo &t) const {
    return dataStart + t.begin;
  }

  /// Converts tensor \p name to fp32 into dst[0, n) straight from the mapping
  /// (no intermediate copy). \p n must equal the element count. Every dtype
  /// converts (integers by value); F32/BF16/F16 are the intended ones.
  Status readAsF32(std::string_view name, float *dst, size_t n) const;

private:
  SafetensorsFile() = default;
  MappedFile file;
  const uint8_t *dataStart = nullptr;
  std::vector<TensorInfo> infos;
  std::unordered_map<std::string, size_t> index;
  std::map<std::string, std::string> meta;
};

/// Converts \p n elements of \p dtype at \p src (unaligned, little-endian) to
/// fp32.
void convertToF32(TensorDType dtype, const uint8_t *src, float *dst, size_t n);

/// A whole checkpoint: one file, or the shards listed by an index file.
class SafetensorsModel {
public:
  /// \p path is a .safetensors file, a model.safetensors.index.json, or a
  /// directory holding either (the index wins when both exist). For an index,
  /// every shard in weight_map is opened and must hold the tensors mapped to
  /// it; a tensor present in two shards is an error.
  static Expected<SafetensorsModel> open(const std::string &path);

  /// All tensor names, sorted.
  std::vector<std::string> names() const;
  size_t size() const { return where.size(); }
  /// nullptr when absent.
  const TensorInfo *find(std::string_view name) const;
  /// The shard holding \p name (nullptr when absent).
  const SafetensorsFile *shardOf(std::string_view name) const;
  Status readAsF32(std::string_view name, float *dst, size_t n) const;
  const std::vector<SafetensorsFile> &shards() const { return files; }
  /// The __metadata__ of the first shard, or of the single file.
  const std::map<std::string, std::string> &metadata() const;

private:
  SafetensorsModel() = default;
  std::vector<SafetensorsFile> files;
  std::unordered_map<std::string, size_t> where;
};

/// Whether tensors \p a and \p b of \p m hold the same values (same shape,
/// equal as fp32, compared in chunks straight from the mapping). Errors: a
/// tensor missing.
Expected<bool> tensorsEqual(const SafetensorsModel &m, std::string_view a,
                            std::string_view b);

/// A tensor to write: fp32 source data converted to \p dtype (F32 or BF16).
struct TensorToWrite {
  std::string name;
  TensorDType dtype = TensorDType::F32;
  std::vector<int64_t> shape;
  const float *data = nullptr; ///< numel elements
};

/// Writes one .safetensors file atomically. Tensors are laid out contiguously
/// in the given order; the header is padded with spaces to a multiple of 8.
/// Errors: duplicate or empty names, dtype other than F32/BF16, negative dims,
/// null data for a non-empty tensor, I/O failures.
Status
writeSafetensors(const std::string &path,
                 const std::vector<TensorToWrite> &tensors,
                 const std::map<std::string, std::string> &metadata = {});

/// Writes a checkpoint into directory \p dir. When the tensors' bytes fit in
/// \p maxShardBytes (0 = unlimited) this writes dir/model.safetensors;
/// otherwise model-00001-of-0000N.safetensors ... (tensors kept in order, a
/// shard closes before the tensor that would overflow it; one tensor larger
/// than the limit gets a shard of its own) and model.safetensors.index.json,
/// written last. The written file names (relative to \p dir) are returned in \p
/// written.
Status
writeSafetensorsSharded(const std::string &dir,
                        const std::vector<TensorToWrite> &tensors,
                        uint64_t maxShardBytes,
                        const std::map<std::string, std::string> &metadata = {},
                        std::vector<std::string> *written = nullptr);

} // namespace mtc

#endif // MTC_LIB_FORMAT_SAFETENSORS_H
