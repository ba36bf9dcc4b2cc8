//===- SafetensorsTest.cpp - Unit tests of lib/Format/Safetensors ---------===//
//
// Part of mtc. Round trips (single file and sharded), bf16/f16 conversion, and
// every corruption: each gives its own message and never crashes.
//
//===----------------------------------------------------------------------===//

#include "lib/Format/Safetensors.h"

#include <gtest/gtest.h>

#include <chrono>

#include <cstdlib>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace mtc;

namespace {

/// A new, empty directory: mkdtemp, so a directory left behind by an earlier
/// process with the same pid can never be reused.
std::string tempDir() {
  std::string d = ::testing::TempDir() + "/mtc-st-XXXXXX";
  if (!::mkdtemp(d.data()))
    ADD_FAILURE() << "mkdtemp " << d << " failed";
  return d;
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream o(path, std::ios::binary);
  o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A file with header \p json (unpadded) and \p dataBytes zero bytes.
std::string makeFile(const std::string &json, size_t dataBytes,
                     int64_t headerLenOverride = -1) {
  uint64_t n = headerLenOverride >= 0 ? static_cast<uint64_t>(headerLenOverride)
                                      : json.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += json;
  out.append(dataBytes, '\0');
  return out;
}

std::string openError(const std::string &contents) {
  std::string path = tempDir() + "/model.safetensors";
  writeBytes(path, contents);
  Expected<SafetensorsFile> f = SafetensorsFile::open(path);
  EXPECT_FALSE(f.ok());
  if (f.ok())
    return "";
  // Messages start with the path as given.
  EXPECT_EQ(f.message().rfind(path + ": ", 0), 0u) << f.message();
  return f.message().substr(path.size() + 2);
}

TEST(Safetensors, DTypes) {
  TensorDType t;
  ASSERT_TRUE(parseTensorDType("BF16", t));
  EXPECT_EQ(t, TensorDType::BF16);
  EXPECT_EQ(dtypeSize(t), 2u);
  ASSERT_TRUE(parseTensorDType("I64", t));
  EXPECT_EQ(dtypeSize(t), 8u);
  EXPECT_STREQ(dtypeName(TensorDType::F32), "F32");
  EXPECT_FALSE(parseTensorDType("F33", t));
  EXPECT_FALSE(parseTensorDType("f32", t));
}

TEST(Safetensors, Bf16RoundToNearestEven) {
  EXPECT_EQ(f32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(f32ToBf16(-2.0f), 0xc000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(f32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(f32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // Just above halfway rounds up.
  EXPECT_EQ(f32ToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
            0x3f81);
  EXPECT_EQ(f32ToBf16(INFINITY), 0x7f80);
  uint16_t nan = f32ToBf16(NAN);
  EXPECT_TRUE(std::isnan(bf16ToF32(nan)));
  // Largest finite float rounds to infinity.
  EXPECT_EQ(f32ToBf16(3.4028235e38f), 0x7f80);
  EXPECT_EQ(bf16ToF32(0x3fc0), 1.5f);
}

TEST(Safetensors, F16ToF32) {
  EXPECT_EQ(f16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(f16ToF32(0xc000), -2.0f);
  EXPECT_EQ(f16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(f16ToF32(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_EQ(f16ToF32(0x0400), std::ldexp(1.0f, -14)); // smallest normal
  EXPECT_TRUE(std::isinf(f16ToF32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16ToF32(0x7e00)));
  EXPECT_TRUE(std::signbit(f16ToF32(0x8000)));
}

TEST(Safetensors, RoundTrip) {
  std::string dir = tempDir();
  std::string path = dir + "/model.safetensors";
  std::vector<float> a(32), b(7), c;
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = 0.1f * static_cast<float>(i) - 1.0f;
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = 1.0f + std::ldexp(1.0f, -8) * static_cast<float>(i);
  std::vector<TensorToWrite> ts = {
      {"model.embed_tokens.weight", TensorDType::F32, {8, 4}, a.data()},
      {"model.norm.weight", TensorDType::BF16, {7}, b.data()},
      {"empty", TensorDType::F32, {0, 3}, nullptr},
      {"scalar", TensorDType::F32, {}, a.data()},
  };
  ASSERT_TRUE(writeSafetensors(path, ts, {{"format", "pt"}}).ok());
  struct stat st;
  EXPECT_NE(::stat((path + ".tmp").c_str(), &st), 0) << ".tmp left behind";

  Expected<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->tensors().size(), 4u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const TensorInfo *e = f->find("model.embed_tokens.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, TensorDType::F32);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(e->nbytes(), 128u);
  std::vector<float> back(32);
  ASSERT_TRUE(f->readAsF32("model.embed_tokens.weight", back.data(), 32).ok());
  EXPECT_EQ(back, a);
  std::vector<float> bb(7);
  ASSERT_TRUE(f->readAsF32("model.norm.weight", bb.data(), 7).ok());
  for (size_t i = 0; i < b.size(); ++i)
    EXPECT_EQ(bb[i], bf16ToF32(f32ToBf16(b[i]))) << i;
  float s = 0;
  ASSERT_TRUE(f->readAsF32("scalar", &s, 1).ok());
  EXPECT_EQ(s, a[0]);
  EXPECT_TRUE(f->readAsF32("empty", nullptr, 0).ok());

  Status wrong = f->readAsF32("model.norm.weight", bb.data(), 6);
  EXPECT_EQ(wrong.message(), path + ": tensor 'model.norm.weight': has 7 "
                                    "elements (shape [7]), destination has 6");
  EXPECT_EQ(f->readAsF32("nope", bb.data(), 1).message(),
            path + ": no tensor 'nope'");

  // The header is padded to 8 bytes; the file size is exact.
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char *>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 8 + n + 128 + 14 + 4);
}

TEST(Safetensors, ReadsF16AndIntegers) {
  // Hand-made: F16 [2] = {1.0, -2.0}, I32 [2] = {7, -3}.
  std::string json =
      R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
      R"("i":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}})";
  std::string bytes = makeFile(json, 0);
  const uint8_t data[] = {0x00, 0x3c, 0x00, 0xc0, 7,    0,
                          0,    0,    0xfd, 0xff, 0xff, 0xff};
  bytes.append(reinterpret_cast<const char *>(data), sizeof(data));
  std::string path = tempDir() + "/x.safetensors";
  writeBytes(path, bytes);
  Expected<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  float h[2], i[2];
  ASSERT_TRUE(f->readAsF32("h", h, 2).ok());
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -2.0f);
  ASSERT_TRUE(f->readAsF32("i", i, 2).ok());
  EXPECT_EQ(i[0], 7.0f);
  EXPECT_EQ(i[1], -3.0f);
}

TEST(Safetensors, GapsAreAllowed) {
  std::string json =
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  std::string path = tempDir() + "/gap.safetensors";
  writeBytes(path, makeFile(json, 16));
  Expected<SafetensorsFile> f = SafetensorsFile::open(path);
  EXPECT_TRUE(f.ok()) << f.message();
}

// The header is read in time linear in its size (the duplicate-key check
// used nlohmann's callback parser, quadratic in the number of keys: 20,000
// tensors took 11 s, 80,000 over 600 s, and --init-from on such a file
// seemed to hang). 100,000 tensors (and a duplicate at the very end) take
// about a second here; the bound only catches the quadratic behaviour.
TEST(Safetensors, ManyTensorsOpenInLinearTime) {
  const int n = 100000;
  std::string json = "{";
  for (int i = 0; i < n; ++i)
    json += "\"t" + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[1]," +
            "\"data_offsets\":[" + std::to_string(4 * i) + "," +
            std::to_string(4 * i + 4) + "]},";
  std::string ok = json;
  ok.back() = '}';
  std::string path = tempDir() + "/many.safetensors";
  writeBytes(path, makeFile(ok, 4 * size_t(n)));
  auto t0 = std::chrono::steady_clock::now();
  Expected<SafetensorsFile> f = SafetensorsFile::open(path);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->tensors().size(), size_t(n));
  EXPECT_LT(seconds, 30.0);
  json += "\"t7\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  EXPECT_EQ(openError(makeFile(json, 4 * size_t(n))),
            "duplicate tensor name 't7' in header");
}

TEST(SafetensorsErrors, Truncated) {
  EXPECT_EQ(
      openError("abc"),
      "file is truncated: 3 bytes, shorter than the 8-byte header length");
  EXPECT_EQ(
      openError(""),
      "file is truncated: 0 bytes, shorter than the 8-byte header length");
}

TEST(SafetensorsErrors, HeaderPastEof) {
  EXPECT_EQ(openError(makeFile("{}", 0, 1000)),
            "header length 1000 runs past the end of the file (10 bytes)");
  // A file cut inside the data section: offsets run past it.
  std::string json =
      R"({"w":{"dtype":"F32","shape":[8,4],"data_offsets":[0,128]}})";
  EXPECT_EQ(openError(makeFile(json, 100)),
            "tensor 'w': data_offsets [0, 128] run past the data section (100 "
            "bytes)");
}

TEST(SafetensorsErrors, BadJson) {
  std::string m = openError(makeFile("{\"a\": ", 0));
  EXPECT_EQ(m.rfind("header is not valid JSON: ", 0), 0u) << m;
  EXPECT_EQ(openError(makeFile("[1, 2]", 0)), "header is not a JSON object");
  EXPECT_EQ(openError(makeFile("{\"a\": 1}", 0)),
            "tensor 'a': entry is not a JSON object");
  EXPECT_EQ(openError(makeFile(R"({"a":{"dtype":"F32","shape":[1]}})", 4)),
            "tensor 'a': missing 'data_offsets'");
  EXPECT_EQ(
      openError(makeFile(
          R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)),
      "tensor 'a': shape must be an array of non-negative integers");
  EXPECT_EQ(
      openError(makeFile(
          R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4)),
      "tensor 'a': shape must be an array of non-negative integers");
  EXPECT_EQ(openError(makeFile(
                R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4)),
            "tensor 'a': data_offsets must be [begin, end] of non-negative "
            "integers");
  EXPECT_EQ(
      openError(makeFile(
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4)),
      "tensor 'a': data_offsets [4, 0] end before they begin");
  EXPECT_EQ(openError(makeFile(R"({"__metadata__":{"k":1}})", 0)),
            "__metadata__ value of 'k' is not a string");
  EXPECT_EQ(
      openError(makeFile(
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})",
          4)),
      "tensor 'a': unexpected key 'x'");
}

TEST(SafetensorsErrors, Overlap) {
  std::string json =
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})";
  EXPECT_EQ(openError(makeFile(json, 24)),
            "tensors 'a' [0, 16] and 'b' [8, 24] overlap");
  // Same range twice.
  json = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
         R"("b":{"dtype":"I32","shape":[4],"data_offsets":[0,16]}})";
  EXPECT_EQ(openError(makeFile(json, 16)),
            "tensors 'a' [0, 16] and 'b' [0, 16] overlap");
  // A tensor inside a larger one (not adjacent in sorted order).
  json = R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},)"
         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
         R"("c":{"dtype":"F32","shape":[1],"data_offsets":[20,24]}})";
  EXPECT_EQ(openError(makeFile(json, 32)),
            "tensors 'a' [0, 32] and 'b' [4, 8] overlap");
}

TEST(SafetensorsErrors, OutOfRange) {
  std::string json =
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})";
  EXPECT_EQ(openError(makeFile(json, 24)),
            "tensor 'a': data_offsets [16, 32] run past the data section (24 "
            "bytes)");
}

