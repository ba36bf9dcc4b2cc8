//===- DataTest.cpp - Unit tests of runtime/train/Data --------------------===//
//
// Part of mtc. The three input formats, every validation error, the split, and
// the exact-resume property of the batch sampler.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Data.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include <cstring>
#include <fstream>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace mtc;
using namespace mtc::train;

namespace {

std::string tempPath(const std::string &name) {
  // mkdtemp: a directory left behind by an earlier process with the same
  // pid is never reused.
  std::string d = ::testing::TempDir() + "/mtc-data-XXXXXX";
  if (!::mkdtemp(d.data()))
    ADD_FAILURE() << "mkdtemp " << d << " failed";
  return d + "/" + name;
}

void writeBytes(const std::string &path, const void *p, size_t n) {
  std::ofstream o(path, std::ios::binary);
  o.write(static_cast<const char *>(p), static_cast<std::streamsize>(n));
}

std::string llmcFile(int version, int32_t declared,
                     const std::vector<uint32_t> &tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = kLlmcMagic;
  header[1] = version;
  header[2] = declared;
  std::string bytes(reinterpret_cast<const char *>(header.data()), 1024);
  for (uint32_t t : tokens) {
    if (version == 1) {
      uint16_t v = static_cast<uint16_t>(t);
      bytes.append(reinterpret_cast<const char *>(&v), 2);
    } else {
      bytes.append(reinterpret_cast<const char *>(&t), 4);
    }
  }
  return bytes;
}

std::vector<uint32_t> iota(size_t n, uint32_t mod) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint32_t>(i % mod);
  return v;
}

TokenDatasetOptions opts(uint32_t vocab, int64_t seq, double val = 0.1,
                         const char *format = "auto") {
  TokenDatasetOptions o;
  o.vocabSize = vocab;
  o.seqLen = seq;
  o.valFraction = val;
  o.format = format;
  return o;
}

TokenDatasetOptions raw16(uint32_t vocab, int64_t seq, double val = 0.1) {
  return opts(vocab, seq, val, "raw-u16");
}

std::string openError(const std::string &path, const TokenDatasetOptions &o) {
  Expected<TokenDataset> d = TokenDataset::open(path, o);
  EXPECT_FALSE(d.ok());
  if (d.ok())
    return "";
  EXPECT_EQ(d.message().rfind(path + ": ", 0), 0u) << d.message();
  return d.message().substr(path.size() + 2);
}

TEST(TokenDataset, LlmcVersion1And2) {
  for (int version : {1, 2}) {
    std::string p = tempPath("train.bin");
    std::vector<uint32_t> toks = iota(1000, version == 1 ? 50000 : 100000);
    toks[999] = version == 1 ? 50000 : 99999;
    std::string bytes = llmcFile(version, 1000, toks);
    writeBytes(p, bytes.data(), bytes.size());
    Expected<TokenDataset> d = TokenDataset::open(p, opts(100000, 16));
    ASSERT_TRUE(d.ok()) << d.message();
    EXPECT_EQ(d->format(), TokenFileFormat::LlmcBin);
    EXPECT_EQ(d->tokenBytes(), version == 1 ? 2u : 4u);
    EXPECT_EQ(d->numTokens(), 1000u);
    EXPECT_EQ(d->valTokens(), 100u);
    EXPECT_EQ(d->trainTokens(), 900u);
    EXPECT_TRUE(d->validated());
    EXPECT_EQ(d->token(999), toks[999]);
    std::vector<int32_t> w(5);
    d->read(10, 5, w.data());
    EXPECT_EQ(w, (std::vector<int32_t>{10, 11, 12, 13, 14}));
  }
}

TEST(TokenDataset, RawUint16AndText) {
  std::string p = tempPath("shard.bin");
  std::vector<uint16_t> raw(500);
  for (size_t i = 0; i < raw.size(); ++i)
    raw[i] = static_cast<uint16_t>(i * 7 % 50257);
  writeBytes(p, raw.data(), raw.size() * 2);
  // Raw tokens are never guessed: they must be asked for.
  EXPECT_NE(openError(p, opts(50257, 8)).find("pass --data-format raw-u16"),
            std::string::npos);
  Expected<TokenDataset> d = TokenDataset::open(p, raw16(50257, 8));
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d->format(), TokenFileFormat::RawU16);
  EXPECT_EQ(d->numTokens(), 500u);
  EXPECT_EQ(d->token(3), 21u);

  std::string t = tempPath("input.txt");
  std::string text = "hello, world\n\xc3\xa9t\xc3\xa9 and more text here";
  writeBytes(t, text.data(), text.size());
  Expected<TokenDataset> td = TokenDataset::open(t, opts(256, 4, 0.2));
  ASSERT_TRUE(td.ok()) << td.message();
  EXPECT_EQ(td->format(), TokenFileFormat::Text);
  EXPECT_EQ(td->numTokens(), text.size());
  EXPECT_EQ(td->token(0), uint32_t('h'));
  EXPECT_EQ(td->token(13), 0xc3u);

  // UTF-8 text under any name is text; so is anything asked to be.
  for (const char *name : {"notes.md", "README", "corpus.test"}) {
    std::string m = tempPath(name);
    writeBytes(m, text.data(), text.size());
    Expected<TokenDataset> md = TokenDataset::open(m, opts(256, 4, 0.2));
    ASSERT_TRUE(md.ok()) << md.message();
    EXPECT_EQ(md->format(), TokenFileFormat::Text) << name;
    EXPECT_EQ(md->numTokens(), text.size());
  }
  Expected<TokenDataset> forced =
      TokenDataset::open(p, opts(256, 8, 0.1, "text"));
  ASSERT_TRUE(forced.ok()) << forced.message();
  EXPECT_EQ(forced->format(), TokenFileFormat::Text);
  EXPECT_EQ(forced->numTokens(), 1000u);
}

