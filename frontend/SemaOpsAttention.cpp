//===- SemaOpsAttention.cpp - Attention and mixture-of-experts ops --------===//
//
// Part of mtc. The rules of the Attention family (rope and its llama3
// scaling, attention) and of the Moe family (the expert, top_k and the
// expert's input width) of DslOps.def. Arguments are bound in SemaOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/SemaOpCall.h"

#include <algorithm>
#include <cmath>

namespace mtc::sema {

/// rope, attention.
std::vector<Val> Checker::checkAttentionOp(OpCall &c) {
  switch (c.kind) {
  case OpKind::Rope: {
    double theta = 0, fraction = 1.0;
    if (c.number(1, 0, theta))
      c.positive(1, theta, false);
    c.number(2, 1.0, fraction);
    std::vector<std::pair<std::string, AttrValue>> attrs;
    if (const ast::Expr *s = c.bound[3]) {
      static const char *names[] = {"factor", "low_freq_factor",
                                    "high_freq_factor",
                                    "original_max_position"};
      const char *usage = "rope scaling must be llama3(factor, "
                          "low_freq_factor, high_freq_factor, "
                          "original_max_position)";
      if (s->kind != ast::Expr::Kind::Call || s->text != "llama3" || s->index ||
          s->operands.size() + s->named.size() != 4) {
        rep.error(s->loc, usage);
        c.ok = false;
      } else {
        const ast::Expr *args[4] = {nullptr, nullptr, nullptr, nullptr};
        for (size_t i = 0; i < s->operands.size(); ++i)
          args[i] = s->operands[i].get();
        for (const ast::NamedArg &n : s->named) {
          auto it = std::find(std::begin(names), std::end(names), n.name);
          size_t idx = static_cast<size_t>(it - std::begin(names));
          if (it == std::end(names) || args[idx]) {
            rep.error(n.loc,
                      it == std::end(names)
                          ? "'llama3' has no argument named '" + n.name + "'"
                          : "argument '" + n.name +
                                "' of 'llama3' is given twice");
            c.ok = false;
            continue;
          }
          args[idx] = n.value.get();
        }
        attrs.push_back({"scaling", AttrValue(std::string("llama3"))});
        for (size_t i = 0; i < 4 && c.ok; ++i) {
          if (!args[i]) {
            rep.error(s->loc, usage);
            c.ok = false;
            break;
          }
          if (i == 3) {
            int64_t n = 0;
            if (!evalInt(*args[i], names[i], 1, kMaxExactInt, n))
              c.ok = false;
            attrs.push_back({names[i], AttrValue(n)});
            continue;
          }
          ConfigValue cv;
          if (!evalConst(*args[i], cv)) {
            c.ok = false;
            continue;
          }
          if (!(cv.value > 0)) {
            rep.error(args[i]->loc, std::string("llama3 ") + names[i] +
                                        " must be positive, got " +
                                        formatNumber(cv.value));
            c.ok = false;
          }
          attrs.push_back({names[i], AttrValue(cv.value)});
        }
      }
    }
    if (!c.ok || !c.requireFloat(c.ids[0]))
      return c.failed();
    if (Status s = rules::rope(c.type(c.ids[0]).shape, fraction); !s) {
      c.shapeError(s.message());
      return c.failed();
    }
    std::vector<std::pair<std::string, AttrValue>> ropeAttrs = {
        {"theta", AttrValue(theta)}, {"fraction", AttrValue(fraction)}};
    ropeAttrs.insert(ropeAttrs.end(), attrs.begin(), attrs.end());
    attrs = std::move(ropeAttrs);
    return c.one(c.emit({c.ids[0]}, {c.type(c.ids[0])}, {}, std::move(attrs)));
  }
  case OpKind::Attention: {
    bool causal = true;
    int64_t window = 0;
    double softcap = 0, scale = 0;
    c.boolean(3, true, causal);
    c.integer(4, 0, 0, window);
    if (c.number(5, 0.0, softcap))
      c.positive(5, softcap, true);
    if (c.number(6, 0.0, scale))
      c.positive(6, scale, true);
    if (!c.ok || !c.requireFloat(c.ids[0]) || !c.requireFloat(c.ids[1]) ||
        !c.requireFloat(c.ids[2]))
      return c.failed();
    Expected<Shape> shape = rules::attention(
        c.type(c.ids[0]).shape, c.type(c.ids[1]).shape, c.type(c.ids[2]).shape);
    if (!shape) {
      c.shapeError(shape.message());
      return c.failed();
    }
    return c.one(c.emit({c.ids[0], c.ids[1], c.ids[2]},
                        {ValueType{*shape, DType::F32}}, {},
                        {{"causal", AttrValue(causal)},
                         {"window", AttrValue(window)},
                         {"softcap", AttrValue(softcap)},
                         {"scale", AttrValue(scale)}}));
  }
  default:
    break;
  }
  return c.unhandled();
}

/// moe: only in the forward of a layer that declares experts.
std::vector<Val> Checker::checkMoeOp(OpCall &c) {
  switch (c.kind) {
  case OpKind::Moe: {
    if (c.st.kind != ScopeKind::Layer) {
      rep.error(c.e.loc, "'moe' can only be used in the forward of a layer "
                         "that declares experts");
      return c.failed();
    }
    const LayerInfo &info = layers[c.st.layer];
    const Layer &layer = out.layers[c.st.layer];
    int expertIdx = -1;
    const ast::Expr *x = c.bound[2];
    if (x->kind != ast::Expr::Kind::Name) {
      rep.error(c.boundLoc[2], "the third argument of 'moe' must name an "
                               "expert of layer '" +
                                   layer.name + "'");
      c.ok = false;
    } else {
      auto it = info.experts.find(x->text);
      if (it == info.experts.end()) {
        std::vector<std::string> names;
        for (const auto &[n, i] : info.experts)
          names.push_back(n);
        rep.error(x->loc, "'" + x->text + "' is not an expert of layer '" +
                              layer.name + "'" + didYouMean(x->text, names));
        c.ok = false;
      } else {
        expertIdx = static_cast<int>(it->second);
      }
    }
    int64_t topK = 0;
    bool normalize = false;
    double auxLoss = 0;
    c.integer(3, 1, 1, topK);
    c.boolean(4, false, normalize);
    if (c.number(5, 0.0, auxLoss))
      c.positive(5, auxLoss, true);
    if (!c.ok || !c.requireFloat(c.ids[0]) || !c.requireFloat(c.ids[1]))
      return c.failed();
    const Expert &expert = layer.experts[expertIdx];
    if (expert.count <= 0)
      return c.failed(); // the expert count itself was reported
    if (topK > expert.count) {
      rep.error(c.boundLoc[3], "top_k " + std::to_string(topK) +
                                   " exceeds the " +
                                   plural(expert.count, "expert") + " of '" +
                                   expert.name + "'");
      return c.failed();
    }
    ValueType h = c.type(c.ids[0]);
    if (Status s = rules::moe(h.shape, c.type(c.ids[1]).shape, expert.count);
        !s) {
      c.shapeError(s.message());
      return c.failed();
    }
    if (info.expertSignatureOk[expertIdx] &&
        info.expertInput[expertIdx].shape[1] != h.shape[2]) {
      rep.error(c.e.loc, "expert '" + expert.name + "' takes " +
                             formatShape(info.expertInput[expertIdx].shape) +
                             " but the 'moe' input is " + formatShape(h.shape));
      return c.failed();
    }
    return c.one(c.emit({c.ids[0], c.ids[1]}, {h}, expert.name,
                        {{"top_k", AttrValue(topK)},
                         {"normalize", AttrValue(normalize)},
                         {"aux_loss", AttrValue(auxLoss)}}));
  }
  default:
    break;
  }
  return c.unhandled();
}

} // namespace mtc::sema
