//===- FusedRegions.cpp - The distinct mt.fused regions of a module -------===//
//
// Part of mtc. See FusedRegions.h.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/FusedRegions.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;

namespace mtc {

namespace {
int64_t staticNumel(Value v) {
  int64_t n = 1;
  for (int64_t d : cast<mt::MtTensorType>(v.getType()).getShapeVector())
    n *= d;
  return n;
}
} // namespace

SmallVector<FusedInputPlan> planFusedInputs(mt::FusedOp fused) {
  SmallVector<FusedInputPlan> plan;
  for (unsigned k = 0; k < fused.getInputs().size(); ++k) {
    FusedInputPlan p{fused.getInputAccess(k), 0};
    if (p.access == FusedAccess::Suffix)
      p.modulus = staticNumel(fused.getInputs()[k]);
    plan.push_back(p);
  }
  return plan;
}

llvm::Expected<int64_t> fusedRowLength(mt::FusedOp fused,
                                       ArrayRef<FusedInputPlan> plan) {
  bool needed =
      fused.hasReductions() || llvm::any_of(plan, [](const FusedInputPlan &p) {
        return p.access == FusedAccess::Row;
      });
  if (!needed)
    return 0;
  mtc::Shape it = fused.getIterationShape();
  if (it.empty() || mtc::isSymbolic(it.back())) {
    std::string where;
    llvm::raw_string_ostream os(where);
    fused.getLoc().print(os);
    return llvm::createStringError(
        where +
        ": a kernel for an mt.fused region with reductions or per-row "
        "inputs needs a static last axis, got " +
        mtc::formatShape(it));
  }
  return it.back();
}

std::string fusedRegionKey(mt::FusedOp fused, ArrayRef<FusedInputPlan> plan) {
  std::string key;
  llvm::raw_string_ostream os(key);
  for (const FusedInputPlan &p : plan)
    os << static_cast<int>(p.access) << ':' << p.modulus << ',';
  // A symbolic row length keys as -1 (such a region fails when emitted).
  llvm::Expected<int64_t> row = fusedRowLength(fused, plan);
  os << "row " << (row ? *row : (llvm::consumeError(row.takeError()), -1))
     << ',';
  llvm::DenseMap<Value, int> ids;
  Block &body = fused.getBody().front();
  for (BlockArgument a : body.getArguments())
    ids[a] = static_cast<int>(ids.size());
  for (Operation &op : body) {
    os << '|' << op.getName().getStringRef() << '(';
    for (Value v : op.getOperands())
      os << ids.lookup(v) << ',';
    os << ')';
    op.getAttrDictionary().print(os);
    for (Value r : op.getResults())
      ids[r] = static_cast<int>(ids.size());
  }
  return key;
}

std::vector<FusedRegion> nameFusedRegions(ModuleOp module) {
  std::vector<FusedRegion> regions;
  std::map<std::string, std::string> kernelOfKey;
  module.walk([&](mt::FusedOp fused) {
    SmallVector<FusedInputPlan> plan = planFusedInputs(fused);
    std::string key = fusedRegionKey(fused, plan);
    auto [it, isNew] = kernelOfKey.try_emplace(
        key, "mtc_fused_" + std::to_string(kernelOfKey.size()));
    fused.setKernelAttr(StringAttr::get(module.getContext(), it->second));
    if (isNew)
      regions.push_back({it->second, fused, std::move(plan)});
  });
  return regions;
}

} // namespace mtc
