//===- Plan.cpp - Workspace packing shared by compiler and runtime --------===//
//
// Part of mtc. See Plan.h.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Plan.h"

#include "lib/Bundle/Bundle.h"

#include <algorithm>
#include <numeric>

namespace mtc::bundle {

int64_t packLiveValues(const std::vector<LiveValue> &values,
                       std::vector<int64_t> &offsets) {
  const size_t n = values.size();
  offsets.assign(n, 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (values[a].bytes != values[b].bytes)
      return values[a].bytes > values[b].bytes;
    if (values[a].begin != values[b].begin)
      return values[a].begin < values[b].begin;
    return a < b;
  });
  std::vector<size_t> placed;
  int64_t total = 0;
  std::vector<std::pair<int64_t, int64_t>> busy; // [offset, end)
  for (size_t v : order) {
    const LiveValue &lv = values[v];
    int64_t size = align64(lv.bytes);
    busy.clear();
    for (size_t p : placed)
      if (values[p].begin <= lv.end && lv.begin <= values[p].end)
        busy.push_back(
            {offsets[p], addSize(offsets[p], align64(values[p].bytes))});
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto &[lo, hi] : busy) {
      if (addSize(at, size) <= lo)
        break;
      at = std::max(at, hi);
    }
    offsets[v] = at;
    total = std::max(total, addSize(at, size));
    placed.push_back(v);
  }
  return total;
}

bool isParamGradientResult(const std::string &op, size_t result) {
  // The ops whose results only ever feed a param_grad: weight and table
  // gradients, a norm's weight (and bias) gradients, the head's dW, and
  // reduce_to (a broadcast operand's gradient: biases), a moe op's router
  // gradient.
  if (result == 0)
    return op == "weight_grad" || op == "embedding_grad" || op == "reduce_to";
  if (result == 1)
    return op == "rmsnorm_grad" || op == "layernorm_grad" ||
           op == "linear_cross_entropy_grad" || op == "moe_grad";
  return result == 2 && op == "layernorm_grad";
}

std::vector<DType> valueStorage(const Function &fn, Precision p) {
  std::vector<DType> out(fn.values.size(), DType::F32);
  for (int a : fn.args)
    out.at(a) =
        argumentStorage(fn.values.at(a).dtype, fn.values.at(a).shape.size(), p);
  for (const Op &op : fn.ops) {
    int floats = 0;
    bool allF32 = true;
    for (int v : op.operands)
      if (out.at(v) != DType::I32) {
        ++floats;
        allF32 = allF32 && out[v] == DType::F32;
      }
    for (size_t r = 0; r < op.results.size(); ++r) {
      const ValueType &t = fn.values.at(op.results[r]);
      out.at(op.results[r]) =
          resultStorage(op.name, r, t.dtype, t.shape.size(), floats, allF32, p);
    }
  }
  return out;
}

Precision planPrecision(const Bundle &b) {
  Precision p = Precision::F32;
  if (b.step)
    parsePrecision(b.step->precision, p);
  return p;
}

std::string fusedSignature(const Op &op, const std::vector<DType> &storage) {
  std::string sig;
  auto letter = [&](int v) { return storage.at(v) == DType::BF16 ? 'b' : 'f'; };
  for (int v : op.operands)
    sig += letter(v);
  sig += '_';
  for (int v : op.results)
    sig += letter(v);
  return sig;
}

void forEachFusedKernelOp(
    const Bundle &b,
    const std::function<void(const Op &, const std::string &)> &f) {
  Precision p = planPrecision(b);
  auto visit = [&](const std::map<std::string, Function> &fns) {
    for (const auto &[name, fn] : fns) {
      std::vector<DType> storage;
      for (const Op &op : fn.ops) {
        if (op.name != "fused" || op.strAttr("kernel").empty())
          continue;
        if (storage.empty())
          storage = valueStorage(fn, p);
        f(op, fusedSignature(op, storage));
      }
    }
  };
  visit(b.functions);
  for (const Layer &l : b.layers) {
    visit(l.functions);
    for (const Expert &e : l.experts)
      visit(e.functions);
  }
}

