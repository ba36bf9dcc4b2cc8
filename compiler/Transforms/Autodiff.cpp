//===- Autodiff.cpp - Reverse-mode autodiff into backward functions -------===//
//
// Part of mtc. Implements -mtc-autodiff (see Passes.td).
//
// Algorithm, per function (a layer's @forward, or the model's @forward):
//   1. Create the new function and clone the forward body into it
//      (recomputation from the saved input; later passes may instead keep
//      intermediates).
//   2. Mark active values: float values that depend on a float argument, on a
//      parameter (mt.param_ref) or on a layer application.
//   3. Seed the adjoint of the returned value (layer: %dy argument; model:
//      dloss = 1).
//   4. Walk the cloned ops in reverse; for each op whose results have
//      adjoints, emit its vector-Jacobian product and add the contributions
//      to the operands' adjoints (mt.add where a value is used several times).
//   5. Emit mt.param_grad for every parameter read with an adjoint; return
//      the input's adjoint (layer) or the loss (model).
//   6. Erase recomputed ops that nothing uses.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mtc {
#define GEN_PASS_DEF_MTCAUTODIFF
#include "compiler/Transforms/Passes.h.inc"
} // namespace mtc

using namespace mlir;
using namespace mtc;
using namespace mtc::mt;

namespace {

MtTensorType tensorOf(Value v) { return cast<MtTensorType>(v.getType()); }

/// The f32 gradient type of \p v.
MtTensorType gradType(Value v) {
  MtTensorType t = tensorOf(v);
  return MtTensorType::get(t.getContext(), t.getShape(),
                           Float32Type::get(t.getContext()));
}

MtTensorType withShape(MLIRContext *ctx, ArrayRef<int64_t> shape) {
  return MtTensorType::get(ctx, shape, Float32Type::get(ctx));
}

/// Builds one reverse sweep.
class ReverseSweep {
public:
  ReverseSweep(OpBuilder &b, unsigned &numGradOps)
      : b(b), numGradOps(numGradOps) {}

  /// Marks which values carry gradients.
  void markActive(ArrayRef<Operation *> ops, ValueRange floatArgs) {
    for (Value a : floatArgs)
      if (tensorOf(a).isFloat())
        active.insert(a);
    for (Operation *op : ops) {
      bool isSource = isa<ParamRefOp, ApplyLayersOp>(op);
      bool anyActive = llvm::any_of(
          op->getOperands(), [&](Value v) { return active.contains(v); });
      if (!isSource && !anyActive)
        continue;
      for (Value r : op->getResults())
        if (isa<MtTensorType>(r.getType()) && tensorOf(r).isFloat())
          active.insert(r);
    }
  }

  void seed(Value v, Value adj) { adjoint[v] = adj; }
  Value adjointOf(Value v) const { return adjoint.lookup(v); }

  /// Emits the VJPs of \p ops (in reverse). Fails on an op without a rule.
  LogicalResult run(ArrayRef<Operation *> ops) {
    for (Operation *op : llvm::reverse(ops)) {
      bool hasAdjoint = llvm::any_of(
          op->getResults(), [&](Value r) { return adjoint.count(r) != 0; });
      // Layer applications always run their backward: their parameters need
      // gradients even when the output's adjoint is missing (it never is for
      // a model whose loss depends on the layers).
      if (!hasAdjoint)
        continue;
      b.setInsertionPointToEnd(op->getBlock());
      if (failed(vjp(op)))
        return failure();
    }
    return success();
  }

private:
  template <typename OpTy, typename... Args>
  OpTy create(Location loc, Args &&...args) {
    ++numGradOps;
    return OpTy::create(b, loc, std::forward<Args>(args)...);
  }

  /// Adds \p contribution to the adjoint of \p v (if v is active).
  void accumulate(Value v, Value contribution) {
    if (!active.contains(v) || !contribution)
      return;
    // Bring the contribution to v's shape (broadcast operands).
    MtTensorType target = gradType(v);
    if (tensorOf(contribution).getShape() != target.getShape())
      contribution = create<ReduceToOp>(v.getLoc(), target, contribution);
    auto it = adjoint.find(v);
    if (it == adjoint.end()) {
      adjoint[v] = contribution;
      return;
    }
    it->second = create<AddOp>(v.getLoc(), target, it->second, contribution);
  }

