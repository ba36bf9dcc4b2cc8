//===- Bundle.cpp - Reading and writing .mtb bundles ------------*- C++ -*-===//
//
// Part of mtc. JSON through nlohmann-json; every field is checked on read and
// the bundle then validated (Validate.h), so that the runtime can trust ids,
// ops, dtypes and shapes.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Bundle.h"

#include "lib/Bundle/Plan.h"
#include "lib/Bundle/Validate.h"
#include "lib/Support/Files.h"
#include "lib/Support/Hash.h"
#include "lib/Support/JsonParse.h"
#include "lib/Support/JsonShow.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

using nlohmann::json;

namespace mtc::bundle {

//===----------------------------------------------------------------------===//
// Accessors
//===----------------------------------------------------------------------===//

const Attr *Op::attr(const std::string &key) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? nullptr : &it->second;
}

int64_t Op::intAttr(const std::string &key, int64_t dflt) const {
  if (const Attr *a = attr(key)) {
    if (auto *i = std::get_if<int64_t>(a))
      return *i;
    if (auto *d = std::get_if<double>(a))
      return static_cast<int64_t>(*d);
    if (auto *b = std::get_if<bool>(a))
      return *b;
  }
  return dflt;
}

int64_t PlanCommand::intAttr(const std::string &key, int64_t dflt) const {
  auto it = attrs.find(key);
  if (it != attrs.end()) {
    if (auto *i = std::get_if<int64_t>(&it->second))
      return *i;
    if (auto *d = std::get_if<double>(&it->second))
      return static_cast<int64_t>(*d);
  }
  return dflt;
}

std::string PlanCommand::strAttr(const std::string &key,
                                 const std::string &dflt) const {
  auto it = attrs.find(key);
  if (it != attrs.end())
    if (auto *s = std::get_if<std::string>(&it->second))
      return *s;
  return dflt;
}

const PlanBuffer *StepPlan::buffer(const std::string &name) const {
  for (const PlanBuffer &b : buffers)
    if (b.name == name)
      return &b;
  return nullptr;
}

double Op::floatAttr(const std::string &key, double dflt) const {
  if (const Attr *a = attr(key)) {
    if (auto *d = std::get_if<double>(a))
      return *d;
    if (auto *i = std::get_if<int64_t>(a))
      return static_cast<double>(*i);
  }
  return dflt;
}

bool Op::boolAttr(const std::string &key, bool dflt) const {
  if (const Attr *a = attr(key)) {
    if (auto *b = std::get_if<bool>(a))
      return *b;
    if (auto *i = std::get_if<int64_t>(a))
      return *i != 0;
  }
  return dflt;
}

std::string Op::strAttr(const std::string &key, const std::string &dflt) const {
  if (const Attr *a = attr(key))
    if (auto *s = std::get_if<std::string>(a))
      return *s;
  return dflt;
}

std::vector<int64_t> Op::listAttr(const std::string &key) const {
  if (const Attr *a = attr(key))
    if (auto *l = std::get_if<std::vector<int64_t>>(a))
      return *l;
  return {};
}

int64_t Param::numel() const {
  int64_t n = 1;
  for (Dim d : shape)
    n *= d;
  return n;
}

const Layer *Bundle::layer(const std::string &name) const {
  for (const Layer &l : layers)
    if (l.name == name)
      return &l;
  return nullptr;
}

const CudaFusedEntry *
CudaFusedKernel::entry(const std::string &signature) const {
  for (const CudaFusedEntry &e : entries)
    if (e.signature == signature)
      return &e;
  return nullptr;
}