TEST(TokenDataset, DamagedHeaderIsNotTokens) {
  // An llm.c file whose magic has one bit flipped: an error, not 516 raw
  // uint16 tokens.
  std::string p = tempPath("flipped.bin");
  std::string bytes = llmcFile(1, 500, iota(500, 50000));
  bytes[0] ^= 0x04;
  writeBytes(p, bytes.data(), bytes.size());
  std::string e = openError(p, opts(50257, 8));
  EXPECT_NE(e.find("neither an llm.c token file"), std::string::npos) << e;
  EXPECT_NE(e.find("magic is 20240520"), std::string::npos) << e;
  // Asked for llm.c, a file without the magic names both.
  std::string t = tempPath("text.bin");
  writeBytes(t, "plain text, not tokens", 22);
  e = openError(t, opts(256, 4, 0.1, "llmc"));
  EXPECT_NE(e.find("not an llm.c token file"), std::string::npos) << e;
  e = openError(t, opts(256, 4, 0.1, "utf16"));
  EXPECT_EQ(e, "unknown data format 'utf16' (expected auto, text, llmc or "
               "raw-u16)");
}

TEST(TokenDataset, SpecialFilesAreRefusedWithoutBlocking) {
  std::string fifo = tempPath("fifo.txt");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  // Opening a FIFO with no writer would block: it is refused at once.
  EXPECT_EQ(openError(fifo, opts(256, 4)), "is a FIFO, not a regular file");
  EXPECT_EQ(openError("/dev/null", opts(256, 4)),
            "is a character device, not a regular file");
  std::string dir = tempPath("adir");
  ::mkdir(dir.c_str(), 0755);
  EXPECT_EQ(openError(dir, opts(256, 4)), "is a directory, not a file");
}

TEST(TokenDataset, Errors) {
  std::string missing = tempPath("nope.bin");
  EXPECT_NE(openError(missing, opts(256, 4)).find("cannot open"),
            std::string::npos);

  std::string empty = tempPath("empty.bin");
  writeBytes(empty, "", 0);
  EXPECT_EQ(openError(empty, opts(256, 4)), "file is empty");

  std::string odd = tempPath("odd.bin");
  writeBytes(odd, "abcde", 5);
  EXPECT_EQ(openError(odd, raw16(65536, 1)),
            "size 5 bytes is not a multiple of the token size (2 bytes, raw "
            "uint16 tokens)");

  std::string p = tempPath("llmc.bin");
  std::string bytes = llmcFile(1, 100, iota(90, 10));
  writeBytes(p, bytes.data(), bytes.size());
  EXPECT_EQ(openError(p, opts(256, 4)),
            "header says 100 tokens but the file holds 90");

  bytes = llmcFile(1, 90, iota(90, 10)) + "x";
  writeBytes(p, bytes.data(), bytes.size());
  EXPECT_EQ(
      openError(p, opts(256, 4)),
      "181 bytes of tokens is not a multiple of the token size (2 bytes)");

  bytes = llmcFile(3, 90, iota(90, 10));
  writeBytes(p, bytes.data(), bytes.size());
  EXPECT_EQ(openError(p, opts(256, 4)),
            "unsupported llm.c version 3 (1: uint16 tokens, 2: uint32 tokens)");

  bytes = llmcFile(1, 90, iota(90, 10)).substr(0, 600);
  writeBytes(p, bytes.data(), bytes.size());
  EXPECT_EQ(openError(p, opts(256, 4)),
            "llm.c header is truncated (600 bytes, the header is 1024)");

  bytes = llmcFile(2, 8, iota(8, 10));
  writeBytes(p, bytes.data(), bytes.size());
  EXPECT_EQ(openError(p, opts(256, 8)), "8 tokens, fewer than seq_len + 1 = 9");

  std::vector<uint32_t> toks = iota(1000, 100);
  toks[700] = 300;
  toks[800] = 400;
  bytes = llmcFile(2, 1000, toks);
  writeBytes(p, bytes.data(), bytes.size());
  EXPECT_EQ(openError(p, opts(256, 8)),
            "token 300 at position 700 is outside the vocabulary (size 256)");
  // Above the scan limit the check is skipped.
  TokenDatasetOptions big = opts(256, 8);
  big.validateUpToBytes = 100;
  Expected<TokenDataset> unchecked = TokenDataset::open(p, big);
  ASSERT_TRUE(unchecked.ok()) << unchecked.message();
  EXPECT_FALSE(unchecked->validated());

  std::string t = tempPath("tiny.txt");
  writeBytes(t, "abcdefghij", 10);
  EXPECT_TRUE(TokenDataset::open(t, opts(256, 4, 0.5)).ok()); // 5 + 5
  EXPECT_EQ(openError(t, opts(256, 5, 0.1)),
            "10 tokens are too few for a training and a validation window of 6 "
            "tokens each (val_fraction 0.100000)");
  EXPECT_EQ(openError(t, opts(100, 2)),
            "token 100 at position 3 is outside the vocabulary (size 100)");
}

