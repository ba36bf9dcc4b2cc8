//===- SemaOpsMath.cpp - Linear, elementwise, reduction, norm, loss ops ---===//
//
// Part of mtc. The rules of the Linear, Elementwise, Reduction, Norm and Loss
// families of DslOps.def: dtypes, shape inference with lib/Support/Shape.h
// and the attributes MLIRGen reads. Arguments are bound in SemaOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/SemaOpCall.h"

#include <algorithm>
#include <cmath>

namespace mtc::sema {

/// embedding, matmul.
std::vector<Val> Checker::checkLinearOp(OpCall &c) {
  switch (c.kind) {
  case OpKind::Embedding: {
    if (!c.ok)
      return c.failed();
    ValueType ids_ = c.type(c.ids[0]);
    if (ids_.dtype != DType::I32) {
      rep.error(c.e.loc, "'embedding' ids must be i32, got " +
                             std::string(dtypeName(ids_.dtype)));
      return c.failed();
    }
    if (!c.requireFloat(c.ids[1]))
      return c.failed();
    Expected<Shape> shape =
        rules::embedding(ids_.shape, c.type(c.ids[1]).shape);
    if (!shape) {
      c.shapeError(shape.message());
      return c.failed();
    }
    return c.one(c.emit({c.ids[0], c.ids[1]}, {ValueType{*shape, DType::F32}}));
  }
  case OpKind::MatMul: {
    if (!c.ok || !c.requireFloat(c.ids[0]) || !c.requireFloat(c.ids[1]) ||
        !c.requireFloat(c.ids[2]))
      return c.failed();
    Shape bias;
    if (c.ids[2] >= 0)
      bias = c.type(c.ids[2]).shape;
    Expected<Shape> shape =
        rules::matmul(c.type(c.ids[0]).shape, c.type(c.ids[1]).shape,
                      c.ids[2] >= 0 ? &bias : nullptr);
    if (!shape) {
      c.shapeError(shape.message());
      return c.failed();
    }
    std::vector<int> operands = {c.ids[0], c.ids[1]};
    if (c.ids[2] >= 0)
      operands.push_back(c.ids[2]);
    return c.one(c.emit(operands, {ValueType{*shape, DType::F32}}));
  }
  default:
    break;
  }
  return c.unhandled();
}

/// The unary activations, gelu, softcap (the infix operators are checked
/// by Checker::evalBinary).
std::vector<Val> Checker::checkElementwiseOp(OpCall &c) {
  switch (c.kind) {
  case OpKind::Neg:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Silu:
  case OpKind::Relu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Rsqrt:
  case OpKind::Sqrt:
  case OpKind::Square:
  case OpKind::Relu2: {
    if (!c.ok || !c.requireFloat(c.ids[0]))
      return c.failed();
    return c.one(c.emit({c.ids[0]}, {c.type(c.ids[0])}));
  }
  case OpKind::Gelu: {
    std::string approximate;
    c.string(1, "none", approximate);
    if (c.ok && approximate != "none" && approximate != "tanh") {
      rep.error(c.boundLoc[1], "'gelu' approximate must be \"none\" or "
                               "\"tanh\", got \"" +
                                   approximate + "\"");
      c.ok = false;
    }
    if (!c.ok || !c.requireFloat(c.ids[0]))
      return c.failed();
    return c.one(c.emit({c.ids[0]}, {c.type(c.ids[0])}, {},
                        {{"approximate", AttrValue(approximate)}}));
  }
  case OpKind::Softcap: {
    double cap = 0;
    if (c.number(1, 0, cap))
      c.positive(1, cap, false);
    if (!c.ok || !c.requireFloat(c.ids[0]))
      return c.failed();
    return c.one(
        c.emit({c.ids[0]}, {c.type(c.ids[0])}, {}, {{"cap", AttrValue(cap)}}));
  }
  default:
    break;
  }
  return c.unhandled();
}

/// sum, mean, max along an axis; softmax.
std::vector<Val> Checker::checkReductionOp(OpCall &c) {
  switch (c.kind) {
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::Max: {
    int64_t axis = 0;
    bool keepdim = false;
    c.integer(1, 0, -kMaxDim, axis);
    c.boolean(2, false, keepdim);
    if (!c.ok || !c.requireFloat(c.ids[0]))
      return c.failed();
    const Shape x = c.type(c.ids[0]).shape;
    Expected<size_t> normAxis = rules::axis(axis, x.size());
    if (!normAxis) {
      c.shapeError(normAxis.message());
      return c.failed();
    }
    Expected<Shape> shape = rules::reduce(x, axis, keepdim);
    if (!shape) {
      c.shapeError(shape.message());
      return c.failed();
    }
    return c.one(c.emit({c.ids[0]}, {ValueType{*shape, DType::F32}}, {},
                        {{"axis", AttrValue(static_cast<int64_t>(*normAxis))},
                         {"keepdim", AttrValue(keepdim)}}));
  }
  case OpKind::Softmax: {
    int64_t axis = -1;
    c.integer(1, -1, -kMaxDim, axis);
    if (!c.ok || !c.requireFloat(c.ids[0]))
      return c.failed();
    Expected<size_t> normAxis =
        rules::axis(axis, c.type(c.ids[0]).shape.size());
    if (!normAxis) {
      c.shapeError(normAxis.message() + " of " +
                   formatShape(c.type(c.ids[0]).shape));
      return c.failed();
    }
    return c.one(
        c.emit({c.ids[0]}, {c.type(c.ids[0])}, {},
               {{"axis", AttrValue(static_cast<int64_t>(*normAxis))}}));
  }
  default:
    break;
  }
  return c.unhandled();
}

/// rmsnorm, layernorm.
std::vector<Val> Checker::checkNormOp(OpCall &c) {
  switch (c.kind) {
  case OpKind::RmsNorm:
  case OpKind::LayerNorm: {
    bool rms = c.kind == OpKind::RmsNorm;
    size_t epsIdx = rms ? 2 : 3;
    double eps = 0, offset = 0;
    if (c.number(epsIdx, 0, eps))
      c.positive(epsIdx, eps, false);
    if (rms)
      c.number(3, 0.0, offset);
    int bias = rms ? -1 : c.ids[2];
    if (!c.ok || !c.requireFloat(c.ids[0]) || !c.requireFloat(c.ids[1]) ||
        !c.requireFloat(bias))
      return c.failed();
    Shape b;
    if (bias >= 0)
      b = c.type(bias).shape;
    const Shape x = c.type(c.ids[0]).shape;
    if (Status s =
            rules::norm(x, c.type(c.ids[1]).shape, bias >= 0 ? &b : nullptr);
        !s) {
      c.shapeError(s.message());
      return c.failed();
    }
    std::vector<int> operands = {c.ids[0], c.ids[1]};
    if (bias >= 0)
      operands.push_back(bias);
    std::vector<std::pair<std::string, AttrValue>> attrs = {
        {"eps", AttrValue(eps)}};
    if (rms)
      attrs.push_back({"offset", AttrValue(offset)});
    return c.one(
        c.emit(operands, {ValueType{x, DType::F32}}, {}, std::move(attrs)));
  }
  default:
    break;
  }
  return c.unhandled();
}

/// cross_entropy.
std::vector<Val> Checker::checkLossOp(OpCall &c) {
  switch (c.kind) {
  case OpKind::CrossEntropy: {
    int64_t ignoreIndex = -100;
    if (c.bound[2] && !evalInt(*c.bound[2], "ignore_index", -kMaxExactInt,
                               kMaxExactInt, ignoreIndex))
      c.ok = false;
    if (!c.ok || !c.requireFloat(c.ids[0]))
      return c.failed();
    ValueType targets = c.type(c.ids[1]);
    if (targets.dtype != DType::I32) {
      rep.error(c.e.loc, "'cross_entropy' targets must be i32, got " +
                             std::string(dtypeName(targets.dtype)));
      return c.failed();
    }
    if (Status s = rules::crossEntropy(c.type(c.ids[0]).shape, targets.shape);
        !s) {
      c.shapeError(s.message());
      return c.failed();
    }
    return c.one(c.emit({c.ids[0], c.ids[1]}, {ValueType{{}, DType::F32}}, {},
                        {{"ignore_index", AttrValue(ignoreIndex)}}));
  }
  default:
    break;
  }
  return c.unhandled();
}

} // namespace mtc::sema