TEST(SafetensorsErrors, WrongSizeForShape) {
  std::string json = R"({"model.embed_tokens.weight":{"dtype":"F32",)"
                     R"("shape":[8,4],"data_offsets":[0,100]}})";
  EXPECT_EQ(openError(makeFile(json, 128)),
            "tensor 'model.embed_tokens.weight': data_offsets [0, 100] do not "
            "match shape [8, 4] of F32 (128 bytes)");
  // Overflowing element counts are reported, not wrapped.
  json = R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],)"
         R"("data_offsets":[0,0]}})";
  EXPECT_EQ(openError(makeFile(json, 0)),
            "tensor 'a': data_offsets [0, 0] do not match shape [4294967296, "
            "4294967296, 16] of F32 (too many bytes)");
}

TEST(SafetensorsErrors, UnknownDtype) {
  std::string json =
      R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_EQ(openError(makeFile(json, 4)), "tensor 'a': unknown dtype 'F33'");
}

TEST(SafetensorsErrors, DuplicateNames) {
  std::string json = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_EQ(openError(makeFile(json, 8)),
            "duplicate tensor name 'a' in header");
  json =
      R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_EQ(openError(makeFile(json, 4)), "duplicate key 'dtype' in header");
}

TEST(SafetensorsErrors, MissingFile) {
  Expected<SafetensorsFile> f =
      SafetensorsFile::open(tempDir() + "/absent.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find("absent.safetensors: cannot open: "),
            std::string::npos);
}

