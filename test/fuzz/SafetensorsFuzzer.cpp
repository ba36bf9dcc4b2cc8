//===- SafetensorsFuzzer.cpp - libFuzzer target for .safetensors -*- C++
//-*-===//
//
// Part of mtc. Feeds arbitrary bytes to SafetensorsFile::open and reads every
// listed tensor with readAsF32. The reader only takes a path (it memory-maps
// the file), so the input is written to one temporary file per process,
// created once with mkstemps and rewritten on every run.
//
// The mapping is not instrumented by AddressSanitizer (a read past its end
// inside the last page goes unnoticed), so every accepted tensor is also
// checked against an exactly sized heap copy of the input: its offsets must
// lie inside the data section, its byte count must match its shape and dtype,
// and readAsF32 must give the same bits as converting the heap copy.
//
//===----------------------------------------------------------------------===//

#include "lib/Format/Safetensors.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

std::string gPath;
int gFd = -1;

void removeTempFile() {
  if (!gPath.empty())
    ::unlink(gPath.c_str());
}

bool writeAll(int fd, const uint8_t *data, size_t size) {
  if (::ftruncate(fd, 0) != 0 || ::lseek(fd, 0, SEEK_SET) != 0)
    return false;
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n <= 0)
      return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void bug(const char *what) {
  std::fprintf(stderr, "safetensors fuzzer: %s\n", what);
  __builtin_trap();
}

/// Tensors larger than this are not converted (the inputs are small anyway).
constexpr uint64_t kMaxElements = 1u << 20;

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  const char *dir = std::getenv("TMPDIR");
  std::string tmpl = std::string(dir && *dir ? dir : "/tmp") +
                     "/mtc-safetensors-fuzz-XXXXXX.safetensors";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  gFd = ::mkstemps(buf.data(), static_cast<int>(sizeof(".safetensors") - 1));
  if (gFd < 0) {
    std::perror("mtc-safetensors-fuzzer: mkstemps");
    std::abort();
  }
  gPath = buf.data();
  std::atexit(removeTempFile);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!writeAll(gFd, data, size)) {
    std::perror("mtc-safetensors-fuzzer: write");
    std::abort();
  }
  // An exactly sized heap copy: ASan catches any reference read past it.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size ? size : 1]);
  if (size)
    std::memcpy(copy.get(), data, size);

  mtc::Expected<mtc::SafetensorsFile> f = mtc::SafetensorsFile::open(gPath);
  if (!f) {
    if (f.status().message().empty())
      bug("open failed without a message");
    return 0;
  }
  if (size < 8)
    bug("accepted a file shorter than its length prefix");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | data[i];
  if (n > size - 8)
    bug("accepted a header running past the end of the file");
  uint64_t dataSize = size - 8 - n;
  const uint8_t *section = copy.get() + 8 + n;

  const std::vector<mtc::TensorInfo> &tensors = f->tensors();
  std::vector<float> got, want;
  uint64_t prevEnd = 0;
  for (const mtc::TensorInfo &t : tensors) {
    if (t.begin > t.end || t.end > dataSize)
      bug("accepted data_offsets outside the data section");
    uint64_t numel = 1;
    bool overflow = false;
    for (int64_t d : t.shape) {
      if (d < 0)
        bug("accepted a negative dimension");
      overflow |=
          __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel);
    }
    uint64_t bytes = 0;
    overflow |= __builtin_mul_overflow(numel, mtc::dtypeSize(t.dtype), &bytes);
    if (overflow || bytes != t.nbytes() || numel != t.numel())
      bug("accepted data_offsets that do not match the shape");
    if (t.begin != t.end) {
      if (t.begin < prevEnd)
        bug("accepted overlapping tensors");
      prevEnd = t.end;
    }
    if (f->find(t.name) != &t)
      bug("find() does not return the listed tensor");
    if (t.nbytes() && std::memcmp(f->rawData(t), section + t.begin,
                                  static_cast<size_t>(t.nbytes())) != 0)
      bug("rawData() differs from the file's bytes");
    if (numel > kMaxElements)
      continue;
    got.assign(numel, 0.0f);
    want.assign(numel, 0.0f);
    mtc::Status st = f->readAsF32(t.name, got.data(), numel);
    if (!st)
      bug("readAsF32 failed on a listed tensor");
    mtc::convertToF32(t.dtype, section + t.begin, want.data(), numel);
    if (numel && std::memcmp(got.data(), want.data(), numel * 4) != 0)
      bug("readAsF32 differs from converting the file's bytes");
    // A wrong element count is an error, not a write past dst.
    std::vector<float> small(numel + 1);
    if (f->readAsF32(t.name, small.data(), numel + 1))
      bug("readAsF32 accepted a wrong element count");
  }
  if (f->readAsF32("\x01no such tensor\x01", nullptr, 0))
    bug("readAsF32 accepted an unknown tensor");
  return 0;
}
