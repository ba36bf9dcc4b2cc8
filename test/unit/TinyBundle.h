//===- TinyBundle.h - A small hand-built bundle for unit tests --*- C++ -*-===//
//
// Part of mtc. The bundle the validator and the executor's decoder are
// tested on: tokens -> embedding -> `count` instances of layer Block ->
// linear cross-entropy, where Block is param_ref w, one op `mid` of (x, w)
// and a fused add of its result and x. Every op's location is m.mt:1:1.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_TEST_UNIT_TINYBUNDLE_H
#define MTC_TEST_UNIT_TINYBUNDLE_H

#include "lib/Bundle/Bundle.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mtc::bundle::tiny {

inline ValueType f32(Shape s) { return {std::move(s), DType::F32}; }

inline Op op(std::string name, std::vector<int> operands,
             std::vector<int> results, std::string symbol = "") {
  Op o;
  o.name = std::move(name);
  o.operands = std::move(operands);
  o.results = std::move(results);
  o.symbol = std::move(symbol);
  o.loc = "m.mt:1:1";
  return o;
}

/// Block's middle op and its weight.
struct TinyLayer {
  int64_t count = 1;
  std::string mid = "matmul";  ///< op of (x, w)
  Shape weight = {4, 4};       ///< w's shape
  std::string init = "normal"; ///< w's initialiser
  std::vector<double> initArgs = {0.02};
  std::map<std::string, Attr> midAttrs;
};

inline Bundle tinyBundle(const TinyLayer &t) {
  Bundle b;
  b.model = "M";
  b.params = {Param{"emb", {8, 4}, DType::F32, "normal", {0.02}}};
  Function fwd;
  fwd.values = {
      {{kDimB, kDimS}, DType::I32}, {{kDimB, kDimS}, DType::I32}, f32({8, 4}),
      f32({kDimB, kDimS, 4}),       f32({kDimB, kDimS, 4}),       f32({})};
  fwd.args = {0, 1};
  fwd.ops = {op("param_ref", {}, {2}, "emb"), op("embedding", {0, 2}, {3}),
             op("apply_layers", {3}, {4}, "Block"),
             op("linear_cross_entropy", {4, 2, 1}, {5})};
  fwd.ops[2].attrs = {{"first", int64_t(0)}, {"count", t.count}};
  fwd.ops[3].attrs = {{"transpose_weight", true}};
  fwd.results = {5};
  b.functions["forward"] = fwd;

  Layer l;
  l.name = "Block";
  l.count = t.count;
  l.params = {Param{"w", t.weight, DType::F32, t.init, t.initArgs}};
  Function lf;
  lf.values = {f32({kDimB, kDimS, 4}), f32(t.weight), f32({kDimB, kDimS, 4}),
               f32({kDimB, kDimS, 4})};
  lf.args = {0};
  lf.ops = {op("param_ref", {}, {1}, "w"), op(t.mid, {0, 1}, {2}),
            op("fused", {2, 0}, {3})};
  for (const auto &[name, value] : t.midAttrs)
    lf.ops[1].attrs[name] = value;
  auto body = std::make_shared<Function>();
  body->values = {f32({kDimB, kDimS, 4}), f32({kDimB, kDimS, 4}),
                  f32({kDimB, kDimS, 4})};
  body->args = {0, 1};
  body->ops = {op("add", {0, 1}, {2})};
  body->results = {2};
  lf.ops[2].region = body;
  lf.results = {3};
  l.functions["forward"] = lf;
  b.layers.push_back(l);
  return b;
}

inline Function &layerForward(Bundle &b) {
  return b.layers[0].functions["forward"];
}

} // namespace mtc::bundle::tiny

#endif // MTC_TEST_UNIT_TINYBUNDLE_H