TEST(TokenDataset, SplitKeepsAtLeastOneValWindow) {
  std::string p = tempPath("data.txt");
  std::string text(100, 'a');
  writeBytes(p, text.data(), text.size());
  Expected<TokenDataset> d = TokenDataset::open(p, opts(256, 20, 0.05));
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d->valTokens(), 21u); // 5 < seq + 1
  Expected<TokenDataset> all = TokenDataset::open(p, opts(256, 20, 0.0));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->valTokens(), 0u);
  EXPECT_EQ(all->trainTokens(), 100u);
}

TEST(BatchSampler, WindowsAreShiftedAndResumable) {
  std::string p = tempPath("seq.bin");
  std::vector<uint16_t> raw(5000);
  for (size_t i = 0; i < raw.size(); ++i)
    raw[i] = static_cast<uint16_t>(i % 60000);
  writeBytes(p, raw.data(), raw.size() * 2);
  Expected<TokenDataset> d = TokenDataset::open(p, raw16(65536, 16));
  ASSERT_TRUE(d.ok()) << d.message();
  const int64_t B = 4, S = 16;
  BatchSampler s(*d, B, 1234);
  std::vector<int32_t> in(B * S), tg(B * S), in2(B * S), tg2(B * S);
  std::set<uint64_t> offsets;
  for (int64_t step = 0; step < 50; ++step)
    for (int64_t micro = 0; micro < 2; ++micro) {
      s.sample(step, micro, in.data(), tg.data());
      for (int64_t b = 0; b < B; ++b) {
        uint64_t off = s.offset(step, micro, b);
        offsets.insert(off);
        ASSERT_LE(off + S + 1, d->trainTokens());
        for (int64_t k = 0; k < S; ++k) {
          ASSERT_EQ(in[b * S + k], int32_t(off + k));
          ASSERT_EQ(tg[b * S + k], int32_t(off + k + 1));
        }
      }
    }
  EXPECT_GT(offsets.size(), 350u); // random, few collisions
  // A fresh sampler (a resumed run) reproduces any step exactly.
  BatchSampler resumed(*d, B, 1234);
  s.sample(37, 1, in.data(), tg.data());
  resumed.sample(37, 1, in2.data(), tg2.data());
  EXPECT_EQ(in, in2);
  EXPECT_EQ(tg, tg2);
  BatchSampler other(*d, B, 1235);
  other.sample(37, 1, in2.data(), tg2.data());
  EXPECT_NE(in, in2);
}

TEST(ValIterator, WalksTheHeldOutTokens) {
  std::string p = tempPath("val.bin");
  std::vector<uint16_t> raw(1000);
  for (size_t i = 0; i < raw.size(); ++i)
    raw[i] = static_cast<uint16_t>(i);
  writeBytes(p, raw.data(), raw.size() * 2);
  Expected<TokenDataset> d = TokenDataset::open(p, raw16(65536, 10, 0.1));
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->trainTokens(), 900u);
  ValIterator it(*d, 4);
  EXPECT_EQ(it.numWindows(), 9u); // (100 - 1) / 10
  std::vector<int32_t> in(40), tg(40);
  int64_t total = 0, rows;
  int batches = 0;
  while ((rows = it.next(in.data(), tg.data())) > 0) {
    for (int64_t r = 0; r < rows; ++r) {
      int32_t start = static_cast<int32_t>(900 + (total + r) * 10);
      EXPECT_EQ(in[r * 10], start);
      EXPECT_EQ(tg[r * 10 + 9], start + 10);
    }
    total += rows;
    ++batches;
  }
  EXPECT_EQ(total, 9);
  EXPECT_EQ(batches, 3);
  it.reset();
  EXPECT_EQ(it.next(in.data(), tg.data()), 4);
}

} // namespace

