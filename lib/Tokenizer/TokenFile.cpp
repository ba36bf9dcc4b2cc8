//===- TokenFile.cpp - llm.c token files ----------------------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/TokenFile.h"

#include "lib/Format/MappedFile.h"

#include <cstring>

namespace mtc::tok {

Status writeTokenFile(const std::string &path, const std::vector<uint32_t> &ids,
                      uint32_t vocabSize, int *version) {
  if (ids.size() > static_cast<size_t>(INT32_MAX))
    return Status::error(path + ": " + std::to_string(ids.size()) +
                         " tokens do not fit the llm.c header (at most " +
                         std::to_string(INT32_MAX) + ")");
  bool wide = vocabSize > 65536;
  for (uint32_t id : ids)
    wide = wide || id > 0xFFFF;
  int32_t header[kTokenFileHeaderInts] = {};
  header[0] = kTokenFileMagic;
  header[1] = wide ? 2 : 1;
  header[2] = static_cast<int32_t>(ids.size());
  if (version)
    *version = header[1];
  Expected<AtomicFileWriter> w = AtomicFileWriter::create(path);
  if (!w)
    return w.status();
  if (Status s = w->write(header, sizeof header); !s)
    return s;
  if (wide) {
    if (Status s = w->write(ids.data(), ids.size() * 4); !s)
      return s;
  } else {
    std::vector<uint16_t> narrow(ids.begin(), ids.end());
    if (Status s = w->write(narrow.data(), narrow.size() * 2); !s)
      return s;
  }
  return w->commit();
}

Expected<std::vector<uint32_t>> readTokenFile(const std::string &path) {
  Expected<MappedFile> mf = MappedFile::open(path);
  if (!mf)
    return mf.status();
  const uint8_t *p = mf->data();
  size_t size = mf->size();
  constexpr size_t kHeader = kTokenFileHeaderInts * 4;
  int32_t head[3] = {};
  if (size >= 12)
    std::memcpy(head, p, 12);
  if (size < 4 || head[0] != kTokenFileMagic)
    return Status::error(path + ": not an llm.c token file (no magic " +
                         std::to_string(kTokenFileMagic) + ")");
  if (size < kHeader)
    return Status::error(path + ": llm.c header is truncated (" +
                         std::to_string(size) + " bytes, the header is " +
                         std::to_string(kHeader) + ")");
  if (head[1] != 1 && head[1] != 2)
    return Status::error(path + ": unsupported llm.c version " +
                         std::to_string(head[1]) +
                         " (1: uint16 tokens, 2: uint32 tokens)");
  size_t width = head[1] == 1 ? 2 : 4;
  size_t body = size - kHeader;
  if (body % width || head[2] < 0 ||
      static_cast<size_t>(head[2]) != body / width)
    return Status::error(path + ": header says " + std::to_string(head[2]) +
                         " tokens but the file holds " + std::to_string(body) +
                         " bytes of " + std::to_string(width) + "-byte tokens");
  std::vector<uint32_t> ids(body / width);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (width == 2) {
      uint16_t v;
      std::memcpy(&v, p + kHeader + 2 * i, 2);
      ids[i] = v;
    } else {
      std::memcpy(&ids[i], p + kHeader + 4 * i, 4);
    }
  }
  return ids;
}

std::string lossMaskPath(const std::string &tokenPath) {
  return tokenPath + ".mask";
}

Status writeLossMask(const std::string &path,
                     const std::vector<uint8_t> &mask) {
  uint8_t header[kLossMaskHeaderBytes] = {};
  int32_t magic = kLossMaskMagic, version = 1;
  int64_t count = static_cast<int64_t>(mask.size());
  std::memcpy(header, &magic, 4);
  std::memcpy(header + 4, &version, 4);
  std::memcpy(header + 8, &count, 8);
  Expected<AtomicFileWriter> w = AtomicFileWriter::create(path);
  if (!w)
    return w.status();
  if (Status s = w->write(header, sizeof header); !s)
    return s;
  if (Status s = w->write(mask.data(), mask.size()); !s)
    return s;
  return w->commit();
}

Expected<std::vector<uint8_t>> readLossMask(const std::string &path) {
  Expected<MappedFile> mf = MappedFile::open(path);
  if (!mf)
    return mf.status();
  const uint8_t *p = mf->data();
  size_t size = mf->size();
  int32_t magic = 0, version = 0;
  int64_t count = -1;
  if (size >= 4)
    std::memcpy(&magic, p, 4);
  if (magic != kLossMaskMagic)
    return Status::error(path + ": not a loss mask (no magic 'MASK')");
  if (size < kLossMaskHeaderBytes)
    return Status::error(path + ": loss mask header is truncated");
  std::memcpy(&version, p + 4, 4);
  std::memcpy(&count, p + 8, 8);
  if (version != 1)
    return Status::error(path + ": unsupported loss mask version " +
                         std::to_string(version) + " (1)");
  size_t body = size - kLossMaskHeaderBytes;
  if (count < 0 || static_cast<uint64_t>(count) != body)
    return Status::error(path + ": header says " + std::to_string(count) +
                         " tokens but the file holds " + std::to_string(body));
  std::vector<uint8_t> mask(p + kLossMaskHeaderBytes, p + size);
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i] > 1)
      return Status::error(path + ": byte " + std::to_string(mask[i]) +
                           " at token " + std::to_string(i) +
                           " is neither 0 (masked) nor 1 (trained)");
  return mask;
}

} // namespace mtc::tok
