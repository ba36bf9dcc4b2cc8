//===- BpeModel.cpp - tokenizer.json BPE model ----------------------------===//
//
// Part of mtc. The BPE model of tokenizer.json (models/bpe/model.rs,
// word.rs): merging a word by merge rank, byte fallback, unknown tokens,
// continuing-subword prefix and end-of-word suffix, and the model's
// loading and checks.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/TokenizerInternal.h"

#include "lib/Tokenizer/Unicode.h"

#include <nlohmann/json.hpp>

#include <queue>

namespace mtc::tok::hf {

const std::pair<uint32_t, uint32_t> *Bpe::merge(uint32_t a, uint32_t b) const {
  auto it = merges.find((static_cast<uint64_t>(a) << 32) | b);
  return it == merges.end() ? nullptr : &it->second;
}

void Bpe::mergeWord(const std::string &w, std::vector<uint32_t> &out) const {
  std::vector<Symbol> sym;
  sym.reserve(w.size());
  auto add = [&](uint32_t c, size_t len) {
    long n = static_cast<long>(sym.size());
    if (!sym.empty())
      sym.back().next = n;
    sym.push_back({c, n - 1, -1, len});
  };
  bool haveUnk = false;
  uint32_t pendUnk = 0;
  size_t pendLen = 0;
  std::string s;
  for (size_t i = 0; i < w.size();) {
    size_t end = i + utf8Length(static_cast<uint8_t>(w[i]));
    bool isFirst = i == 0, isLast = end >= w.size();
    size_t byteLen = end - i;
    s.assign(w, i, byteLen);
    if (!isFirst && hasPrefix)
      s.insert(0, prefix);
    if (isLast && hasSuffix)
      s += suffix;
    i = end;
    auto it = vocab.find(s);
    if (it != vocab.end()) {
      if (haveUnk) {
        add(pendUnk, pendLen);
        haveUnk = false;
      }
      add(it->second, byteLen);
      continue;
    }
    if (byteFallback) {
      bool all = true;
      for (unsigned char b : s)
        all = all && byteIds[b] >= 0;
      if (all) {
        for (unsigned char b : s)
          add(static_cast<uint32_t>(byteIds[b]), 1);
        continue;
      }
    }
    if (unkId) {
      if (haveUnk && fuseUnk) {
        pendLen += byteLen;
      } else {
        if (haveUnk)
          add(pendUnk, pendLen);
        haveUnk = true;
        pendUnk = *unkId;
        pendLen = byteLen;
      }
    }
  }
  if (haveUnk)
    add(pendUnk, pendLen);

  struct Merge {
    size_t pos;
    uint32_t rank, newId;
  };
  auto later = [](const Merge &a, const Merge &b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::priority_queue<Merge, std::vector<Merge>, decltype(later)> queue(later);
  for (size_t i = 0; i + 1 < sym.size(); ++i)
    if (auto m = merge(sym[i].c, sym[i + 1].c))
      queue.push({i, m->first, m->second});
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    Symbol &cur = sym[top.pos];
    if (cur.len == 0 || cur.next == -1)
      continue;
    size_t nextPos = static_cast<size_t>(cur.next);
    Symbol right = sym[nextPos];
    auto m = merge(cur.c, right.c);
    if (!m || m->second != top.newId)
      continue;
    cur.c = top.newId;
    cur.len += right.len;
    cur.next = right.next;
    sym[nextPos].len = 0;
    if (right.next > -1 && static_cast<size_t>(right.next) < sym.size())
      sym[right.next].prev = static_cast<long>(top.pos);
    const Symbol &c = sym[top.pos];
    if (c.prev >= 0)
      if (auto pm = merge(sym[c.prev].c, c.c))
        queue.push({static_cast<size_t>(c.prev), pm->first, pm->second});
    if (c.next >= 0 && static_cast<size_t>(c.next) < sym.size())
      if (auto nm = merge(c.c, sym[c.next].c))
        queue.push({top.pos, nm->first, nm->second});
  }
  for (const Symbol &x : sym)
    if (x.len != 0)
      out.push_back(x.c);
}

void Bpe::tokenize(const std::string &w, std::vector<uint32_t> &out,
                   Cache &cache) const {
  if (w.empty())
    return;
  if (ignoreMerges) {
    auto it = vocab.find(w);
    if (it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  bool cacheable = w.size() < 256;
  if (cacheable) {
    auto it = cache.find(w);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t before = out.size();
  mergeWord(w, out);
  if (cacheable && cache.size() < 200000)
    cache.emplace(w, std::vector<uint32_t>(out.begin() + before, out.end()));
}

std::unique_ptr<Bpe> parseModel(const json &root) {
  const json &m = member(root, "", "model");
  std::string path = "model";
  expectObject(m, path);
  std::string type;
  if (const json *t = optional(m, "type"))
    type = asString(*t, "model.type");
  else if (m.contains("merges"))
    type = "BPE";
  else
    fail(path, "missing field 'type'");
  if (type != "BPE")
    unsupportedType(path, type, "BPE");

  auto bpe = std::make_unique<Bpe>();
  if (const json *d = optional(m, "dropout")) {
    if (!d->is_number())
      fail("model.dropout",
           std::string("expected a number, got ") + typeName(*d));
    if (d->get<double>() != 0.0)
      fail("model.dropout",
           "BPE dropout " + d->dump() +
               " is not supported (it makes tokenization random)");
  }
  const json &vocab = member(m, path, "vocab");
  expectObject(vocab, "model.vocab");
  bpe->vocab.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    uint32_t id =
        asId(it.value(), "model.vocab['" + shortText(it.key()) + "']");
    bpe->vocab[it.key()] = id;
    bpe->vocabR.emplace(id, it.key());
  }
  if (const json *u = optional(m, "unk_token")) {
    std::string unk = asString(*u, "model.unk_token");
    auto it = bpe->vocab.find(unk);
    if (it == bpe->vocab.end())
      fail("model.unk_token", "'" + unk + "' is not in model.vocab");
    bpe->unkId = it->second;
  }
  if (const json *p = optional(m, "continuing_subword_prefix")) {
    bpe->prefix = asString(*p, "model.continuing_subword_prefix");
    bpe->hasPrefix = true;
  }
  if (const json *s = optional(m, "end_of_word_suffix")) {
    bpe->suffix = asString(*s, "model.end_of_word_suffix");
    bpe->hasSuffix = true;
  }
  bpe->fuseUnk = boolField(m, path, "fuse_unk", false);
  bpe->byteFallback = boolField(m, path, "byte_fallback", false);
  bpe->ignoreMerges = boolField(m, path, "ignore_merges", false);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = bpe->vocab.find(name);
    bpe->byteIds[b] =
        it == bpe->vocab.end() ? -1 : static_cast<int>(it->second);
  }

  const json &merges = member(m, path, "merges");
  if (!merges.is_array())
    fail("model.merges",
         std::string("expected an array, got ") + typeName(merges));
  bpe->merges.reserve(merges.size());
  uint32_t rank = 0;
  for (size_t i = 0; i < merges.size(); ++i) {
    const json &e = merges[i];
    std::string ip = index("model.merges", i);
    std::string a, b;
    if (e.is_string()) {
      // The legacy "a b" form; "#version" lines are skipped.
      std::string line = e.get<std::string>();
      if (line.rfind("#version", 0) == 0)
        continue;
      size_t sp = line.find(' ');
      if (sp == std::string::npos ||
          line.find(' ', sp + 1) != std::string::npos)
        fail(ip, "'" + shortText(line) + "' is not a pair of tokens 'a b'");
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2) {
      a = asString(e[0], index(ip, 0));
      b = asString(e[1], index(ip, 1));
    } else {
      fail(ip, std::string("expected a pair of tokens, got ") + typeName(e));
    }
    auto ia = bpe->vocab.find(a), ib = bpe->vocab.find(b);
    if (ia == bpe->vocab.end())
      fail(ip, "token '" + shortText(a) + "' is not in model.vocab");
    if (ib == bpe->vocab.end())
      fail(ip, "token '" + shortText(b) + "' is not in model.vocab");
    if (b.size() < bpe->prefix.size())
      fail(ip, "token '" + shortText(b) +
                   "' is shorter than the continuing_subword_prefix");
    std::string merged = a + b.substr(bpe->prefix.size());
    auto in = bpe->vocab.find(merged);
    if (in == bpe->vocab.end())
      fail(ip, "the merged token '" + shortText(merged) +
                   "' is not in model.vocab");
    bpe->merges[(static_cast<uint64_t>(ia->second) << 32) | ib->second] = {
        rank++, in->second};
  }
  return bpe;
}

} // namespace mtc::tok::hf
