//===- Fuse.cpp - Elementwise chains into mt.fused regions ------*- C++ -*-===//
//
// Part of mtc. Implements -mtc-fuse (see Passes.td for the rules).
//
// Algorithm, per block:
//   1. Walk the ops in order. For a fusable op (elementwise, f32 result, or a
//      reduction over a static last axis), look at the clusters of its
//      operands' producers, latest first, and join the first that satisfies
//      rules 1-4; otherwise start a cluster if the op's own operands are
//      valid inputs for its iteration shape. A cluster remembers its row ops
//      (reductions and the ops that read their values): an op that reads a
//      row value joins only as a row op (row-shaped result, other operands
//      row values, constants, scalars or inputs of its shape).
//   2. For every cluster with at least min-ops ops: inputs are the values it
//      reads from outside (constants excepted: they are cloned into the body),
//      results are its values used outside; build the mt.fused op right before
//      the cluster's last op, clone the ops into its body, redirect the
//      outside uses and erase the originals.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace mtc {
#define GEN_PASS_DEF_MTCFUSE
#include "compiler/Transforms/Passes.h.inc"
} // namespace mtc

using namespace mlir;
using namespace mtc;
using namespace mtc::mt;

namespace {

mtc::Shape shapeOf(Value v) {
  return cast<MtTensorType>(v.getType()).getShapeVector();
}

/// [R..., 1] for \p it = [R..., n].
mtc::Shape keepdimRow(mtc::Shape it) {
  if (!it.empty())
    it.back() = 1;
  return it;
}

/// Whether \p v can be read by a region whose iteration shape is \p it
/// (an [R..., 1] value is read per row: the last axis must be static).
bool isValidInput(Value v, const mtc::Shape &it) {
  auto t = dyn_cast<MtTensorType>(v.getType());
  if (!t || !t.isFloat())
    return false;
  mtc::Shape s = t.getShapeVector();
  if (s == it)
    return true;
  if (s.size() > it.size())
    return false;
  if (!it.empty() && s == keepdimRow(it) && !mtc::isSymbolic(it.back()))
    return true;
  if (llvm::any_of(s, mtc::isSymbolic))
    return false;
  int64_t numel = 1;
  for (int64_t d : s)
    numel *= d;
  return numel == 1 || std::equal(s.begin(), s.end(), it.end() - s.size());
}

/// Whether \p v can be read per row by a row op whose result shape is \p row.
bool isValidRowInput(Value v, const mtc::Shape &row) {
  auto t = dyn_cast<MtTensorType>(v.getType());
  if (!t || !t.isFloat())
    return false;
  mtc::Shape s = t.getShapeVector();
  if (s == row)
    return true;
  int64_t numel = 1;
  for (int64_t d : s)
    numel *= d;
  return numel == 1 && llvm::none_of(s, mtc::isSymbolic);
}

/// A reduction over the static last axis of its input.
bool isLastAxisReduction(Operation *op) {
  if (!FusedOp::isReduction(op))
    return false;
  mtc::Shape x = shapeOf(op->getOperand(0));
  return !x.empty() && !mtc::isSymbolic(x.back()) &&
         op->getAttrOfType<IntegerAttr>("axis").getInt() ==
             static_cast<int64_t>(x.size()) - 1;
}

struct Cluster {
  mtc::Shape shape;             ///< the iteration shape
  SmallVector<Operation *> ops; ///< in block order
  llvm::SmallPtrSet<Operation *, 16> members;
  llvm::SmallPtrSet<Operation *, 8> rowOps; ///< reductions and their readers
  /// Non-scalar outside values read per element / per row (never both).
  llvm::DenseSet<Value> elementInputs, rowInputs;