  /// The adjoint of result \p r, or zeros if it has none.
  Value adjOrZeros(Value r) {
    if (Value a = adjoint.lookup(r))
      return a;
    return create<ZerosOp>(r.getLoc(), gradType(r));
  }

  Value transposeLastTwo(Location loc, Value v) {
    MtTensorType t = tensorOf(v);
    int64_t rank = t.getRank();
    SmallVector<int64_t> perm(rank), shape(t.getShape());
    for (int64_t i = 0; i < rank; ++i)
      perm[i] = i;
    std::swap(perm[rank - 1], perm[rank - 2]);
    std::swap(shape[rank - 1], shape[rank - 2]);
    return create<TransposeOp>(
        loc, MtTensorType::get(t.getContext(), shape, t.getElementType()), v,
        b.getDenseI64ArrayAttr(perm));
  }

  /// The VJP of an op computing f(x) for a function of UnaryFns.def:
  /// dx = unary_grad f (x, dy).
  LogicalResult unaryGrad(Operation *op, const UnaryFnCall &f) {
    Value x = op->getOperand(0), dy = adjOrZeros(op->getResult(0));
    if (!active.contains(x))
      return success();
    accumulate(x, create<UnaryGradOp>(op->getLoc(), gradType(x),
                                      UnaryFnAttr::get(b.getContext(), f.fn), x,
                                      dy, b.getF64FloatAttr(f.param)));
    return success();
  }