const CudaFusedKernel *CudaKernels::kernel(const std::string &name) const {
  for (const CudaFusedKernel &k : kernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

const Expert *Layer::expert(const std::string &name) const {
  for (const Expert &e : experts)
    if (e.name == name)
      return &e;
  return nullptr;
}

int64_t Bundle::totalLayerInstances() const {
  int64_t n = 0;
  for (const Layer &l : layers)
    n += l.count;
  return n;
}

int64_t Bundle::vocabulary() const {
  auto it = functions.find("forward");
  if (it == functions.end())
    return 0;
  const Function &fn = it->second;
  for (const Op &op : fn.ops)
    if (op.name == "embedding" && op.operands.size() == 2) {
      const Shape &table = fn.values[op.operands[1]].shape;
      if (table.size() == 2)
        return table[0];
    }
  return 0;
}

namespace {

/// The first slice ending at S (a position table's first S rows) in \p fn or
/// its fused regions whose axis has fewer than \p seq entries, described
/// for the error of checkTokenShapes; empty when all fit.
std::string sliceTooShort(const Function &fn, int64_t seq,
                          const std::string &flag) {
  for (const Op &op : fn.ops) {
    if (op.region) {
      std::string inner = sliceTooShort(*op.region, seq, flag);
      if (!inner.empty())
        return inner;
    }
    if (op.name != "slice" || op.intAttr("end") != kDimS || op.operands.empty())
      continue;
    const Shape &table = fn.values.at(op.operands[0]).shape;
    int64_t axis = op.intAttr("axis");
    if (axis < 0 || axis >= static_cast<int64_t>(table.size()) ||
        isSymbolic(table[axis]) || seq <= table[axis])
      continue;
    std::string what = "the table " + formatShape(table);
    for (const Op &def : fn.ops)
      if (def.name == "param_ref" && !def.results.empty() &&
          def.results[0] == op.operands[0])
        what = "the table '" + def.symbol + "' " + formatShape(table);
    return flag + " " + std::to_string(seq) + " is larger than the " +
           std::to_string(table[axis]) + " rows of " + what +
           " whose first S rows the model uses" +
           (op.loc.empty() ? "" : " (slice at " + op.loc + ")") + "; pass " +
           flag + " " + std::to_string(table[axis]) + " or less";
  }
  return "";
}

} // namespace

Status checkSequenceFits(const Bundle &b, int64_t seq,
                         const std::string &flag) {
  std::string tooShort;
  for (const auto &[name, fn] : b.functions)
    if (tooShort.empty())
      tooShort = sliceTooShort(fn, seq, flag);
  for (const auto &layer : b.layers)
    for (const auto &[name, fn] : layer.functions)
      if (tooShort.empty())
        tooShort = sliceTooShort(fn, seq, flag);
  return tooShort.empty() ? Status::success() : Status::error(tooShort);
}

Status checkTokenShapes(const Bundle &b, int64_t batch, int64_t seq) {
  if (seq > 0)
    if (Status st = checkSequenceFits(b, seq, "--seq"); !st.ok())
      return st;
  auto it = b.functions.find("forward");
  if (it == b.functions.end())
    return Status::success();
  const Function &fn = it->second;
  const char *names[] = {"tokens", "targets"};
  for (size_t i = 0; i < fn.args.size() && i < 2; ++i) {
    const Shape &shape = fn.values.at(fn.args[i]).shape;
    std::string declared = "the model's forward declares its " +
                           std::string(names[i]) + " as " + formatShape(shape);
    if (shape.size() != 2)
      return Status::error(declared + ", not [batch, sequence]");
    if (shape[0] != kDimB && batch > 0 && shape[0] != batch)
      return Status::error(declared + ": --batch " + std::to_string(batch) +
                           " does not match its batch of " +
                           std::to_string(shape[0]) + " (pass --batch " +
                           std::to_string(shape[0]) +
                           ", or declare the dimension as B)");
    if (shape[1] == kDimS)
      continue;
    if (seq < 0)
      return Status::error(
          declared + ", a static sequence length of " +
          std::to_string(shape[1]) +
          "; generation feeds sequences of every length, so it needs the "
          "dimension declared as S");
    if (seq > 0 && shape[1] != seq)
      return Status::error(declared + ": --seq " + std::to_string(seq) +
                           " does not match its sequence length of " +
                           std::to_string(shape[1]) + " (pass --seq " +
                           std::to_string(shape[1]) +
                           ", or declare the dimension as S)");
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

json dimsToJson(const Shape &shape) {
  json dims = json::array();
  for (Dim d : shape) {
    if (isSymbolic(d))
      dims.push_back(formatDim(d));
    else
      dims.push_back(d);
  }
  return dims;
}

json typeToJson(const ValueType &t) {
  return json{{"shape", dimsToJson(t.shape)}, {"dtype", dtypeName(t.dtype)}};
}

json attrToJson(const Attr &a) {
  return std::visit([](const auto &v) -> json { return json(v); }, a);
}

json functionToJson(const Function &f) {
  json values = json::array();
  for (const ValueType &t : f.values)
    values.push_back(typeToJson(t));
  json ops = json::array();
  for (const Op &op : f.ops) {
    json o{{"op", op.name}, {"operands", op.operands}, {"results", op.results}};
    if (!op.symbol.empty())
      o["symbol"] = op.symbol;
    if (!op.attrs.empty()) {
      json attrs = json::object();
      for (const auto &[k, v] : op.attrs)
        attrs[k] = attrToJson(v);
      o["attrs"] = attrs;
    }
    if (!op.loc.empty())
      o["loc"] = op.loc;
    if (op.region)
      o["region"] = functionToJson(*op.region);
    ops.push_back(std::move(o));
  }
  return json{{"args", f.args},
              {"results", f.results},
              {"values", values},
              {"ops", ops}};
}

/// XXH64 of the fused ops that name a compiled kernel (the kernel's name and
/// the body it was compiled from, in document order): a kernel trusts the
/// shapes of the body it was built for, so the bundle records what they were.
uint64_t kernelOpsHash(const Bundle &b) {
  std::string text;
  auto add = [&](const std::map<std::string, Function> &fns) {
    for (const auto &[name, f] : fns)
      for (const Op &op : f.ops)
        if (op.region && op.attr("kernel"))
          text += op.strAttr("kernel") + "\n" +
                  functionToJson(*op.region).dump() + "\n";
  };
  add(b.functions);
  for (const Layer &l : b.layers) {
    add(l.functions);
    for (const Expert &e : l.experts)
      add(e.functions);
  }
  return xxh64(text.data(), text.size());
}

json paramsToJson(const std::vector<Param> &params) {
  json out = json::array();
  for (const Param &p : params)
    out.push_back(json{{"name", p.name},
                       {"shape", dimsToJson(p.shape)},
                       {"dtype", dtypeName(p.dtype)},
                       {"init", p.init},
                       {"init_args", p.initArgs}});
  return out;
}

json functionsToJson(const std::map<std::string, Function> &fns) {
  json out = json::object();
  for (const auto &[name, f] : fns)
    out[name] = functionToJson(f);
  return out;
}

//===----------------------------------------------------------------------===//
// Reading (with validation)
//===----------------------------------------------------------------------===//

struct ReadError {
  std::string message;
};

std::string show(const json &v) { return showJson(v); }

/// Largest dimension or count a bundle may hold (the frontend's limit).
constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;

[[noreturn]] void fail(const std::string &where, const std::string &what) {
  throw ReadError{where + ": " + what};
}

const json &field(const json &obj, const char *key, const std::string &where) {
  if (!obj.is_object())
    fail(where, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end())
    fail(where, std::string("missing field '") + key + "'");
  return *it;
}

std::string getString(const json &obj, const char *key,
                      const std::string &where) {
  const json &v = field(obj, key, where);
  if (!v.is_string())
    fail(where, std::string("field '") + key + "' must be a string");
  return v.get<std::string>();
}

DType parseDType(const std::string &s, const std::string &where) {
  if (s == "f32")
    return DType::F32;
  if (s == "bf16")
    return DType::BF16;
  if (s == "i32")
    return DType::I32;
  fail(where, "unknown dtype '" + s + "'");
}

Shape parseShape(const json &dims, const std::string &where,
                 bool allowSymbolic) {
  if (!dims.is_array())
    fail(where, "shape must be an array");
  Shape out;
  for (const json &d : dims) {
    if (d.is_string()) {
      Dim sym = symbolicDimByName(d.get<std::string>());
      if (!sym || !allowSymbolic)
        fail(where, "invalid dimension '" + d.get<std::string>() + "'");
      out.push_back(sym);
    } else if (d.is_number_integer() && d.get<int64_t>() >= 0 &&
               d.get<int64_t>() <= kMaxDim) {
      out.push_back(d.get<int64_t>());
    } else {
      fail(where, "invalid dimension " + show(d) + " (dimensions are 0 to " +
                      std::to_string(kMaxDim) + ")");
    }
  }
  // The element count of the static part must fit comfortably in int64.
  int64_t numel = 1;
  for (Dim d : out)
    if (!isSymbolic(d) && __builtin_mul_overflow(numel, d, &numel))
      fail(where, "shape " + formatShape(out) + " has too many elements");
  return out;
}

std::vector<int> parseIds(const json &ids, size_t numValues,
                          const std::string &where) {
  if (!ids.is_array())
    fail(where, "expected an array of value ids");
  std::vector<int> out;
  for (const json &i : ids) {
    if (!i.is_number_integer() || i.get<int64_t>() < 0 ||
        static_cast<size_t>(i.get<int64_t>()) >= numValues)
      fail(where, "value id " + show(i) + " out of range (the function has " +
                      std::to_string(numValues) + " values)");
    out.push_back(i.get<int>());
  }
  return out;
}

Attr parseAttr(const json &v, const std::string &where) {
  if (v.is_boolean())
    return v.get<bool>();
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    fail(where, "integer " + show(v) + " does not fit in 64 bits");
  if (v.is_number_integer())
    return v.get<int64_t>();
  if (v.is_number_float())
    return v.get<double>();
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_array()) {
    std::vector<int64_t> list;
    for (const json &e : v) {
      if (!e.is_number_integer())
        fail(where, "attribute lists hold integers only");
      list.push_back(e.get<int64_t>());
    }
    return list;
  }
  fail(where, "unsupported attribute " + show(v));
}

Function parseFunction(const json &j, const std::string &where, int depth = 0);

Function parseFunction(const json &j, const std::string &where, int depth) {
  Function f;
  const json &values = field(j, "values", where);
  if (!values.is_array())
    fail(where, "'values' must be an array");
  for (size_t i = 0; i < values.size(); ++i) {
    std::string w = where + ": value " + std::to_string(i);
    f.values.push_back({parseShape(field(values[i], "shape", w), w, true),
                        parseDType(getString(values[i], "dtype", w), w)});
  }
  f.args = parseIds(field(j, "args", where), f.values.size(), where);
  f.results = parseIds(field(j, "results", where), f.values.size(), where);
  const json &ops = field(j, "ops", where);
  if (!ops.is_array())
    fail(where, "'ops' must be an array");
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string w = where + ": op " + std::to_string(i);
    Op op;
    op.name = getString(ops[i], "op", w);
    if (ops[i].contains("loc"))
      op.loc = getString(ops[i], "loc", w);
    // From here on, errors name the op as the validator does.
    w += " '" + op.name + "'" + (op.loc.empty() ? "" : " at " + op.loc);
    op.operands = parseIds(field(ops[i], "operands", w), f.values.size(), w);
    op.results = parseIds(field(ops[i], "results", w), f.values.size(), w);
    if (ops[i].contains("symbol"))
      op.symbol = getString(ops[i], "symbol", w);
    if (ops[i].contains("region")) {
      if (depth > 0)
        fail(w, "regions cannot nest");
      op.region = std::make_shared<Function>(
          parseFunction(ops[i]["region"], w + ": region", depth + 1));
    }
    if (ops[i].contains("attrs")) {
      const json &attrs = ops[i]["attrs"];
      if (!attrs.is_object())
        fail(w, "'attrs' must be an object");
      for (auto it = attrs.begin(); it != attrs.end(); ++it)
        op.attrs[it.key()] =
            parseAttr(it.value(), w + " attribute " + it.key());
    }
    f.ops.push_back(std::move(op));
  }
  return f;
}

std::vector<Param> parseParams(const json &j, const std::string &where) {
  if (!j.is_array())
    fail(where, "'params' must be an array");
  std::vector<Param> out;
  for (size_t i = 0; i < j.size(); ++i) {
    std::string w = where + ": param " + std::to_string(i);
    Param p;
    p.name = getString(j[i], "name", w);
    w = where + ": parameter '" + p.name + "'";
    p.shape = parseShape(field(j[i], "shape", w), w, false);
    p.dtype = parseDType(getString(j[i], "dtype", w), w);
    p.init = getString(j[i], "init", w);
    const json &args = field(j[i], "init_args", w);
    if (!args.is_array())
      fail(w, "'init_args' must be an array");
    for (const json &a : args) {
      if (!a.is_number())
        fail(w, "'init_args' must hold numbers");
      p.initArgs.push_back(a.get<double>());
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::map<std::string, Function> parseFunctions(const json &j,
                                               const std::string &where) {
  if (!j.is_object())
    fail(where, "'functions' must be an object");
  std::map<std::string, Function> out;
  for (auto it = j.begin(); it != j.end(); ++it)
    out[it.key()] =
        parseFunction(it.value(), where + ": function '" + it.key() + "'");
  return out;
}

int64_t parseCount(const json &obj, const std::string &where) {
  const json &count = field(obj, "count", where);
  if (!count.is_number_integer() || count.get<int64_t>() <= 0 ||
      count.get<int64_t>() > kMaxDim)
    fail(where,
         "'count' must be an integer from 1 to " + std::to_string(kMaxDim));
  return count.get<int64_t>();
}

Expert parseExpert(const json &j, const std::string &layerWhere, size_t index) {
  Expert e;
  e.name =
      getString(j, "name", layerWhere + ": expert " + std::to_string(index));
  std::string where = layerWhere + ": expert '" + e.name + "'";
  e.count = parseCount(j, where);
  e.params = parseParams(field(j, "params", where), where);
  e.functions = parseFunctions(field(j, "functions", where), where);
  return e;
}

json commandToJson(const PlanCommand &c) {
  json o{{"op", c.op}};
  for (const auto &[k, v] : c.attrs)
    o[k] = attrToJson(v);
  if (c.op == "layers") {
    json body = json::array();
    for (const PlanCommand &inner : c.body)
      body.push_back(commandToJson(inner));
    o["body"] = std::move(body);
  }
  return o;
}

json stepToJson(const StepPlan &s) {
  json buffers = json::array();
  for (const PlanBuffer &b : s.buffers) {
    json o{{"name", b.name},
           {"kind", b.kind},
           {"space", b.space},
           {"bytes", b.bytes}};
    if (b.space == "device")
      o["offset"] = b.offset;
    buffers.push_back(std::move(o));
  }
  json program = json::array();
  for (const PlanCommand &c : s.program)
    program.push_back(commandToJson(c));
  json out{{"batch", s.batch},
           {"seq", s.seq},
           {"micro_batches", s.microBatches},
           {"prefetch_depth", s.prefetchDepth},
           {"recompute", s.recompute},
           {"checkpoints", s.checkpoints},
           {"device_budget", s.deviceBudget},
           {"device_peak", s.devicePeak},
           {"buffers", std::move(buffers)},
           {"program", std::move(program)}};
  if (s.checkpointEvery > 1)
    out["checkpoint_every"] = s.checkpointEvery;
  if (s.selectiveLayers >= 0)
    out["selective_layers"] = s.selectiveLayers;
  // Optional: fp32 plans are written as before it existed.
  if (s.precision != "fp32")
    out["precision"] = s.precision;
  if (!s.gradDType.empty())
    out["grad_dtype"] = s.gradDType;
  return out;
}

/// Largest byte count a plan may hold (4 EiB).
constexpr int64_t kMaxBytes = int64_t(1) << 62;

int64_t getInt(const json &obj, const char *key, const std::string &where,
               int64_t min, int64_t max) {
  const json &v = field(obj, key, where);
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() &&
       v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) ||
      v.get<int64_t>() < min || v.get<int64_t>() > max)
    fail(where, std::string("field '") + key + "' must be an integer from " +
                    std::to_string(min) + " to " + std::to_string(max) +
                    ", got " + show(v));
  return v.get<int64_t>();
}

std::string getChoice(const json &obj, const char *key,
                      const std::string &where,
                      std::initializer_list<const char *> allowed) {
  std::string v = getString(obj, key, where);
  std::string list;
  for (const char *a : allowed) {
    if (v == a)
      return v;
    list += std::string(list.empty() ? "" : ", ") + a;
  }
  fail(where, std::string("field '") + key + "' must be one of " + list +
                  ", got '" + v + "'");
}

/// Fields a command may have besides "op" (and "body" for layers).
void checkFields(const json &obj, const std::string &where,
                 std::initializer_list<const char *> known) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (const char *k : known)
      ok |= it.key() == k;
    if (!ok)
      fail(where, "unknown field '" + it.key() + "'");
  }
}

PlanCommand parseCommand(const json &j, const std::string &where,
                         const Bundle &b, bool inBody,
                         const std::string &direction) {
  if (!j.is_object())
    fail(where, "expected an object");
  PlanCommand c;
  c.op = getString(j, "op", where);
  const std::string &op = c.op;
  auto need = [&](bool body) {
    if (body != inBody)
      fail(where, "'" + op + "' is " +
                      (body ? std::string("only valid in a layers body")
                            : std::string("not valid in a layers body")));
  };
  auto dir = [&](const char *d) {
    if (direction != d)
      fail(where,
           "'" + op + "' is only valid in a " + std::string(d) + " loop");
  };
  auto nonNeg = [&](const char *key) {
    c.attrs[key] = getInt(j, key, where, 0, kMaxDim);
  };
  auto str = [&](const char *key, std::initializer_list<const char *> allowed) {
    c.attrs[key] = getChoice(j, key, where, allowed);
  };
  if (op == "load_model_weights" || op == "return_model_grads") {
    need(false);
    checkFields(j, where, {"op"});
  } else if (op == "stage") {
    need(false);
    checkFields(j, where, {"op", "begin", "end"});
    int64_t begin = getInt(j, "begin", where, 0, kMaxDim);
    int64_t end = getInt(j, "end", where, begin, kMaxDim);
    auto fb = b.functions.find("forward_backward");
    if (fb == b.functions.end() ||
        end > static_cast<int64_t>(fb->second.ops.size()))
      fail(where, "ops [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") are not ops of forward_backward");
    c.attrs["begin"] = begin;
    c.attrs["end"] = end;
  } else if (op == "layers") {
    need(false);
    checkFields(j, where,
                {"op", "layer", "first", "count", "direction", "op_index",
                 "checkpoint_bytes", "body"});
    std::string name = getString(j, "layer", where);
    const Layer *l = b.layer(name);
    if (!l)
      fail(where, "names no layer of the model: '" + name + "'");
    int64_t first = getInt(j, "first", where, 0, l->count - 1);
    int64_t count = getInt(j, "count", where, 1, l->count - first);
    std::string d = getChoice(j, "direction", where, {"forward", "backward"});
    auto fb = b.functions.find("forward_backward");
    int64_t numOps = fb == b.functions.end()
                         ? 0
                         : static_cast<int64_t>(fb->second.ops.size());
    if (numOps == 0)
      fail(where, "the bundle has no forward_backward function");
    int64_t index = getInt(j, "op_index", where, 0, numOps - 1);
    const Op &target = fb->second.ops[index];
    const char *want = d == "forward" ? "apply_layers" : "apply_layers_grad";
    if (target.name != want || target.symbol != name)
      fail(where, "op_index " + std::to_string(index) + " is not an " + want +
                      " of layer '" + name + "'");
    c.attrs["layer"] = name;
    c.attrs["first"] = first;
    c.attrs["count"] = count;
    c.attrs["direction"] = d;
    c.attrs["op_index"] = index;
    if (j.contains("checkpoint_bytes"))
      c.attrs["checkpoint_bytes"] =
          getInt(j, "checkpoint_bytes", where, 0, kMaxBytes);
    const json &body = field(j, "body", where);
    if (!body.is_array())
      fail(where, "'body' must be an array");
    int computes = 0;
    for (size_t i = 0; i < body.size(); ++i) {
      c.body.push_back(parseCommand(
          body[i], where + ": body " + std::to_string(i), b, true, d));
      computes += c.body.back().op == "compute";
    }
    if (computes != 1)
      fail(where, "a layers body runs exactly one compute");
  } else if (op == "optimizer_update") {
    need(true);
    dir("forward");
    checkFields(j, where, {"op", "ahead"});
    nonNeg("ahead");
  } else if (op == "prefetch") {
    need(true);
    checkFields(j, where, {"op", "ahead", "stream", "event"});
    nonNeg("ahead");
    str("stream", {"h2d"});
    c.attrs["event"] = getString(j, "event", where);
  } else if (op == "wait_weights") {
    need(true);
    checkFields(j, where, {"op", "event"});
    c.attrs["event"] = getString(j, "event", where);
  } else if (op == "save") {
    need(true);
    dir("forward");
    checkFields(j, where, {"op", "to"});
    str("to", {"device", "host"});
  } else if (op == "restore") {
    need(true);
    dir("backward");
    checkFields(j, where, {"op", "from"});
    str("from", {"device", "host"});
  } else if (op == "compute") {
    need(true);
    checkFields(j, where, {"op", "fn"});
    str("fn", {"forward", "backward"});
    if (c.strAttr("fn") != direction)
      fail(where, "compute runs '" + c.strAttr("fn") + "' in a " + direction +
                      " loop");
  } else if (op == "grad_return") {
    need(true);
    dir("backward");
    checkFields(j, where, {"op", "stream"});
    str("stream", {"d2h"});
  } else {
    fail(where, "unknown command '" + op + "'");
  }
  return c;
}

std::shared_ptr<StepPlan> parseStep(const json &j, const std::string &where,
                                    const Bundle &b) {
  if (!j.is_object())
    fail(where, "must be an object");
  checkFields(j, where,
              {"batch", "seq", "micro_batches", "prefetch_depth", "recompute",
               "checkpoints", "device_budget", "device_peak", "buffers",
               "program", "precision", "checkpoint_every", "selective_layers",
               "grad_dtype"});
  auto s = std::make_shared<StepPlan>();
  s->batch = getInt(j, "batch", where, 1, kMaxDim);
  s->seq = getInt(j, "seq", where, 1, kMaxDim);
  s->microBatches = getInt(j, "micro_batches", where, 1, kMaxDim);
  s->prefetchDepth = getInt(j, "prefetch_depth", where, 1, kMaxDim);
  s->recompute =
      getChoice(j, "recompute", where, {"full", "none", "selective"});
  s->checkpoints = getChoice(j, "checkpoints", where, {"device", "host"});
  if (j.contains("precision"))
    s->precision = getChoice(j, "precision", where, {"fp32", "bf16"});
  if (j.contains("checkpoint_every"))
    s->checkpointEvery = getInt(j, "checkpoint_every", where, 1, kMaxDim);
  if (j.contains("selective_layers"))
    s->selectiveLayers = getInt(j, "selective_layers", where, 0, kMaxDim);
  if (j.contains("grad_dtype"))
    s->gradDType = getChoice(j, "grad_dtype", where, {"fp32", "bf16"});
  s->deviceBudget = getInt(j, "device_budget", where, 0, kMaxBytes);
  s->devicePeak = getInt(j, "device_peak", where, 0, kMaxBytes);
  if (s->deviceBudget > 0 && s->devicePeak > s->deviceBudget)
    fail(where, "device_peak " + std::to_string(s->devicePeak) +
                    " exceeds device_budget " +
                    std::to_string(s->deviceBudget));
  const json &buffers = field(j, "buffers", where);
  if (!buffers.is_array())
    fail(where, "'buffers' must be an array");
  std::vector<std::pair<int64_t, int64_t>> regions; // [offset, end)
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::string w = where + ": buffer " + std::to_string(i);
    const json &bj = buffers[i];
    if (!bj.is_object())
      fail(w, "expected an object");
    checkFields(bj, w, {"name", "kind", "space", "bytes", "offset"});
    PlanBuffer buf;
    buf.name = getString(bj, "name", w);
    if (buf.name.empty() || s->buffer(buf.name))
      fail(w, "buffer names must be unique and non-empty: '" + buf.name + "'");
    buf.kind = getChoice(bj, "kind", w,
                         {"model_weights", "model_grads", "weights", "grads",
                          "activations", "checkpoints", "stage", "workspace"});
    buf.space = getChoice(bj, "space", w, {"device", "host"});
    buf.bytes = getInt(bj, "bytes", w, 0, kMaxBytes);
    if (buf.space == "device") {
      buf.offset = getInt(bj, "offset", w, 0, kMaxBytes);
      if (buf.offset % 256 != 0)
        fail(w, "offset " + std::to_string(buf.offset) +
                    " is not a multiple of 256");
      if (buf.offset + buf.bytes > s->devicePeak)
        fail(w, "'" + buf.name + "' ends at byte " +
                    std::to_string(buf.offset + buf.bytes) +
                    ", beyond device_peak " + std::to_string(s->devicePeak));
      regions.emplace_back(buf.offset, buf.offset + buf.bytes);
    } else {
      if (bj.contains("offset"))
        fail(w, "a host buffer has no 'offset'");
      if (buf.kind != "checkpoints" && buf.kind != "activations" &&
          buf.kind != "stage" && buf.kind != "grads")
        fail(w, "only checkpoints, activations, the stage and the gradient "
                "ring can live in host memory");
    }
    s->buffers.push_back(std::move(buf));
  }
  std::sort(regions.begin(), regions.end());
  for (size_t i = 1; i < regions.size(); ++i)
    if (regions[i].first < regions[i - 1].second)
      fail(where, "device buffers overlap at bytes [" +
                      std::to_string(regions[i].first) + ", " +
                      std::to_string(regions[i - 1].second) + ")");
  const json &program = field(j, "program", where);
  if (!program.is_array())
    fail(where, "'program' must be an array");
  for (size_t i = 0; i < program.size(); ++i)
    s->program.push_back(parseCommand(
        program[i], where + ": program " + std::to_string(i), b, false, ""));
  return s;
}

} // namespace