  bool isRowValue(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && rowOps.contains(def);
  }
  bool isMember(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && members.contains(def);
  }
  /// The two row shapes, [R...] and [R..., 1].
  bool isRowShape(const mtc::Shape &s) const {
    if (shape.empty())
      return false;
    mtc::Shape keep = shape, drop = shape;
    keep.back() = 1;
    drop.pop_back();
    return s == keep || s == drop;
  }
};

class BlockFuser {
public:
  BlockFuser(Block &block, unsigned minOps) : block(block), minOps(minOps) {
    for (auto [i, op] : llvm::enumerate(block))
      position[&op] = i;
  }

  /// Returns the number of regions built and of ops moved.
  std::pair<unsigned, unsigned> run() {
    for (Operation &op : block)
      visit(&op);
    unsigned regions = 0, moved = 0;
    for (Cluster &c : clusters)
      if (c.ops.size() >= minOps) {
        build(c);
        ++regions;
        moved += c.ops.size();
      }
    return {regions, moved};
  }

private:
  static bool candidate(Operation *op) {
    if (!FusedOp::isFusable(op) || isa<ConstantOp>(op) ||
        op->getNumResults() != 1)
      return false;
    if (FusedOp::isReduction(op) && !isLastAxisReduction(op))
      return false;
    auto t = dyn_cast<MtTensorType>(op->getResult(0).getType());
    return t && t.getElementType().isF32();
  }

  /// Rule 3: no value of \p c is used outside it before \p op.
  bool noEarlyOutsideUse(const Cluster &c, Operation *op) {
    size_t limit = position[op];
    for (Operation *member : c.ops)
      for (Operation *user : member->getResult(0).getUsers()) {
        if (user == op || c.members.contains(user))
          continue;
        if (user->getBlock() != &block || position[user] < limit)
          return false;
      }
    return true;
  }

  bool operandsFit(Operation *op, const Cluster *c, const mtc::Shape &it) {
    for (Value v : op->getOperands()) {
      if (c && v.getDefiningOp() && c->members.contains(v.getDefiningOp()))
        continue;
      if (isa_and_nonnull<ConstantOp>(v.getDefiningOp()))
        continue;
      if (!isValidInput(v, it) || (c && c->rowInputs.contains(v)))
        return false;
    }
    return true;
  }

  /// Rule 4 for an op that reads a row value of \p c: a row-shaped result,
  /// and every other operand a row value of that shape, a constant, or an
  /// outside value of that shape or a scalar.
  bool rowOpFits(Operation *op, const Cluster &c) {
    mtc::Shape r = shapeOf(op->getResult(0));
    if (!c.isRowShape(r))
      return false;
    for (Value v : op->getOperands()) {
      if (c.isRowValue(v)) {
        if (shapeOf(v) != r)
          return false;
        continue;
      }
      if (c.isMember(v))
        return false; // an element-phase value: not readable per row
      if (isa_and_nonnull<ConstantOp>(v.getDefiningOp()))
        continue;
      if (!isValidRowInput(v, r) || c.elementInputs.contains(v))
        return false;
    }
    return true;
  }

  void join(Cluster &c, unsigned id, Operation *op, bool row) {
    bool perRow = row && !FusedOp::isReduction(op);
    for (Value v : op->getOperands())
      if (!c.isMember(v) && !isa_and_nonnull<ConstantOp>(v.getDefiningOp()) &&
          !isValidRowInput(v, {}) && shapeOf(v) != keepdimRow(c.shape))
        (perRow ? c.rowInputs : c.elementInputs).insert(v);
    c.ops.push_back(op);
    c.members.insert(op);
    if (row)
      c.rowOps.insert(op);
    clusterOf[op] = id;
  }