  LogicalResult vjp(Operation *op) {
    Location loc = op->getLoc();
    MLIRContext *ctx = op->getContext();
    // neg's VJP is a neg (below); unary_grad has none.
    if (std::optional<UnaryFnCall> f = getUnaryFnCall(op);
        f && !f->grad && !isa<NegOp>(op))
      return unaryGrad(op, *f);
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case<ConstantOp, ParamRefOp, ZerosOp>(
            [&](Operation *) { return success(); })
        .Case<AddOp>([&](AddOp o) {
          Value dy = adjOrZeros(o.getResult());
          accumulate(o.getLhs(), dy);
          accumulate(o.getRhs(), dy);
          return success();
        })
        .Case<SubOp>([&](SubOp o) {
          Value dy = adjOrZeros(o.getResult());
          accumulate(o.getLhs(), dy);
          if (active.contains(o.getRhs()))
            accumulate(o.getRhs(), create<NegOp>(loc, dy.getType(), dy));
          return success();
        })
        .Case<MulOp>([&](MulOp o) {
          Value dy = adjOrZeros(o.getResult());
          Type t = dy.getType();
          if (active.contains(o.getLhs()))
            accumulate(o.getLhs(), create<MulOp>(loc, t, dy, o.getRhs()));
          if (active.contains(o.getRhs()))
            accumulate(o.getRhs(), create<MulOp>(loc, t, dy, o.getLhs()));
          return success();
        })
        .Case<DivOp>([&](DivOp o) {
          Value dy = adjOrZeros(o.getResult());
          Type t = dy.getType();
          Value q = create<DivOp>(loc, t, dy, o.getRhs());
          if (active.contains(o.getLhs()))
            accumulate(o.getLhs(), q);
          if (active.contains(o.getRhs())) {
            // d(a/b)/db = -(a/b)/b: contribution -q * y.
            Value qy = create<MulOp>(loc, t, q, o.getResult());
            accumulate(o.getRhs(), create<NegOp>(loc, t, qy));
          }
          return success();
        })
        .Case<MatMulOp>([&](MatMulOp o) {
          Value dy = adjOrZeros(o.getResult());
          Value a = o.getLhs(), w = o.getRhs();
          bool weightForm = tensorOf(w).getRank() == 2;
          if (active.contains(a)) {
            Value wt = transposeLastTwo(loc, w);
            accumulate(a, create<MatMulOp>(loc, gradType(a), dy, wt, Value()));
          }
          if (active.contains(w)) {
            if (weightForm) {
              accumulate(w, create<WeightGradOp>(loc, gradType(w), a, dy));
            } else {
              Value at = transposeLastTwo(loc, a);
              accumulate(w,
                         create<MatMulOp>(loc, gradType(w), at, dy, Value()));
            }
          }
          if (o.getBias() && active.contains(o.getBias()))
            accumulate(o.getBias(), dy);
          return success();
        })
        .Case<NegOp>([&](NegOp o) {
          Value dy = adjOrZeros(o.getResult());
          accumulate(o.getInput(), create<NegOp>(loc, dy.getType(), dy));
          return success();
        })
        .Case<SumOp, MeanOp, MaxOp>([&](Operation *o) {
          StringRef kind = isa<SumOp>(o)    ? "sum"
                           : isa<MeanOp>(o) ? "mean"
                                            : "max";
          Value x = o->getOperand(0);
          if (!active.contains(x))
            return success();
          auto axis = cast<IntegerAttr>(o->getAttr("axis"));
          accumulate(x,
                     create<ReduceGradOp>(
                         loc, gradType(x), b.getStringAttr(kind), x,
                         adjOrZeros(o->getResult(0)), axis,
                         o->hasAttr("keepdim") ? b.getUnitAttr() : UnitAttr()));
          return success();
        })
        .Case<SoftmaxOp>([&](SoftmaxOp o) {
          Value dy = adjOrZeros(o.getResult());
          accumulate(o.getInput(),
                     create<SoftmaxGradOp>(loc, dy.getType(), o.getResult(), dy,
                                           o.getAxisAttr()));
          return success();
        })
        .Case<RmsNormOp>([&](RmsNormOp o) {
          auto g = create<RmsNormGradOp>(
              loc, gradType(o.getInput()), gradType(o.getWeight()),
              o.getInput(), o.getWeight(), adjOrZeros(o.getResult()),
              o.getEpsAttr(), o.getOffsetAttr());
          accumulate(o.getInput(), g.getInputGrad());
          accumulate(o.getWeight(), g.getWeightGrad());
          return success();
        })
        .Case<LayerNormOp>([&](LayerNormOp o) {
          auto g = create<LayerNormGradOp>(
              loc, gradType(o.getInput()), gradType(o.getWeight()),
              gradType(o.getWeight()), o.getInput(), o.getWeight(),
              adjOrZeros(o.getResult()), o.getEpsAttr());
          accumulate(o.getInput(), g.getInputGrad());
          accumulate(o.getWeight(), g.getWeightGrad());
          if (o.getBias())
            accumulate(o.getBias(), g.getBiasGrad());
          return success();
        })
        .Case<ReshapeOp>([&](ReshapeOp o) {
          Value x = o.getInput();
          if (active.contains(x))
            accumulate(x, create<ReshapeOp>(loc, gradType(x),
                                            adjOrZeros(o.getResult())));
          return success();
        })
        .Case<TransposeOp>([&](TransposeOp o) {
          Value x = o.getInput();
          if (!active.contains(x))
            return success();
          ArrayRef<int64_t> perm = o.getPerm();
          SmallVector<int64_t> inv(perm.size());
          for (size_t i = 0; i < perm.size(); ++i)
            inv[perm[i]] = i;
          accumulate(x, create<TransposeOp>(loc, gradType(x),
                                            adjOrZeros(o.getResult()),
                                            b.getDenseI64ArrayAttr(inv)));
          return success();
        })
        .Case<SplitOp>([&](SplitOp o) {
          SmallVector<Value> parts;
          for (Value r : o.getResults())
            parts.push_back(adjOrZeros(r));
          accumulate(o.getInput(), create<ConcatOp>(loc, gradType(o.getInput()),
                                                    parts, o.getAxisAttr()));
          return success();
        })
        .Case<ConcatOp>([&](ConcatOp o) {
          Value dy = adjOrZeros(o.getResult());
          int64_t start = 0;
          for (Value in : o.getInputs()) {
            int64_t size = tensorOf(in).getShape()[o.getAxis()];
            if (active.contains(in))
              accumulate(in,
                         create<SliceOp>(loc, gradType(in), dy, o.getAxisAttr(),
                                         b.getI64IntegerAttr(start),
                                         b.getI64IntegerAttr(start + size)));
            start += size;
          }
          return success();
        })
        .Case<SliceOp>([&](SliceOp o) {
          Value x = o.getInput();
          if (active.contains(x))
            accumulate(x,
                       create<PadOp>(loc, gradType(x),
                                     adjOrZeros(o.getResult()), o.getAxisAttr(),
                                     o.getStartAttr(), o.getEndAttr()));
          return success();
        })
        .Case<RopeOp>([&](RopeOp o) {
          Value x = o.getInput();
          if (!active.contains(x))
            return success();
          auto inv = create<RopeOp>(
              loc, gradType(x), adjOrZeros(o.getResult()), o.getThetaAttr(),
              o.getFractionAttr(), o.getScalingAttr(), o.getFactorAttr(),
              o.getLowFreqFactorAttr(), o.getHighFreqFactorAttr(),
              o.getOriginalMaxPositionAttr(),
              o.getInverse() ? UnitAttr() : b.getUnitAttr());
          accumulate(x, inv);
          return success();
        })
        .Case<AttentionOp>([&](AttentionOp o) {
          auto g = create<AttentionGradOp>(
              loc, gradType(o.getQ()), gradType(o.getK()), gradType(o.getV()),
              o.getQ(), o.getK(), o.getV(), o.getResult(),
              adjOrZeros(o.getResult()), o.getCausalAttr(), o.getWindowAttr(),
              o.getSoftcapAttr(), o.getScaleAttr());
          accumulate(o.getQ(), g.getQGrad());
          accumulate(o.getK(), g.getKGrad());
          accumulate(o.getV(), g.getVGrad());
          return success();
        })
        .Case<EmbeddingOp>([&](EmbeddingOp o) {
          if (active.contains(o.getTable()))
            accumulate(o.getTable(),
                       create<EmbeddingGradOp>(loc, gradType(o.getTable()),
                                               o.getIds(),
                                               adjOrZeros(o.getResult())));
          return success();
        })
        .Case<CrossEntropyOp>([&](CrossEntropyOp o) {
          if (active.contains(o.getLogits()))
            accumulate(o.getLogits(),
                       create<CrossEntropyGradOp>(loc, gradType(o.getLogits()),
                                                  o.getLogits(), o.getTargets(),
                                                  adjOrZeros(o.getResult()),
                                                  o.getIgnoreIndexAttr()));
          return success();
        })
        .Case<LinearCrossEntropyOp>([&](LinearCrossEntropyOp o) {
          auto g = create<LinearCrossEntropyGradOp>(
              loc, gradType(o.getInput()), gradType(o.getWeight()),
              o.getInput(), o.getWeight(), o.getTargets(),
              adjOrZeros(o.getResult()), o.getTransposeWeightAttr(),
              o.getSoftcapAttr(), o.getIgnoreIndexAttr());
          accumulate(o.getInput(), g.getInputGrad());
          accumulate(o.getWeight(), g.getWeightGrad());
          return success();
        })
        .Case<MoeOp>([&](MoeOp o) {
          // One op for the whole rule: the runtime recomputes the routing,
          // runs each expert's @backward on its tokens (accumulating the
          // expert parameters' gradients) and adds the aux-loss gradient.
          auto g = create<MoeGradOp>(loc, gradType(o.getInput()),
                                     gradType(o.getRouter()), o.getInput(),
                                     o.getRouter(), adjOrZeros(o.getResult()),
                                     o.getExpertAttr(), o.getTopKAttr(),
                                     o.getNormalizeAttr(), o.getAuxLossAttr());
          accumulate(o.getInput(), g.getInputGrad());
          accumulate(o.getRouter(), g.getRouterGrad());
          return success();
        })
        .Case<ApplyLayersOp>([&](ApplyLayersOp o) {
          Value dx = create<ApplyLayersGradOp>(
              loc, gradType(o.getInput()), o.getLayerAttr(), o.getFirstAttr(),
              o.getCountAttr(), adjOrZeros(o.getResult()));
          accumulate(o.getInput(), dx);
          return success();
        })
        .Default([&](Operation *o) {
          return o->emitOpError()
                 << "has no differentiation rule yet; mtc-autodiff cannot "
                    "build its backward pass";
        });
    (void)ctx;
  }

