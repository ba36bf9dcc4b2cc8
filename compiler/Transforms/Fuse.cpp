//===- Fuse.cpp - Elementwise chains into mt.fused regions ------*- C++ -*-===//
//
// Part of mtc. Implements -mtc-fuse (see Passes.td for the rules).
//
// Algorithm, per block:
//   1. Walk the ops in order. For a fusable op (elementwise, f32 result),
//      look at the clusters of its operands' producers, latest first, and
//      join the first that satisfies rules 1-3; otherwise start a cluster if
//      the op's own operands are valid inputs for its result shape.
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

/// Whether \p v can be read by a region whose iteration shape is \p it.
bool isValidInput(Value v, const mtc::Shape &it) {
  auto t = dyn_cast<MtTensorType>(v.getType());
  if (!t || !t.isFloat())
    return false;
  mtc::Shape s = t.getShapeVector();
  if (s == it)
    return true;
  if (llvm::any_of(s, mtc::isSymbolic) || s.size() > it.size())
    return false;
  int64_t numel = 1;
  for (int64_t d : s)
    numel *= d;
  return numel == 1 || std::equal(s.begin(), s.end(), it.end() - s.size());
}

struct Cluster {
  mtc::Shape shape;
  SmallVector<Operation *> ops; ///< in block order
  llvm::SmallPtrSet<Operation *, 16> members;
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
      if (!isValidInput(v, it))
        return false;
    }
    return true;
  }

  void visit(Operation *op) {
    if (!candidate(op))
      return;
    mtc::Shape it = shapeOf(op->getResult(0));
    // Producer clusters, latest first.
    SmallVector<unsigned> cands;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp()) {
        auto found = clusterOf.find(def);
        if (found != clusterOf.end() && !llvm::is_contained(cands, found->second))
          cands.push_back(found->second);
      }
    llvm::sort(cands, [&](unsigned a, unsigned b) {
      return position[clusters[a].ops.back()] > position[clusters[b].ops.back()];
    });
    for (unsigned id : cands) {
      Cluster &c = clusters[id];
      if (c.shape != it || !operandsFit(op, &c, it) || !noEarlyOutsideUse(c, op))
        continue;
      c.ops.push_back(op);
      c.members.insert(op);
      clusterOf[op] = id;
      return;
    }
    if (!operandsFit(op, nullptr, it))
      return;
    Cluster c;
    c.shape = it;
    c.ops.push_back(op);
    c.members.insert(op);
    clusterOf[op] = clusters.size();
    clusters.push_back(std::move(c));
  }

  void build(Cluster &c) {
    llvm::SetVector<Value> inputs;
    SmallVector<Value> results;
    for (Operation *op : c.ops)
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if ((def && c.members.contains(def)) || isa_and_nonnull<ConstantOp>(def))
          continue;
        inputs.insert(v);
      }
    for (Operation *op : c.ops)
      if (llvm::any_of(op->getResult(0).getUsers(), [&](Operation *u) {
            return !c.members.contains(u);
          }))
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