namespace {

int64_t numelOf(const ValueType &t, int64_t batch, int64_t seq,
                int64_t tokens) {
  return concreteNumel(t.shape, batch, seq, tokens);
}

/// What a call of \p fn allocates when every value is bump-allocated (the
/// expert functions a moe op runs): its ops' scratch, summed.
int64_t bumpBytes(const Bundle &b, const std::string &layer, const Function &fn,
                  int64_t batch, int64_t seq, int64_t tokens);

/// What op \p op allocates while it runs: its results (an op may build them
/// before they are copied into place), an attention's log-sum-exp, and a moe
/// op's expert calls with their gathered rows (T <= N tokens per expert).
int64_t opScratchBytes(const Bundle &b, const std::string &layer,
                       const Function &fn, const std::vector<DType> &storage,
                       const Op &op, int64_t batch, int64_t seq,
                       int64_t tokens) {
  if (op.name == "param_ref" || op.name == "reshape")
    return 0;
  int64_t bytes = 0;
  for (int r : op.results)
    bytes =
        addSize(bytes, tensorBytes(numelOf(fn.values.at(r), batch, seq, tokens),
                                   storage.at(r)));
  if (op.name == "attention" && !op.results.empty())
    bytes = addSize(bytes, attentionLseBytes(fn.values.at(op.results[0]).shape,
                                             batch, seq));
  if (op.name == "moe" || op.name == "moe_grad") {
    const Layer *l = b.layer(layer);
    const Expert *e = l ? l->expert(op.symbol) : nullptr;
    if (e && !op.operands.empty()) {
      int64_t n = mulSize(batch, seq);
      const Shape &in = fn.values.at(op.operands[0]).shape;
      int64_t rows = tensorBytes(mulSize(n, in.empty() ? 0 : in.back()),
                                 storage.at(op.operands[0]));
      int64_t inner = 0;
      auto f = e->functions.find("forward");
      if (f != e->functions.end())
        inner = addSize(inner, bumpBytes(b, layer, f->second, batch, seq, n));
      if (op.name == "moe_grad") {
        auto g = e->functions.find("backward");
        if (g != e->functions.end())
          inner = addSize(inner, bumpBytes(b, layer, g->second, batch, seq, n));
      }
      bytes =
          addSize(bytes, addSize(inner, op.name == "moe_grad" ? mulSize(2, rows)
                                                              : rows));
    }
  }
  return bytes;
}

int64_t bumpBytes(const Bundle &b, const std::string &layer, const Function &fn,
                  int64_t batch, int64_t seq, int64_t tokens) {
  std::vector<DType> storage = valueStorage(fn, planPrecision(b));
  int64_t bytes = 0;
  for (const Op &op : fn.ops)
    bytes = addSize(
        bytes, opScratchBytes(b, layer, fn, storage, op, batch, seq, tokens));
  return bytes;
}

} // namespace

FunctionPlan planLayerFunction(const Bundle &b, const std::string &layer,
                               const Function &fn, int64_t batch, int64_t seq) {
  FunctionPlan plan;
  const int64_t nops = static_cast<int64_t>(fn.ops.size());
  const size_t nvals = fn.values.size();
  std::vector<int64_t> def(nvals, -1), last(nvals, -1);
  std::vector<int64_t> bytes(nvals, 0);
  std::vector<bool> placedValue(nvals, false);
  std::vector<DType> storage = valueStorage(fn, planPrecision(b));
  for (int64_t k = 0; k < nops; ++k) {
    const Op &op = fn.ops[k];
    for (int v : op.operands)
      last[v] = std::max(last[v], k);
    bool view = op.name == "param_ref" || op.name == "reshape";
    for (size_t r = 0; r < op.results.size(); ++r) {
      int v = op.results[r];
      def[v] = k;
      last[v] = std::max(last[v], k);
      if (view)
        continue;
      placedValue[v] = true;
      bytes[v] = tensorBytes(numelOf(fn.values[v], batch, seq, 0), storage[v]);
      if (op.name == "attention" && r == 0)
        bytes[v] = addSize(bytes[v],
                           attentionLseBytes(fn.values[v].shape, batch, seq));
    }
    plan.scratchBytes =
        std::max(plan.scratchBytes,
                 opScratchBytes(b, layer, fn, storage, op, batch, seq, 0));
  }
  for (int v : fn.results)
    last[v] = nops;
  // A reshape's result is its operand's storage: the operand lives as long.
  for (int64_t k = nops - 1; k >= 0; --k) {
    const Op &op = fn.ops[k];
    if (op.name == "reshape" && !op.operands.empty() && !op.results.empty())
      last[op.operands[0]] =
          std::max(last[op.operands[0]], last[op.results[0]]);
  }
  std::vector<LiveValue> live;
  std::vector<int> ids;
  for (size_t v = 0; v < nvals; ++v)
    if (placedValue[v]) {
      live.push_back({bytes[v], def[v], last[v]});
      ids.push_back(static_cast<int>(v));
    }
  std::vector<int64_t> offsets;
  plan.packedBytes = packLiveValues(live, offsets);
  plan.offset.assign(nvals, -1);
  for (size_t k = 0; k < ids.size(); ++k)
    plan.offset[ids[k]] = offsets[k];
  return plan;
}

