//===- PostProcessors.cpp - tokenizer.json post-processors ----------------===//
//
// Part of mtc. The post-processors of tokenizer.json (processors/*.rs):
// TemplateProcessing (the single template), BertProcessing,
// RobertaProcessing, ByteLevel (a no-op on ids) and Sequence.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/TokenizerInternal.h"

#include <nlohmann/json.hpp>

namespace mtc::tok::hf {

namespace {

struct NoopPostProcessor : PostProcessor {
  void apply(std::vector<uint32_t> &) const override {}
  void collectIds(std::vector<uint32_t> &) const override {}
};

struct TemplatePostProcessor : PostProcessor {
  /// The single template: a sequence of special-token id lists, with an empty
  /// optional for the sequence A.
  std::vector<std::optional<std::vector<uint32_t>>> items;
  void apply(std::vector<uint32_t> &ids) const override {
    std::vector<uint32_t> out;
    out.reserve(ids.size() + 4);
    for (const auto &it : items) {
      if (it)
        out.insert(out.end(), it->begin(), it->end());
      else
        out.insert(out.end(), ids.begin(), ids.end());
    }
    ids = std::move(out);
  }
  void collectIds(std::vector<uint32_t> &out) const override {
    for (const auto &it : items)
      if (it)
        out.insert(out.end(), it->begin(), it->end());
  }
};

struct SequencePostProcessor : PostProcessor {
  std::vector<std::unique_ptr<PostProcessor>> items;
  void apply(std::vector<uint32_t> &ids) const override {
    for (const auto &p : items)
      p->apply(ids);
  }
  void collectIds(std::vector<uint32_t> &out) const override {
    for (const auto &p : items)
      p->collectIds(out);
  }
};

/// A ["token", id] pair (BertProcessing, RobertaProcessing).
uint32_t tokenPairId(const json &v, const std::string &path, const char *key) {
  const json &p = member(v, path, key);
  std::string kp = join(path, key);
  if (!p.is_array() || p.size() != 2)
    fail(kp, std::string("expected [token, id], got ") + typeName(p));
  asString(p[0], index(kp, 0));
  return asId(p[1], index(kp, 1));
}

} // namespace

std::unique_ptr<PostProcessor> parsePostProcessor(const json &v,
                                                  const std::string &path) {
  std::string type = typeOf(v, path);
  if (type == "ByteLevel")
    return std::make_unique<NoopPostProcessor>();
  if (type == "Sequence")
    return parseSequence<SequencePostProcessor>(v, path, "processors",
                                                parsePostProcessor);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto t = std::make_unique<TemplatePostProcessor>();
    t->items.push_back(std::vector<uint32_t>{tokenPairId(v, path, "cls")});
    t->items.push_back(std::nullopt);
    t->items.push_back(std::vector<uint32_t>{tokenPairId(v, path, "sep")});
    return t;
  }
  if (type == "TemplateProcessing") {
    auto t = std::make_unique<TemplatePostProcessor>();
    const json &special = member(v, path, "special_tokens");
    std::string sp = join(path, "special_tokens");
    expectObject(special, sp);
    const json &single = member(v, path, "single");
    std::string gp = join(path, "single");
    if (!single.is_array())
      fail(gp, std::string("expected an array, got ") + typeName(single));
    for (size_t i = 0; i < single.size(); ++i) {
      const json &piece = single[i];
      std::string pp = index(gp, i);
      expectObject(piece, pp);
      if (const json *seq = optional(piece, "Sequence")) {
        expectObject(*seq, pp + ".Sequence");
        std::string id = stringField(*seq, pp + ".Sequence", "id");
        if (id != "A")
          fail(pp + ".Sequence.id",
               "'" + id + "' in the single template (expected A)");
        t->items.push_back(std::nullopt);
      } else if (const json *tok = optional(piece, "SpecialToken")) {
        expectObject(*tok, pp + ".SpecialToken");
        std::string id = stringField(*tok, pp + ".SpecialToken", "id");
        auto it = special.find(id);
        if (it == special.end())
          fail(pp + ".SpecialToken.id", "'" + id + "' is not in " + sp);
        std::string ep = sp + "['" + shortText(id) + "']";
        expectObject(*it, ep);
        const json &ids = member(*it, ep, "ids");
        if (!ids.is_array())
          fail(ep + ".ids",
               std::string("expected an array, got ") + typeName(ids));
        std::vector<uint32_t> list;
        for (size_t k = 0; k < ids.size(); ++k)
          list.push_back(asId(ids[k], index(ep + ".ids", k)));
        t->items.push_back(std::move(list));
      } else {
        fail(pp, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
    }
    return t;
  }
  unsupportedType(path, type,
                  "ByteLevel, TemplateProcessing, BertProcessing, "
                  "RobertaProcessing, Sequence");
}

} // namespace mtc::tok::hf
