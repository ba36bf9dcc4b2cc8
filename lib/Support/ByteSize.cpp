//===- ByteSize.cpp - Byte sizes on the command line ------------*- C++ -*-===//
//
// Part of mtc. See ByteSize.h.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/ByteSize.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace mtc {

namespace {

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

} // namespace

Expected<int64_t> parseByteSize(const std::string &text) {
  std::string t = trim(text);
  size_t numEnd = 0;
  bool dot = false, digits = false;
  while (numEnd < t.size()) {
    char c = t[numEnd];
    if (c >= '0' && c <= '9')
      digits = true;
    else if (c == '.' && !dot)
      dot = true;
    else
      break;
    ++numEnd;
  }
  std::string number = t.substr(0, numEnd);
  std::string unit = trim(t.substr(numEnd));
  auto bad = [&](const std::string &why) -> Expected<int64_t> {
    return Status::error(
        "invalid size '" + text + "'" + why +
        " (expected bytes or a number with KiB, MiB, GiB or TiB, e.g. "
        "64MiB, 1.5GiB)");
  };
  if (!digits)
    return bad("");
  int64_t scale = 0;
  std::string u = unit;
  for (char &c : u)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (u.empty() || u == "b")
    scale = 1;
  else if (u == "k" || u == "kb" || u == "kib")
    scale = int64_t(1) << 10;
  else if (u == "m" || u == "mb" || u == "mib")
    scale = int64_t(1) << 20;
  else if (u == "g" || u == "gb" || u == "gib")
    scale = int64_t(1) << 30;
  else if (u == "t" || u == "tb" || u == "tib")
    scale = int64_t(1) << 40;
  else
    return bad(": unknown unit '" + unit + "'");
  if (number.size() > 30)
    return bad(": too long");
  double value = std::strtod(number.c_str(), nullptr);
  long double bytes = static_cast<long double>(value) * scale;
  if (!(bytes <= static_cast<long double>(int64_t(1) << 62)))
    return bad(": larger than 4 EiB");
  if (scale == 1 && dot)
    return bad(": a byte count is a whole number");
  return static_cast<int64_t>(std::floor(bytes));
}

Expected<int64_t> parseDeviceBudget(const std::string &text) {
  Expected<int64_t> bytes = parseByteSize(text);
  if (!bytes)
    return bytes;
  if (*bytes <= 0)
    return Status::error("device memory must be positive, got '" + text + "'");
  return bytes;
}

std::string formatBytes(int64_t bytes, const ByteFormat &format) {
  static const char *const units[] = {nullptr, "KiB", "MiB",
                                      "GiB",   "TiB", "PiB"};
  if (bytes < 0) {
    // The magnitude of INT64_MIN does not fit: one byte less is close enough.
    int64_t magnitude = bytes == INT64_MIN ? INT64_MAX : -bytes;
    return "-" + formatBytes(magnitude, format);
  }
  int maxUnit = std::min(std::max(format.maxUnit, 0), 5);
  int unit = std::min(std::max(format.minUnit, 0), maxUnit);
  while (unit < maxUnit && bytes >= (int64_t(1) << (10 * (unit + 1))))
    ++unit;
  if (unit == 0)
    return std::to_string(bytes) + " " + format.byteName;

  // Tenths of the unit, in integers so that every rounding is exact.
  __int128 size = static_cast<__int128>(1) << (10 * unit);
  __int128 b10 = static_cast<__int128>(bytes) * 10;
  __int128 tenths = b10 / size, rest = b10 % size;
  switch (format.rounding) {
  case ByteFormat::Rounding::Up:
    tenths += rest != 0;
    break;
  case ByteFormat::Rounding::HalfUp:
    tenths += 2 * rest >= size;
    break;
  case ByteFormat::Rounding::HalfEven:
    tenths += 2 * rest > size || (2 * rest == size && tenths % 2 == 1);
    break;
  }
  char buf[96];
  long long whole = static_cast<long long>(tenths / 10);
  long long tenth = static_cast<long long>(tenths % 10);
  if (format.dropWholeDecimal && tenth == 0)
    std::snprintf(buf, sizeof buf, "%lld %s", whole, units[unit]);
  else
    std::snprintf(buf, sizeof buf, "%lld.%lld %s", whole, tenth, units[unit]);
  std::string out = buf;
  if (format.appendExact)
    out += " (" + std::to_string(bytes) + " " + format.byteName + ")";
  return out;
}

} // namespace mtc