  OpBuilder &b;
  unsigned &numGradOps;
  llvm::DenseSet<Value> active;
  llvm::DenseMap<Value, Value> adjoint;

public:
  /// Parameters read in the function, with their adjoints (in read order).
  SmallVector<std::pair<ParamRefOp, Value>>
  paramAdjoints(ArrayRef<Operation *> ops) const {
    SmallVector<std::pair<ParamRefOp, Value>> out;
    for (Operation *op : ops)
      if (auto ref = dyn_cast<ParamRefOp>(op))
        if (Value a = adjoint.lookup(ref.getResult()))
          out.push_back({ref, a});
    return out;
  }
};

/// Removes recomputed ops nobody uses: Pure ops, and recomputed mt.moe ops
/// (not Pure, since they add their aux loss to the model loss; in a backward
/// function that loss was already counted by the forward pass, and
/// mt.moe_grad recomputes what it needs itself).
void eraseDeadOps(Block &block) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block))) {
      if (op.hasTrait<OpTrait::IsTerminator>() || !op.use_empty() ||
          !(isPure(&op) || isa<MoeOp>(op)))
        continue;
      op.erase();
      changed = true;
    }
  }
}

/// Clones \p forward's body (minus its return) into \p block, mapping the
/// forward's arguments to \p args. Returns the cloned ops and the value the
/// forward returned.
Value cloneBody(func::FuncOp forward, ValueRange args, OpBuilder &b,
                SmallVectorImpl<Operation *> &cloned) {
  IRMapping map;
  for (auto [from, to] : llvm::zip(forward.getArguments(), args))
    map.map(from, to);
  Value result;
  for (Operation &op : forward.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      result = map.lookup(ret.getOperand(0));
      break;
    }
    cloned.push_back(b.clone(op, map));
  }
  return result;
}