std::string toJson(const Bundle &b) {
  json layers = json::array();
  for (const Layer &l : b.layers) {
    json layer{{"name", l.name},
               {"count", l.count},
               {"params", paramsToJson(l.params)},
               {"functions", functionsToJson(l.functions)}};
    if (!l.experts.empty()) {
      json experts = json::array();
      for (const Expert &e : l.experts)
        experts.push_back(json{{"name", e.name},
                               {"count", e.count},
                               {"params", paramsToJson(e.params)},
                               {"functions", functionsToJson(e.functions)}});
      layer["experts"] = std::move(experts);
    }
    layers.push_back(std::move(layer));
  }
  json doc{{"format", "mtc-bundle"},
           {"version", kVersion},
           {"model", b.model},
           {"config", b.config},
           {"params", paramsToJson(b.params)},
           {"layers", layers},
           {"functions", functionsToJson(b.functions)}};
  if (!b.modelHash.empty())
    doc["model_hash"] = b.modelHash;
  if (!b.cpuKernels.empty())
    doc["cpu_kernels"] =
        json{{"format", "elf-shared-object"},
             {"target", b.cpuKernelsTarget},
             {"xxh64", hex64(xxh64(b.cpuKernels.data(), b.cpuKernels.size()))},
             {"fused_xxh64", hex64(kernelOpsHash(b))},
             {"data", base64Encode(b.cpuKernels)}};
  if (!b.cudaKernels.source.empty()) {
    const CudaKernels &ck = b.cudaKernels;
    json kernels = json::array();
    for (const CudaFusedKernel &k : ck.kernels) {
      json entries = json::array();
      for (const CudaFusedEntry &e : k.entries)
        entries.push_back(json{{"entry", e.entry},
                               {"signature", e.signature},
                               {"block", e.block},
                               {"per_block", e.perBlock},
                               {"max_blocks", e.maxBlocks}});
      kernels.push_back(json{{"name", k.name},
                             {"launch", k.launch},
                             {"row", k.row},
                             {"entries", std::move(entries)}});
    }
    doc["cuda_kernels"] =
        json{{"format", "cuda-c"},
             {"file", ck.file},
             {"xxh64", hex64(xxh64(ck.source.data(), ck.source.size()))},
             {"fused_xxh64", hex64(kernelOpsHash(b))},
             {"source", ck.source},
             {"kernels", std::move(kernels)}};
  }
  if (!b.hfNames.empty()) {
    json names = json::object();
    for (const auto &[inst, ref] : b.hfNames)
      names[inst] = json{{"tensor", ref.tensor}, {"transpose", ref.transpose}};
    doc["hf_names"] = std::move(names);
  }
  if (!b.hfConfig.empty())
    doc["hf_config"] = b.hfConfig;
  if (!b.hfTokenizer.empty())
    doc["hf_tokenizer"] = b.hfTokenizer;
  if (b.step)
    doc["step"] = stepToJson(*b.step);
  return doc.dump(1) + "\n";
}