TEST(SafetensorsErrors, RandomCorruptionNeverCrashes) {
  std::vector<float> a(64, 1.5f);
  std::string dir = tempDir();
  std::string path = dir + "/model.safetensors";
  ASSERT_TRUE(
      writeSafetensors(path, {{"w", TensorDType::F32, {8, 8}, a.data()},
                              {"b", TensorDType::BF16, {8, 8}, a.data()}})
          .ok());
  std::ifstream in(path, std::ios::binary);
  std::string good((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  uint32_t x = 12345;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = good;
    x = x * 1664525u + 1013904223u;
    if (trial % 3 == 0) {
      bad.resize(x % good.size()); // truncation
    } else {
      for (int k = 0; k < 3; ++k) {
        x = x * 1664525u + 1013904223u;
        size_t pos = (x >> 8) % std::min<size_t>(bad.size(), 200);
        bad[pos] = static_cast<char>(x & 0xff);
      }
    }
    writeBytes(path, bad);
    Expected<SafetensorsFile> f = SafetensorsFile::open(path);
    if (f.ok()) {
      for (const TensorInfo &t : f->tensors()) {
        std::vector<float> buf(t.numel());
        EXPECT_TRUE(f->readAsF32(t.name, buf.data(), buf.size()).ok());
      }
    } else {
      EXPECT_FALSE(f.message().empty());
    }
  }
}

TEST(SafetensorsSharded, WritesShardsAndIndex) {
  std::string dir = tempDir();
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> ts;
  for (int i = 0; i < 5; ++i)
    data.emplace_back(100, static_cast<float>(i));
  for (int i = 0; i < 5; ++i)
    ts.push_back({"layer." + std::to_string(i),
                  i % 2 ? TensorDType::BF16 : TensorDType::F32,
                  {10, 10},
                  data[i].data()});
  // F32 tensors are 400 bytes, BF16 200: limit 700 -> [400,200], [400,200],
  // [400].
  std::vector<std::string> written;
  ASSERT_TRUE(
      writeSafetensorsSharded(dir, ts, 700, {{"format", "pt"}}, &written).ok());
  ASSERT_EQ(written.size(), 4u);
  EXPECT_EQ(written[0], "model-00001-of-00003.safetensors");
  EXPECT_EQ(written[2], "model-00003-of-00003.safetensors");
  EXPECT_EQ(written[3], "model.safetensors.index.json");

  for (const std::string &p : {dir, dir + "/model.safetensors.index.json"}) {
    Expected<SafetensorsModel> m = SafetensorsModel::open(p);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ(m->shards().size(), 3u);
    EXPECT_EQ(m->size(), 5u);
    EXPECT_EQ(m->metadata().at("format"), "pt");
    for (int i = 0; i < 5; ++i) {
      std::vector<float> back(100);
      std::string name = "layer." + std::to_string(i);
      ASSERT_TRUE(m->readAsF32(name, back.data(), 100).ok());
      EXPECT_EQ(back, data[i]);
    }
    EXPECT_EQ(m->names().front(), "layer.0");
  }
  std::ifstream idx(dir + "/model.safetensors.index.json");
  std::string text((std::istreambuf_iterator<char>(idx)),
                   std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"total_size\": 1600"), std::string::npos) << text;

  // Fits: a single model.safetensors.
  std::string dir2 = tempDir();
  ASSERT_TRUE(writeSafetensorsSharded(dir2, ts, 0, {}, &written).ok());
  EXPECT_EQ(written, std::vector<std::string>{"model.safetensors"});
  Expected<SafetensorsModel> single = SafetensorsModel::open(dir2);
  ASSERT_TRUE(single.ok()) << single.message();
  EXPECT_EQ(single->size(), 5u);
}