struct MtcAutodiffPass : public mtc::impl::MtcAutodiffBase<MtcAutodiffPass> {
  using MtcAutodiffBase::MtcAutodiffBase;

  void runOnOperation() override {
    // The option parser admits input, all and selective; a pipeline built
    // in C++ could still ask for auto, which is the driver's decision.
    if (save == RecomputePolicy::Auto) {
      getOperation().emitError() << "mtc-autodiff: save must be input, all "
                                    "or selective, not a recompute policy "
                                    "of auto";
      return signalPassFailure();
    }
    unsigned grads = 0;
    bool failedAny = false;
    getOperation().walk([&](ModelOp model) {
      for (auto layer : model.getBody().getOps<LayerOp>()) {
        // Experts first: the layer's mt.moe_grad runs their @backward.
        for (auto expert : layer.getBody().front().getOps<ExpertOp>())
          if (failed(buildBackward(expert, expert.getForward(), grads)))
            failedAny = true;
        if (failed(buildBackward(layer, layer.getForward(), grads, save)))
          failedAny = true;
        // Mixed plans: the backward of an instance that keeps only its
        // input, from the same forward (whose first result is the layer's).
        if (fullBackward && save != RecomputePolicy::Full &&
            failed(buildBackward(layer, layer.getForward(), grads,
                                 RecomputePolicy::Full, "backward_full")))
          failedAny = true;
      }
      if (!failedAny && failed(buildModelForwardBackward(model, grads)))
        failedAny = true;
    });
    numGradOps += grads;
    if (failedAny)
      signalPassFailure();
  }

  /// Adds `func.func @backward(%x, %dy) -> %dx` (or @\p name) to a layer or
  /// an expert (both map one activation to one of the same type).
  template <typename ContainerOp>
  LogicalResult buildBackward(ContainerOp container, func::FuncOp forward,
                              unsigned &grads,
                              RecomputePolicy policy = RecomputePolicy::Full,
                              StringRef name = "backward") {
    if (!forward)
      return container.emitOpError() << "has no @forward";
    if (container.lookupSymbol(name))
      return success(); // already differentiated
    MtTensorType act = cast<MtTensorType>(forward.getArgument(0).getType());
    MtTensorType gradAct = cast<MtTensorType>(gradType(forward.getArgument(0)));
    OpBuilder b(container.getContext());
    b.setInsertionPointAfter(forward);
    auto type = b.getFunctionType({act, gradAct}, {gradAct});
    auto fn = func::FuncOp::create(b, forward.getLoc(), name, type);
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToEnd(entry);

    SmallVector<Operation *> ops;
    Value y = cloneBody(forward, entry->getArgument(0), b, ops);
    ReverseSweep sweep(b, grads);
    sweep.markActive(ops, entry->getArgument(0));
    sweep.seed(y, entry->getArgument(1));
    if (failed(sweep.run(ops))) {
      fn.erase();
      return failure();
    }
    b.setInsertionPointToEnd(entry);
    for (auto [ref, adj] : sweep.paramAdjoints(ops))
      ParamGradOp::create(b, ref.getLoc(), ref.getNameAttr(), adj);
    Value dx = sweep.adjointOf(entry->getArgument(0));
    if (!dx)
      dx = ZerosOp::create(b, forward.getLoc(), gradAct);
    func::ReturnOp::create(b, forward.getLoc(), dx);
    if (policy != RecomputePolicy::Full)
      keepIntermediates(forward, fn, ops, policy == RecomputePolicy::Selective);
    // What the backward keeps, for mtc-insert-recompute (experts always
    // recompute: they run inside their layer's backward).
    if (isa<LayerOp>(container.getOperation()))
      fn->setAttr("mt.save", b.getStringAttr(saveName(policy)));
    eraseDeadOps(*entry);
    ++numBackwardFunctions;
    return success();
  }

