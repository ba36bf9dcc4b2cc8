//===- Decoders.cpp - tokenizer.json decoders -----------------------------===//
//
// Part of mtc. The decoders of tokenizer.json (decoders/*.rs): ByteLevel,
// ByteFallback, Fuse, Strip, Replace, Metaspace and Sequence, each a step
// of decode_chain over the token strings.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/TokenizerInternal.h"

#include "lib/Tokenizer/Unicode.h"

#include <nlohmann/json.hpp>

namespace mtc::tok::hf {

namespace {

struct SequenceDecoder : Decoder {
  std::vector<std::unique_ptr<Decoder>> items;
  void chain(std::vector<std::string> &tokens) const override {
    for (const auto &d : items)
      d->chain(tokens);
  }
};

struct ByteLevelDecoder : Decoder {
  void chain(std::vector<std::string> &tokens) const override {
    const ByteMap &bm = byteMap();
    std::string bytes;
    for (const std::string &t : tokens) {
      std::string mapped;
      bool ok = true;
      for (size_t pos = 0; pos < t.size() && ok;) {
        auto it = bm.decode.find(nextCodePoint(t, pos));
        if (it == bm.decode.end())
          ok = false;
        else
          mapped += static_cast<char>(it->second);
      }
      bytes += ok ? mapped : t;
    }
    tokens.assign(1, utf8Lossy(bytes));
  }
};

/// "<0xNN>": Rust's u8::from_str_radix(&token[3..5], 16), which accepts a
/// leading '+'.
bool byteToken(const std::string &t, uint8_t &out) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>')
    return false;
  auto hex = [](char c, int &v) {
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v = c - 'A' + 10;
    else
      return false;
    return true;
  };
  int hi, lo;
  if (t[3] == '+') {
    if (!hex(t[4], lo))
      return false;
    out = static_cast<uint8_t>(lo);
    return true;
  }
  if (!hex(t[3], hi) || !hex(t[4], lo))
    return false;
  out = static_cast<uint8_t>(hi * 16 + lo);
  return true;
}

struct ByteFallbackDecoder : Decoder {
  void chain(std::vector<std::string> &tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty())
        return;
      if (findInvalidUtf8(pending) == std::string::npos)
        out.push_back(pending);
      else
        for (size_t i = 0; i < pending.size(); ++i)
          out.push_back("\xEF\xBF\xBD");
      pending.clear();
    };
    for (std::string &t : tokens) {
      uint8_t b;
      if (byteToken(t, b)) {
        pending += static_cast<char>(b);
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

struct FuseDecoder : Decoder {
  void chain(std::vector<std::string> &tokens) const override {
    std::string all;
    for (const std::string &t : tokens)
      all += t;
    tokens.assign(1, all);
  }
};

struct StripDecoder : Decoder {
  uint32_t content = ' ';
  size_t start = 0, stop = 0;
  void chain(std::vector<std::string> &tokens) const override {
    for (std::string &t : tokens) {
      std::vector<size_t> starts; // byte offset of each char
      for (size_t pos = 0; pos < t.size();) {
        starts.push_back(pos);
        pos += utf8Length(static_cast<uint8_t>(t[pos]));
      }
      size_t n = starts.size();
      auto charAt = [&](size_t i) {
        size_t p = starts[i];
        return nextCodePoint(t, p);
      };
      size_t startCut = 0;
      for (size_t i = 0; i < std::min(start, n); ++i) {
        if (charAt(i) != content)
          break;
        startCut = i + 1;
      }
      size_t stopCut = n;
      for (size_t i = 0; i < stop && i < n; ++i) {
        size_t idx = n - i - 1;
        if (charAt(idx) != content)
          break;
        stopCut = idx;
      }
      if (stopCut <= startCut) {
        t.clear();
        continue;
      }
      size_t b = starts[startCut];
      size_t e = stopCut < n ? starts[stopCut] : t.size();
      t = t.substr(b, e - b);
    }
  }
};

struct ReplaceDecoder : Decoder {
  Regex re;
  std::string content;
  void chain(std::vector<std::string> &tokens) const override {
    for (std::string &t : tokens)
      t = replaceAll(re, t, content);
  }
};

struct MetaspaceDecoder : Decoder {
  uint32_t replacement = 0x2581;
  PrependScheme scheme = PrependScheme::Always;
  void chain(std::vector<std::string> &tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string &t = tokens[i];
      std::string out;
      for (size_t pos = 0; pos < t.size();) {
        size_t b = pos;
        uint32_t c = nextCodePoint(t, pos);
        if (c == replacement) {
          if (!(i == 0 && scheme != PrependScheme::Never))
            out += ' ';
        } else {
          out.append(t, b, pos - b);
        }
      }
      tokens[i] = std::move(out);
    }
  }
};

} // namespace

std::unique_ptr<Decoder> parseDecoder(const json &v, const std::string &path) {
  std::string type = typeOf(v, path);
  if (type == "Sequence")
    return parseSequence<SequenceDecoder>(v, path, "decoders", parseDecoder);
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback")
    return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse")
    return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    auto d = std::make_unique<StripDecoder>();
    d->content = charField(v, path, "content");
    d->start = static_cast<size_t>(
        asInt(member(v, path, "start"), join(path, "start"), 0, 1 << 20));
    d->stop = static_cast<size_t>(
        asInt(member(v, path, "stop"), join(path, "stop"), 0, 1 << 20));
    return d;
  }
  if (type == "Replace") {
    auto d = std::make_unique<ReplaceDecoder>();
    d->re = patternField(v, path);
    d->content = stringField(v, path, "content");
    return d;
  }
  if (type == "Metaspace") {
    auto d = std::make_unique<MetaspaceDecoder>();
    d->replacement = charField(v, path, "replacement");
    d->scheme = schemeField(v, path);
    return d;
  }
  unsupportedType(path, type,
                  "ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, "
                  "Sequence");
}

} // namespace mtc::tok::hf