TEST(SafetensorsSharded, IndexErrors) {
  std::string dir = tempDir();
  std::vector<float> a(4, 1.0f);
  ASSERT_TRUE(writeSafetensors(dir + "/s1.safetensors",
                               {{"x", TensorDType::F32, {4}, a.data()}})
                  .ok());
  ASSERT_TRUE(writeSafetensors(dir + "/s2.safetensors",
                               {{"x", TensorDType::F32, {4}, a.data()}})
                  .ok());
  std::string idx = dir + "/model.safetensors.index.json";
  writeBytes(
      idx, R"({"weight_map": {"x": "s1.safetensors", "y": "s2.safetensors"}})");
  Expected<SafetensorsModel> m = SafetensorsModel::open(dir);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.message(), idx + ": tensor 'x' is in both s1.safetensors and "
                               "s2.safetensors");
  writeBytes(idx, R"({"weight_map": {"y": "s1.safetensors"}})");
  m = SafetensorsModel::open(idx);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.message(),
            idx + ": tensor 'y' is mapped to s1.safetensors, which lacks it");
  writeBytes(idx, R"({"weight_map": {"y": "missing.safetensors"}})");
  m = SafetensorsModel::open(idx);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("missing.safetensors: cannot open"),
            std::string::npos)
      << m.message();
  writeBytes(idx, R"({"metadata": {}})");
  m = SafetensorsModel::open(idx);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.message(), idx + ": no 'weight_map' object");
  m = SafetensorsModel::open(tempDir());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("directory holds neither model.safetensors nor "
                             "model.safetensors.index.json"),
            std::string::npos);
}