namespace {

/// Reads "cuda_kernels" into \p out; returns its fused_xxh64.
uint64_t parseCudaKernels(const json &k, const std::string &w,
                          CudaKernels &out) {
  if (!k.is_object())
    fail(w, "must be an object");
  if (getString(k, "format", w) != "cuda-c")
    fail(w, "unsupported format '" + getString(k, "format", w) +
                "' (expected 'cuda-c')");
  out.file = getString(k, "file", w);
  if (out.file.empty() || out.file.find('/') != std::string::npos)
    fail(w, "'file' must be a file name without '/', got '" + out.file + "'");
  out.source = getString(k, "source", w);
  if (out.source.empty())
    fail(w, "'source' is empty");
  uint64_t recorded = 0, fused = 0;
  if (!parseHex64(getString(k, "xxh64", w), recorded))
    fail(w, "'xxh64' must be 16 hex digits");
  if (!parseHex64(getString(k, "fused_xxh64", w), fused))
    fail(w, "'fused_xxh64' must be 16 hex digits");
  uint64_t actual = xxh64(out.source.data(), out.source.size());
  if (actual != recorded)
    fail(w, "checksum mismatch: the source hashes to xxh64 " + hex64(actual) +
                ", the bundle records " + hex64(recorded) +
                " (the kernels are damaged; compile the model again)");
  const json &kernels = field(k, "kernels", w);
  if (!kernels.is_array())
    fail(w, "'kernels' must be an array");
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string wk = w + ": kernel " + std::to_string(i);
    CudaFusedKernel fk;
    fk.name = getString(kernels[i], "name", wk);
    wk = w + ": kernel '" + fk.name + "'";
    if (out.kernel(fk.name))
      fail(wk, "duplicate kernel");
    fk.launch = getChoice(kernels[i], "launch", wk, {"elements", "rows"});
    fk.row = getInt(kernels[i], "row", wk, fk.launch == "rows" ? 1 : 0,
                    int64_t(1) << 40);
    const json &entries = field(kernels[i], "entries", wk);
    if (!entries.is_array() || entries.empty())
      fail(wk, "'entries' must be a non-empty array");
    for (size_t e = 0; e < entries.size(); ++e) {
      std::string we = wk + ": entry " + std::to_string(e);
      CudaFusedEntry fe;
      fe.entry = getString(entries[e], "entry", we);
      fe.signature = getString(entries[e], "signature", we);
      if (fe.entry != fk.name + "_" + fe.signature)
        fail(we, "entry '" + fe.entry +
                     "' is not the kernel's name, '_' and "
                     "its signature '" +
                     fe.signature + "'");
      if (fk.entry(fe.signature))
        fail(we, "duplicate signature '" + fe.signature + "'");
      if (fe.signature.find_first_not_of("fb_") != std::string::npos ||
          std::count(fe.signature.begin(), fe.signature.end(), '_') != 1)
        fail(we, "signature '" + fe.signature +
                     "' must be storage letters (f: f32, b: bf16) of the "
                     "inputs, '_' and those of the outputs");
      if (out.source.find(" " + fe.entry + "(") == std::string::npos)
        fail(we, "the source has no entry point '" + fe.entry + "'");
      fe.block = getInt(entries[e], "block", we, 32, 1024);
      if (fe.block % 32 != 0)
        fail(we, "field 'block' must be a multiple of 32, got " +
                     std::to_string(fe.block));
      fe.perBlock = getInt(entries[e], "per_block", we, 1, int64_t(1) << 30);
      fe.maxBlocks = getInt(entries[e], "max_blocks", we, 0, (1LL << 31) - 1);
      fk.entries.push_back(std::move(fe));
    }
    out.kernels.push_back(std::move(fk));
  }
  return fused;
}