namespace {

std::string maskBytes(int64_t declared, const std::vector<uint8_t> &mask) {
  std::string bytes(16, '\0');
  int32_t magic = kLossMaskMagic, version = 1;
  std::memcpy(&bytes[0], &magic, 4);
  std::memcpy(&bytes[4], &version, 4);
  std::memcpy(&bytes[8], &declared, 8);
  bytes.append(reinterpret_cast<const char *>(mask.data()), mask.size());
  return bytes;
}

} // namespace

// A `<file>.mask` companion: masked targets become ignoreIndex in training and
// validation windows; inputs are unchanged.
TEST(DataMask, TargetsOfMaskedTokensAreIgnored) {
  std::string p = tempPath("sft.bin");
  std::vector<uint32_t> toks = iota(64, 50);
  std::string f = llmcFile(1, 64, toks);
  writeBytes(p, f.data(), f.size());
  std::vector<uint8_t> mask(64, 0);
  for (size_t i = 0; i < 64; ++i)
    mask[i] = (i % 4 == 3) ? 1 : 0;
  std::string m = maskBytes(64, mask);
  writeBytes(p + ".mask", m.data(), m.size());
  TokenDatasetOptions o;
  o.vocabSize = 64;
  o.seqLen = 8;
  o.valFraction = 0.25;
  o.ignoreIndex = -100;
  Expected<TokenDataset> d = TokenDataset::open(p, o);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_TRUE(d->hasMask());
  BatchSampler s(*d, 3, 7);
  std::vector<int32_t> in(24), tg(24);
  s.sample(5, 0, in.data(), tg.data());
  for (int64_t b = 0; b < 3; ++b) {
    uint64_t off = s.offset(5, 0, b);
    for (uint64_t k = 0; k < 8; ++k) {
      EXPECT_EQ(in[b * 8 + k], static_cast<int32_t>(toks[off + k]));
      int32_t want =
          mask[off + k + 1] ? static_cast<int32_t>(toks[off + k + 1]) : -100;
      EXPECT_EQ(tg[b * 8 + k], want) << b << " " << k;
    }
  }
  ValIterator it(*d, 4);
  int64_t rows = it.next(in.data(), tg.data());
  ASSERT_GT(rows, 0);
  for (uint64_t k = 0; k < 8; ++k)
    EXPECT_EQ(tg[k], mask[d->trainTokens() + k + 1]
                         ? static_cast<int32_t>(toks[d->trainTokens() + k + 1])
                         : -100);
  // Without the companion (or with useMask off) nothing is masked.
  o.useMask = false;
  Expected<TokenDataset> plain = TokenDataset::open(p, o);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->hasMask());
}

TEST(DataMask, Errors) {
  std::string p = tempPath("sft.bin");
  std::string f = llmcFile(1, 64, iota(64, 50));
  writeBytes(p, f.data(), f.size());
  TokenDatasetOptions o;
  o.vocabSize = 64;
  o.seqLen = 8;
  o.valFraction = 0;
  auto err = [&](const std::string &maskFile) {
    writeBytes(p + ".mask", maskFile.data(), maskFile.size());
    Expected<TokenDataset> d = TokenDataset::open(p, o);
    return d ? std::string("ok") : d.message();
  };
  EXPECT_EQ(err(maskBytes(64, std::vector<uint8_t>(64, 1))), "ok");
  EXPECT_EQ(err(maskBytes(64, std::vector<uint8_t>(64, 0))),
            p + ".mask: no trainable tokens in the training split (every "
                "target is masked)");
  // Only the first token trained: it is never a target.
  std::vector<uint8_t> first(64, 0);
  first[0] = 1;
  EXPECT_EQ(err(maskBytes(64, first)),
            p + ".mask: no trainable tokens in the training split (every "
                "target is masked)");
  EXPECT_EQ(err(maskBytes(10, std::vector<uint8_t>(10, 1))),
            p + ".mask: 10 mask bytes for the 64 tokens of " + p);
  EXPECT_EQ(err(maskBytes(64, std::vector<uint8_t>(63, 1))),
            p + ".mask: header says 64 tokens but the file holds 63");
  EXPECT_EQ(err(maskBytes(64, std::vector<uint8_t>(64, 2))),
            p + ".mask: byte 2 at token 0 is neither 0 (masked) nor 1 "
                "(trained)");
  EXPECT_EQ(err("junk"), p + ".mask: not a loss mask (no magic 'MASK')");
}