StagePlan planStage(const StageProgram &prog) {
  StagePlan plan;
  const size_t nvals = prog.valueBytes.size();
  const int64_t nops = static_cast<int64_t>(prog.ops.size());
  // Definition order (the rank every list is sorted by), the op that
  // defines each value (-1: an argument), views of persistent memory.
  std::vector<int64_t> rank(nvals, -1), def(nvals, -1);
  std::vector<bool> persistent(nvals, false), isArg(nvals, false);
  int64_t next = 0;
  for (int a : prog.args) {
    rank.at(a) = next++;
    isArg[a] = true;
  }
  for (int64_t k = 0; k < nops; ++k)
    for (int r : prog.ops[k].results) {
      rank.at(r) = next++;
      def[r] = k;
      persistent[r] = prog.ops[k].persistent;
    }
  // Segment of each op: -1 for a layers op.
  std::vector<int64_t> segOf(nops, -1);
  for (int64_t k = 0; k < nops;) {
    if (prog.ops[k].layers) {
      ++k;
      continue;
    }
    StagePlan::Segment seg;
    seg.begin = k;
    while (k < nops && !prog.ops[k].layers)
      segOf[k++] = static_cast<int64_t>(plan.segments.size());
    seg.end = k;
    plan.segments.push_back(std::move(seg));
  }
  auto byRank = [&](std::vector<int> &v) {
    std::sort(v.begin(), v.end(),
              [&](int a, int b) { return rank[a] < rank[b]; });
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  // Carried: read by an op outside the segment that defines it.
  std::vector<bool> carried(nvals, false);
  for (int64_t k = 0; k < nops; ++k)
    for (int v : prog.ops[k].operands) {
      if (isArg.at(v) || persistent[v])
        continue;
      int64_t d = def[v];
      bool sameSegment = d >= 0 && segOf[k] >= 0 && segOf[d] == segOf[k];
      if (!sameSegment)
        carried[v] = true;
    }
  std::vector<int> order;
  for (size_t v = 0; v < nvals; ++v)
    if (carried[v])
      order.push_back(static_cast<int>(v));
  byRank(order);
  plan.hostOffset.assign(nvals, -1);
  for (int v : order) {
    plan.hostOffset[v] = plan.hostBytes;
    plan.hostBytes = addSize(plan.hostBytes, align64(prog.valueBytes[v]));
  }
  for (StagePlan::Segment &seg : plan.segments) {
    for (int64_t k = seg.begin; k < seg.end; ++k) {
      const StageOp &op = prog.ops[k];
      seg.scratch = addSize(seg.scratch, op.scratch);
      for (int v : op.operands) {
        if (isArg[v])
          seg.args.push_back(v);
        else if (carried[v] && (def[v] < seg.begin || def[v] >= seg.end))
          seg.in.push_back(v);
      }
      for (int r : op.results)
        if (carried[r])
          seg.out.push_back(r);
    }
    byRank(seg.args);
    byRank(seg.in);
    byRank(seg.out);
    for (int a : seg.args)
      seg.scratch = addSize(seg.scratch, align64(prog.valueBytes[a]));
    for (int v : seg.in) {
      seg.inOffset.push_back(seg.inBytes);
      seg.inBytes = addSize(seg.inBytes, align64(prog.valueBytes[v]));
    }
    for (int v : seg.out) {
      seg.outOffset.push_back(addSize(seg.inBytes, seg.outBytes));
      seg.outBytes = addSize(seg.outBytes, align64(prog.valueBytes[v]));
    }
    plan.slotBytes = std::max(plan.slotBytes, seg.bytes());
  }
  return plan;
}

StageProgram stageProgram(const Function &fn, Precision p, int64_t batch,
                          int64_t seq) {
  StageProgram prog;
  prog.args = fn.args;
  std::vector<DType> storage = valueStorage(fn, p);
  prog.valueBytes.assign(fn.values.size(), 0);
  for (size_t v = 0; v < fn.values.size(); ++v)
    prog.valueBytes[v] =
        tensorBytes(concreteNumel(fn.values[v].shape, batch, seq), storage[v]);
  std::vector<bool> persistent(fn.values.size(), false);
  for (const Op &op : fn.ops) {
    StageOp s;
    s.operands = op.operands;
    s.results = op.results;
    s.layers = op.name == "apply_layers" || op.name == "apply_layers_grad";
    s.persistent = op.name == "param_ref" ||
                   (op.name == "reshape" && !op.operands.empty() &&
                    persistent.at(op.operands[0]));
    for (int r : op.results)
      persistent.at(r) = s.persistent;
    prog.ops.push_back(std::move(s));
  }
  return prog;
}

} // namespace mtc::bundle