/// The threads per block entry \p entry of \p source was compiled for (its
/// `__launch_bounds__(N)`), or 0 when the source does not say.
int64_t launchBound(const std::string &source, const std::string &entry) {
  const std::string tag = "__launch_bounds__(";
  size_t at = source.find(") " + entry + "(");
  if (at == std::string::npos)
    return 0;
  size_t open = source.rfind(tag, at);
  if (open == std::string::npos || at - open > tag.size() + 8)
    return 0;
  int64_t n = 0;
  for (size_t i = open + tag.size(); i < at; ++i) {
    if (source[i] < '0' || source[i] > '9')
      return 0;
    n = n * 10 + (source[i] - '0');
  }
  return n;
}

/// The launch rule of entry \p e of kernel \p k covers every item of fused
/// op \p op (docs/bundle.md, "cuda_kernels"): a rows kernel for a region
/// that reduces rows (an elements kernel for one that does not) with the
/// row length of that reduction; no more threads per block than the entry
/// was compiled for; and, for rows, no more rows per block than its block
/// computes (one per warp up to kCudaWarpRowMax elements, else one). An
/// elements kernel loops over its elements whatever its grid.
void checkCudaLaunch(const CudaKernels &ck, const CudaFusedKernel &k,
                     const CudaFusedEntry &e, const Op &op,
                     const std::string &w) {
  const Op *reduction = nullptr;
  if (op.region)
    for (const Op &o : op.region->ops)
      if (o.name == "sum" || o.name == "mean" || o.name == "max") {
        reduction = &o;
        break;
      }
  const std::string at =
      " (the fused op at " + (op.loc.empty() ? std::string("?") : op.loc) + ")";
  if (!reduction && k.launch != "elements")
    fail(w, "is launched by rows, but its region reduces nothing" + at +
                ": an elements kernel");
  if (reduction && k.launch != "rows")
    fail(w, "is launched by elements, but its region reduces rows" + at +
                ": a rows kernel");
  if (reduction && !reduction->operands.empty()) {
    const Shape &shape =
        op.region->values.at(static_cast<size_t>(reduction->operands[0])).shape;
    const int64_t row = shape.empty() ? 1 : shape.back();
    if (row != k.row)
      fail(w, "has rows of " + std::to_string(k.row) +
                  " elements, but its region reduces rows of " +
                  std::to_string(row) + at);
  }
  const int64_t bound = launchBound(ck.source, e.entry);
  if (bound > 0 && e.block > bound)
    fail(w, "entry '" + e.entry + "' launches blocks of " +
                std::to_string(e.block) +
                " threads, but it was compiled for "
                "at most " +
                std::to_string(bound) + " (__launch_bounds__)");
  if (k.launch != "rows")
    return;
  const int64_t rowsPerBlock = k.row <= kCudaWarpRowMax ? e.block / 32 : 1;
  if (e.perBlock > rowsPerBlock)
    fail(w, "entry '" + e.entry + "' gives each block " +
                std::to_string(e.perBlock) + " rows, but a block of " +
                std::to_string(e.block) + " threads computes " +
                std::to_string(rowsPerBlock) +
                (k.row <= kCudaWarpRowMax
                     ? " (one row per warp of 32 threads)"
                     : " (rows of over " + std::to_string(kCudaWarpRowMax) +
                           " elements take a block each)") +
                ": rows would be left unwritten");
}