  /// save=all: every value of the recomputed forward (\p cloned, in the
  /// order of \p forward's ops) that the reverse sweep reads becomes an extra
  /// result of the forward and an extra argument of \p backward.
  /// save=selective (\p selective): only the results of the expensive ops
  /// (matmul, attention, moe) that the backward needs, directly or through
  /// the recomputation of cheap ops, are kept; the cheap ops (norms, rope,
  /// activations, residual adds) are recomputed from them and the input.
  void keepIntermediates(func::FuncOp forward, func::FuncOp backward,
                         ArrayRef<Operation *> cloned, bool selective) {
    llvm::SmallPtrSet<Operation *, 32> clones(cloned.begin(), cloned.end());
    // Clones the backward needs: used by a gradient op or by a needed clone.
    llvm::SmallPtrSet<Operation *, 32> needed;
    for (Operation *op : llvm::reverse(cloned))
      for (Operation *user : op->getUsers())
        if (!clones.contains(user) || needed.contains(user)) {
          needed.insert(op);
          break;
        }
    auto expensive = [](Operation *op) {
      return isa<MatMulOp, AttentionOp, MoeOp>(op);
    };
    SmallVector<Operation *> originals;
    for (Operation &op : forward.getBody().front().without_terminator())
      originals.push_back(&op);
    Block &entry = backward.getBody().front();
    auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    SmallVector<Value> results(ret.getOperands());
    for (auto [clone, original] : llvm::zip(cloned, originals)) {
      if (isa<ParamRefOp, ConstantOp>(clone))
        continue;
      if (selective && !(expensive(clone) && needed.contains(clone)))
        continue;
      for (auto [r, o] :
           llvm::zip(clone->getResults(), original->getResults())) {
        if (selective ? r.use_empty()
                      : llvm::none_of(r.getUsers(), [&](Operation *user) {
                          return !clones.contains(user);
                        }))
          continue;
        results.push_back(o);
        r.replaceAllUsesWith(entry.addArgument(r.getType(), r.getLoc()));
        ++numSavedValues;
      }
    }
    ret->setOperands(results);
    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    forward.setFunctionType(FunctionType::get(
        forward.getContext(), forward.getArgumentTypes(), types));
    backward.setFunctionType(FunctionType::get(backward.getContext(),
                                               entry.getArgumentTypes(),
                                               backward.getResultTypes()));
  }

  LogicalResult buildModelForwardBackward(ModelOp model, unsigned &grads) {
    func::FuncOp forward = model.getForward();
    if (!forward)
      return model.emitOpError() << "has no @forward";
    if (model.lookupSymbol("forward_backward"))
      return success();
    OpBuilder b(model.getContext());
    b.setInsertionPointAfter(forward);
    auto fn = func::FuncOp::create(b, forward.getLoc(), "forward_backward",
                                   forward.getFunctionType());
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToEnd(entry);
    SmallVector<Operation *> ops;
    Value loss = cloneBody(forward, entry->getArguments(), b, ops);
    ReverseSweep sweep(b, grads);
    sweep.markActive(ops, entry->getArguments());
    Value one = ConstantOp::create(b, forward.getLoc(), gradType(loss),
                                   b.getF64FloatAttr(1.0));
    sweep.seed(loss, one);
    if (failed(sweep.run(ops))) {
      fn.erase();
      return failure();
    }
    b.setInsertionPointToEnd(entry);
    for (auto [ref, adj] : sweep.paramAdjoints(ops))
      ParamGradOp::create(b, ref.getLoc(), ref.getNameAttr(), adj);
    func::ReturnOp::create(b, forward.getLoc(), loss);
    eraseDeadOps(*entry);
    ++numBackwardFunctions;
    return success();
  }
};

} // namespace