TEST(SafetensorsWriter, Errors) {
  std::string dir = tempDir();
  std::vector<float> a(4, 1.0f);
  std::string p = dir + "/m.safetensors";
  EXPECT_EQ(writeSafetensors(p, {{"x", TensorDType::F32, {4}, a.data()},
                                 {"x", TensorDType::F32, {4}, a.data()}})
                .message(),
            p + ": duplicate tensor name 'x'");
  EXPECT_EQ(
      writeSafetensors(p, {{"x", TensorDType::F16, {4}, a.data()}}).message(),
      p + ": tensor 'x': cannot write F16 (only F32 and BF16)");
  EXPECT_EQ(
      writeSafetensors(p, {{"x", TensorDType::F32, {-4}, a.data()}}).message(),
      p + ": tensor 'x': negative dimension in shape [-4]");
  EXPECT_EQ(
      writeSafetensors(p, {{"x", TensorDType::F32, {4}, nullptr}}).message(),
      p + ": tensor 'x': no data");
  struct stat st;
  EXPECT_NE(::stat(p.c_str(), &st), 0);
  // An unwritable target leaves nothing behind and says why.
  Status s = writeSafetensors(dir + "/no/such/dir/m.safetensors",
                              {{"x", TensorDType::F32, {4}, a.data()}});
  EXPECT_NE(s.message().find("cannot create"), std::string::npos);
}

} // namespace