/// Every fused op naming a kernel has that kernel and an entry for its
/// storage signature in the bundle's CUDA kernels, with a launch rule that
/// covers it (checkCudaLaunch).
void checkCudaFusedOps(const Bundle &b, const std::string &w) {
  forEachFusedKernelOp(b, [&](const Op &op, const std::string &sig) {
    std::string name = op.strAttr("kernel");
    std::string what = "the fused op at " + (op.loc.empty() ? "?" : op.loc) +
                       " (kernel '" + name + "')";
    const CudaFusedKernel *k = b.cudaKernels.kernel(name);
    if (!k)
      fail(w, "no kernel '" + name + "' for " + what);
    const CudaFusedEntry *e = k->entry(sig);
    if (!e)
      fail(w, "kernel '" + name + "' has no entry for storage '" + sig +
                  "' of " + what);
    checkCudaLaunch(b.cudaKernels, *k, *e, op, w + ": kernel '" + name + "'");
  });
}

} // namespace

Expected<Bundle> fromJson(const std::string &text) {
  // Every failure of the parser (a number past a double's range included)
  // is an error with its place, never an exception.
  Expected<json> parsed = parseJson(text, "bundle");
  if (!parsed)
    return parsed.status();
  try {
    const json &doc = *parsed;
    const std::string where = "bundle";
    if (getString(doc, "format", where) != "mtc-bundle")
      fail(where, "not an mtc bundle (format is not 'mtc-bundle')");
    const json &version = field(doc, "version", where);
    if (!version.is_number_integer() || version.get<int64_t>() != kVersion)
      fail(where, "unsupported bundle version " + show(version) +
                      " (this runtime reads version " +
                      std::to_string(kVersion) + ")");
    Bundle b;
    b.model = getString(doc, "model", where);
    const json &config = field(doc, "config", where);
    if (!config.is_object())
      fail(where, "'config' must be an object");
    for (auto it = config.begin(); it != config.end(); ++it) {
      if (!it.value().is_number())
        fail(where, "config entry '" + it.key() + "' must be a number");
      b.config[it.key()] = it.value().get<double>();
    }
    b.params = parseParams(field(doc, "params", where), where);
    const json &layers = field(doc, "layers", where);
    if (!layers.is_array())
      fail(where, "'layers' must be an array");
    for (size_t i = 0; i < layers.size(); ++i) {
      std::string w = where + ": layer " + std::to_string(i);
      Layer l;
      l.name = getString(layers[i], "name", w);
      w = where + ": layer '" + l.name + "'";
      l.count = parseCount(layers[i], w);
      l.params = parseParams(field(layers[i], "params", w), w);
      l.functions = parseFunctions(field(layers[i], "functions", w), w);
      if (layers[i].contains("experts")) {
        const json &experts = layers[i]["experts"];
        if (!experts.is_array())
          fail(w, "'experts' must be an array");
        for (size_t k = 0; k < experts.size(); ++k) {
          Expert e = parseExpert(experts[k], w, k);
          if (l.expert(e.name))
            fail(w + ": expert " + std::to_string(k),
                 "duplicate expert '" + e.name + "'");
          l.experts.push_back(std::move(e));
        }
      }
      b.layers.push_back(std::move(l));
    }
    b.functions = parseFunctions(field(doc, "functions", where), where);
    uint64_t fusedHash = 0;
    if (doc.contains("cpu_kernels")) {
      const json &k = doc["cpu_kernels"];
      std::string w = where + ": cpu_kernels";
      if (!k.is_object())
        fail(w, "must be an object");
      if (getString(k, "format", w) != "elf-shared-object")
        fail(w, "unsupported format '" + getString(k, "format", w) +
                    "' (expected 'elf-shared-object')");
      b.cpuKernelsTarget = getString(k, "target", w);
      if (!k.contains("xxh64") || !k.contains("fused_xxh64"))
        fail(w, "missing field '" +
                    std::string(k.contains("xxh64") ? "fused_xxh64" : "xxh64") +
                    "' (the kernels' checksums; bundles written before mtc "
                    "recorded them must be compiled again)");
      uint64_t recorded;
      if (!parseHex64(getString(k, "xxh64", w), recorded))
        fail(w, "'xxh64' must be 16 hex digits");
      if (!base64Decode(getString(k, "data", w), b.cpuKernels))
        fail(w, "'data' is not valid base64");
      uint64_t actual = xxh64(b.cpuKernels.data(), b.cpuKernels.size());
      if (actual != recorded)
        fail(w, "checksum mismatch: the kernels hash to xxh64 " +
                    hex64(actual) + ", the bundle records " + hex64(recorded) +
                    " (the compiled code is damaged; compile the model "
                    "again)");
      if (b.cpuKernels.compare(0, 4, "\177ELF") != 0)
        fail(w, "'data' is not an ELF file");
      if (!parseHex64(getString(k, "fused_xxh64", w), fusedHash))
        fail(w, "'fused_xxh64' must be 16 hex digits");
    }
    uint64_t cudaFusedHash = 0;
    if (doc.contains("cuda_kernels"))
      cudaFusedHash = parseCudaKernels(doc["cuda_kernels"],
                                       where + ": cuda_kernels", b.cudaKernels);
    if (doc.contains("model_hash")) {
      b.modelHash = getString(doc, "model_hash", where);
      if (b.modelHash.size() != 16 ||
          b.modelHash.find_first_not_of("0123456789abcdef") !=
              std::string::npos)
        fail(where, "'model_hash' must be 16 lowercase hex digits");
    }
    if (doc.contains("hf_config")) {
      if (!doc["hf_config"].is_string())
        fail(where + ": hf_config", "must be a string (config.json text)");
      b.hfConfig = doc["hf_config"].get<std::string>();
    }
    if (doc.contains("hf_tokenizer")) {
      if (!doc["hf_tokenizer"].is_string())
        fail(where + ": hf_tokenizer",
             "must be a string (tokenizer.json text)");
      b.hfTokenizer = doc["hf_tokenizer"].get<std::string>();
    }
    if (doc.contains("hf_names")) {
      const json &names = doc["hf_names"];
      std::string w = where + ": hf_names";
      if (!names.is_object())
        fail(w, "must be an object");
      std::set<std::string> instances;
      for (const Param &p : b.params)
        instances.insert(p.name);
      for (const Layer &l : b.layers)
        for (int64_t i = 0; i < l.count; ++i) {
          std::string prefix = l.name + "." + std::to_string(i) + ".";
          for (const Param &p : l.params)
            instances.insert(prefix + p.name);
          for (const Expert &x : l.experts)
            for (int64_t e = 0; e < x.count; ++e)
              for (const Param &p : x.params)
                instances.insert(prefix + x.name + "." + std::to_string(e) +
                                 "." + p.name);
        }
      for (auto it = names.begin(); it != names.end(); ++it) {
        std::string we = w + ": '" + it.key() + "'";
        if (!instances.count(it.key()))
          fail(we, "is not a parameter instance of the model");
        if (!it.value().is_object())
          fail(we, "must be an object {\"tensor\": ..., \"transpose\": ...}");
        HFTensorRef ref;
        ref.tensor = getString(it.value(), "tensor", we);
        if (ref.tensor.empty())
          fail(we, "'tensor' is empty");
        const json &t = field(it.value(), "transpose", we);
        if (!t.is_boolean())
          fail(we, "'transpose' must be true or false");
        ref.transpose = t.get<bool>();
        b.hfNames[it.key()] = std::move(ref);
      }
    }
    if (doc.contains("step"))
      b.step = parseStep(doc["step"], where + ": step", b);
    if (Status invalid = validate(b); !invalid)
      fail(where, invalid.message());
    // After validation, which names what is wrong with an edited op; this
    // catches edits that leave a valid body a kernel was not compiled for.
    if (!b.cpuKernels.empty()) {
      uint64_t actual = kernelOpsHash(b);
      if (actual != fusedHash)
        fail(where + ": cpu_kernels",
             "checksum mismatch: the fused ops that name compiled kernels "
             "hash to xxh64 " +
                 hex64(actual) + ", the bundle records " + hex64(fusedHash) +
                 " (a kernel would run on operands it was not compiled for; "
                 "compile the model again)");
    }
    if (!b.cudaKernels.source.empty()) {
      std::string w = where + ": cuda_kernels";
      uint64_t actual = kernelOpsHash(b);
      if (actual != cudaFusedHash)
        fail(w, "checksum mismatch: the fused ops that name compiled kernels "
                "hash to xxh64 " +
                    hex64(actual) + ", the bundle records " +
                    hex64(cudaFusedHash) +
                    " (a kernel would run on operands it was not compiled "
                    "for; compile the model again)");
      checkCudaFusedOps(b, w);
    }
    return b;
  } catch (const ReadError &e) {
    return Status::error(e.message);
  } catch (const json::exception &e) {
    return Status::error(std::string("malformed bundle JSON: ") + e.what());
  }
}