  void visit(Operation *op) {
    if (!candidate(op))
      return;
    bool reduction = FusedOp::isReduction(op);
    // The iteration shape a cluster must have for this op as an element op.
    mtc::Shape it = shapeOf(reduction ? op->getOperand(0) : op->getResult(0));
    // Producer clusters, latest first.
    SmallVector<unsigned> cands;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp()) {
        auto found = clusterOf.find(def);
        if (found != clusterOf.end() &&
            !llvm::is_contained(cands, found->second))
          cands.push_back(found->second);
      }
    llvm::sort(cands, [&](unsigned a, unsigned b) {
      return position[clusters[a].ops.back()] >
             position[clusters[b].ops.back()];
    });
    for (unsigned id : cands) {
      Cluster &c = clusters[id];
      if (!noEarlyOutsideUse(c, op))
        continue;
      bool readsRow = llvm::any_of(op->getOperands(),
                                   [&](Value v) { return c.isRowValue(v); });
      if (readsRow) {
        // Rule 4: a row op (never a reduction of a row value, never a
        // broadcast back over the iteration shape).
        if (reduction || !rowOpFits(op, c))
          continue;
        join(c, id, op, /*row=*/true);
        return;
      }
      if (c.shape != it || !operandsFit(op, &c, it))
        continue;
      join(c, id, op, /*row=*/reduction);
      return;
    }
    if (!operandsFit(op, nullptr, it))
      return;
    Cluster c;
    c.shape = it;
    clusters.push_back(std::move(c));
    join(clusters.back(), clusters.size() - 1, op, /*row=*/reduction);
  }

  void build(Cluster &c) {
    llvm::SetVector<Value> inputs;
    SmallVector<Value> results;
    for (Operation *op : c.ops)
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if ((def && c.members.contains(def)) ||
            isa_and_nonnull<ConstantOp>(def))
          continue;
        inputs.insert(v);
      }
    for (Operation *op : c.ops)
      if (llvm::any_of(op->getResult(0).getUsers(),
                       [&](Operation *u) { return !c.members.contains(u); }))
        results.push_back(op->getResult(0));

    Operation *last = c.ops.back();
    OpBuilder b(last);
    SmallVector<Type> resultTypes;
    for (Value r : results)
      resultTypes.push_back(r.getType());
    auto fused = FusedOp::create(b, last->getLoc(), resultTypes,
                                 inputs.getArrayRef(), StringAttr());
    Block *body = b.createBlock(&fused.getBody());
    IRMapping map;
    for (Value in : inputs)
      map.map(in, body->addArgument(in.getType(), in.getLoc()));
    b.setInsertionPointToEnd(body);
    for (Operation *op : c.ops) {
      for (Value v : op->getOperands())
        if (auto cst = dyn_cast_or_null<ConstantOp>(v.getDefiningOp()))
          if (!map.contains(v))
            map.map(v, b.clone(*cst)->getResult(0));
      b.clone(*op, map);
    }
    SmallVector<Value> yielded;
    for (Value r : results)
      yielded.push_back(map.lookup(r));
    YieldOp::create(b, last->getLoc(), yielded);

    for (auto [r, f] : llvm::zip(results, fused.getResults()))
      r.replaceUsesWithIf(f, [&](OpOperand &use) {
        return !c.members.contains(use.getOwner());
      });
    for (Operation *op : llvm::reverse(c.ops))
      op->erase();
  }

  Block &block;
  unsigned minOps;
  llvm::DenseMap<Operation *, size_t> position;
  llvm::DenseMap<Operation *, unsigned> clusterOf;
  std::vector<Cluster> clusters;
};

struct MtcFusePass : public mtc::impl::MtcFuseBase<MtcFusePass> {
  using MtcFuseBase::MtcFuseBase;

  void runOnOperation() override {
    SmallVector<func::FuncOp> funcs;
    getOperation().walk([&](func::FuncOp fn) { funcs.push_back(fn); });
    for (func::FuncOp fn : funcs) {
      if (fn.isExternal())
        continue;
      auto [regions, moved] =
          BlockFuser(fn.getBody().front(), std::max(1u, unsigned(minOps)))
              .run();
      numRegions += regions;
      numFusedOps += moved;
    }
    // Constants whose every use moved into regions are dead now.
    getOperation().walk([&](ConstantOp c) {
      if (c->use_empty() && !isa<FusedOp>(c->getParentOp()))
        c->erase();
    });
  }
};

} // namespace
