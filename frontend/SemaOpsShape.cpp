//===- SemaOpsShape.cpp - Shape and movement ops --------------------------===//
//
// Part of mtc. The rules of the Shape family of DslOps.def (reshape,
// transpose, split, concat, slice): target shapes, axes, result counts, and
// the attributes MLIRGen reads. Arguments are bound in SemaOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/SemaOpCall.h"

#include <algorithm>
#include <cmath>

namespace mtc::sema {

/// reshape, transpose, split, concat, slice.
std::vector<Val> Checker::checkShapeOp(OpCall &c) {
  switch (c.kind) {
  case OpKind::Reshape: {
    Shape target;
    if (c.bound[1]->kind != ast::Expr::Kind::List) {
      rep.error(c.boundLoc[1],
                c.argName(1) + " must be a shape such as [B, S, n_heads, 64]");
      c.ok = false;
    } else {
      for (const auto &d : c.bound[1]->operands) {
        Dim v = 1;
        if (!d || !evalDim(*d, c.dimContext(), "", v))
          c.ok = false;
        target.push_back(v);
      }
    }
    if (!c.ok)
      return c.failed();
    ValueType x = c.type(c.ids[0]);
    if (Status s = rules::reshape(x.shape, target); !s) {
      c.shapeError(s.message());
      return c.failed();
    }
    return c.one(c.emit({c.ids[0]}, {ValueType{target, x.dtype}}));
  }
  case OpKind::Transpose: {
    std::vector<int64_t> perm;
    c.intList(1, -kMaxDim, perm);
    if (!c.ok)
      return c.failed();
    ValueType x = c.type(c.ids[0]);
    int64_t rank = static_cast<int64_t>(x.shape.size());
    if (!c.bound[1]) {
      if (rank < 2) {
        c.shapeError("transpose needs at least 2 dimensions, got " +
                     formatShape(x.shape));
        return c.failed();
      }
      for (int64_t i = 0; i < rank; ++i)
        perm.push_back(i);
      std::swap(perm[rank - 1], perm[rank - 2]);
    } else {
      for (int64_t &p : perm)
        if (p < 0 && p >= -rank)
          p += rank;
    }
    Expected<Shape> shape = rules::transpose(x.shape, perm);
    if (!shape) {
      c.shapeError(shape.message());
      return c.failed();
    }
    return c.one(c.emit({c.ids[0]}, {ValueType{*shape, x.dtype}}, {},
                        {{"perm", AttrValue(perm)}}));
  }
  case OpKind::Split: {
    std::vector<int64_t> sizes;
    int64_t axis = -1;
    c.intList(1, 1, sizes);
    c.integer(2, -1, -kMaxDim, axis);
    if (c.ok && c.wanted == 0 && sizes.size() != 1) {
      rep.error(c.e.loc, "'split' produces " + plural(sizes.size(), "value") +
                             "; assign them with 'a, b = split(...)'");
      c.ok = false;
    } else if (c.ok && c.wanted > 0 && sizes.size() != c.wanted) {
      rep.error(c.e.loc, "'split' produces " + plural(sizes.size(), "value") +
                             " but " + plural(c.wanted, "name") +
                             (c.wanted == 1 ? " is" : " are") + " assigned");
      c.ok = false;
    }
    if (!c.ok)
      return c.failed();
    ValueType x = c.type(c.ids[0]);
    Expected<size_t> normAxis = rules::axis(axis, x.shape.size());
    if (!normAxis) {
      c.shapeError(normAxis.message() + " of " + formatShape(x.shape));
      return c.failed();
    }
    Expected<std::vector<Shape>> shapes = rules::split(x.shape, sizes, axis);
    if (!shapes) {
      c.shapeError(shapes.message());
      return c.failed();
    }
    std::vector<ValueType> types;
    for (Shape &s : *shapes)
      types.push_back(ValueType{std::move(s), x.dtype});
    int first = c.emit({c.ids[0]}, std::move(types), {},
                       {{"sizes", AttrValue(sizes)},
                        {"axis", AttrValue(static_cast<int64_t>(*normAxis))}});
    std::vector<Val> results;
    for (size_t i = 0; i < sizes.size(); ++i)
      results.push_back(Val::tensor(first + static_cast<int>(i)));
    return results;
  }
  case OpKind::Concat: {
    int64_t axis = -1;
    c.integer(0, -1, -kMaxDim, axis);
    if (!c.ok)
      return c.failed();
    std::vector<Shape> shapes;
    DType dtype = c.type(c.inputs[0]).dtype;
    for (int id : c.inputs) {
      if (c.type(id).dtype != dtype) {
        rep.error(c.e.loc, "'concat' c.inputs must have the same dtype, got " +
                               std::string(dtypeName(dtype)) + " and " +
                               dtypeName(c.type(id).dtype));
        return c.failed();
      }
      shapes.push_back(c.type(id).shape);
    }
    Expected<size_t> normAxis = rules::axis(axis, shapes[0].size());
    if (!normAxis) {
      c.shapeError(normAxis.message() + " of " + formatShape(shapes[0]));
      return c.failed();
    }
    Expected<Shape> shape = rules::concat(shapes, axis);
    if (!shape) {
      c.shapeError(shape.message());
      return c.failed();
    }
    return c.one(
        c.emit(c.inputs, {ValueType{*shape, dtype}}, {},
               {{"axis", AttrValue(static_cast<int64_t>(*normAxis))}}));
  }
  case OpKind::Slice: {
    int64_t axis = 0, start = 0, end = 0;
    c.integer(1, 0, -kMaxDim, axis);
    c.integer(2, 0, 0, start);
    // `end` may be S: the first S rows of a static axis (a learned position
    // table); whether S fits is checked when S is bound.
    const ast::Expr *endArg = c.bound[3];
    if (endArg && endArg->kind == ast::Expr::Kind::Name &&
        reservedDimMeaning(endArg->text)) {
      if (symbolicDimByName(endArg->text) != kDimS ||
          c.st.kind == ScopeKind::Expert) {
        rep.error(c.boundLoc[3], c.argName(3) +
                                     " may be S (the sequence length) "
                                     "in a model or layer forward, not " +
                                     endArg->text);
        c.ok = false;
      }
      end = kDimS;
    } else {
      c.integer(3, 0, 0, end);
    }
    if (!c.ok)
      return c.failed();
    ValueType x = c.type(c.ids[0]);
    Expected<size_t> normAxis = rules::axis(axis, x.shape.size());
    if (!normAxis) {
      c.shapeError(normAxis.message() + " of " + formatShape(x.shape));
      return c.failed();
    }
    Expected<Shape> shape = rules::slice(x.shape, axis, start, end);
    if (!shape) {
      c.shapeError(shape.message());
      return c.failed();
    }
    return c.one(c.emit({c.ids[0]}, {ValueType{*shape, x.dtype}}, {},
                        {{"axis", AttrValue(static_cast<int64_t>(*normAxis))},
                         {"start", AttrValue(start)},
                         {"end", AttrValue(end)}}));
  }
  default:
    break;
  }
  return c.unhandled();
}

} // namespace mtc::sema