//===----------------------------------------------------------------------===//
// Base64
//===----------------------------------------------------------------------===//

namespace {
constexpr char kBase64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
} // namespace

std::string base64Encode(const std::string &bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 |
                 uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6)
      out += kBase64[(v >> s) & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (rest == 2)
      v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += rest == 2 ? kBase64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool base64Decode(const std::string &text, std::string &out) {
  if (text.size() % 4 != 0)
    return false;
  int8_t value[256];
  std::memset(value, -1, sizeof(value));
  for (int k = 0; k < 64; ++k)
    value[uint8_t(kBase64[k])] = static_cast<int8_t>(k);
  out.clear();
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      int8_t d = k >= 4 - pad ? 0 : value[uint8_t(text[i + k])];
      if (d < 0)
        return false;
      v = v << 6 | uint32_t(d);
    }
    out += char(v >> 16);
    if (pad < 2)
      out += char((v >> 8) & 255);
    if (pad < 1)
      out += char(v & 255);
  }
  return true;
}

Status writeFile(const Bundle &b, const std::string &path) {
  return writeFileAtomically(path, toJson(b));
}

Expected<Bundle> readFile(const std::string &path) {
  if (::access(path.c_str(), F_OK) != 0)
    return Status::error("cannot open '" + path + "': " + std::strerror(errno));
  Expected<std::string> text = readRegularFile(path);
  if (!text)
    return text.status();
  Expected<Bundle> b = fromJson(*text);
  if (!b)
    return b.status().withPrefix(path);
  return b;
}

} // namespace mtc::bundle
