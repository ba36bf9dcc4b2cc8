//===- StepProgram.cpp - A step program decoded once ----------------------===//
//
// Part of mtc. See StepProgram.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/stream/StepProgram.h"

#include <optional>
#include <unordered_map>

namespace mtc::stream {

namespace {

const char *const kNames[] = {
#define MTC_STEP_COMMAND(Kind, Name) Name,
#include "lib/Bundle/StepCommands.def"
};

std::optional<StepCommandKind> kindOf(const std::string &name) {
  static const std::unordered_map<std::string, StepCommandKind> index = [] {
    std::unordered_map<std::string, StepCommandKind> m;
    for (size_t k = 0; k < sizeof(kNames) / sizeof(kNames[0]); ++k)
      m.emplace(kNames[k], static_cast<StepCommandKind>(k));
    return m;
  }();
  auto it = index.find(name);
  if (it == index.end())
    return std::nullopt;
  return it->second;
}

/// Thrown inside this file only; decodeStepProgram() returns it as a Status.
struct DecodeError {
  std::string message;
};

[[noreturn]] void fail(const std::string &msg) { throw DecodeError{msg}; }

/// Integer field \p key of \p c, which must be there.
int64_t intField(const bundle::PlanCommand &c, const char *key) {
  auto it = c.attrs.find(key);
  if (it == c.attrs.end())
    fail("'" + c.op + "' has no field '" + key + "'");
  if (const int64_t *v = std::get_if<int64_t>(&it->second))
    return *v;
  fail("field '" + std::string(key) + "' of '" + c.op + "' must be an integer");
}

/// String field \p key of \p c, one of \p allowed.
std::string choiceField(const bundle::PlanCommand &c, const char *key,
                        std::initializer_list<const char *> allowed) {
  auto it = c.attrs.find(key);
  if (it == c.attrs.end())
    fail("'" + c.op + "' has no field '" + key + "'");
  const std::string *v = std::get_if<std::string>(&it->second);
  std::string list;
  for (const char *a : allowed) {
    if (v && *v == a)
      return *v;
    list += std::string(list.empty() ? "" : ", ") + "'" + a + "'";
  }
  fail("field '" + std::string(key) + "' of '" + c.op + "' must be one of " +
       list + (v ? ", got '" + *v + "'" : ""));
}

StepCommand decodeBody(const bundle::PlanCommand &c) {
  std::optional<StepCommandKind> kind = kindOf(c.op);
  StepCommand d;
  switch (kind ? *kind : StepCommandKind::LoadModelWeights) {
  case StepCommandKind::OptimizerUpdate:
  case StepCommandKind::Prefetch:
    d.ahead = intField(c, "ahead");
    if (d.ahead < 0)
      fail("field 'ahead' of '" + c.op + "' must not be negative");
    break;
  case StepCommandKind::Save:
    d.host = choiceField(c, "to", {"device", "host"}) == "host";
    break;
  case StepCommandKind::Restore:
    d.host = choiceField(c, "from", {"device", "host"}) == "host";
    break;
  case StepCommandKind::WaitWeights:
  case StepCommandKind::Compute:
  case StepCommandKind::GradReturn:
    break;
  case StepCommandKind::LoadModelWeights:
  case StepCommandKind::Stage:
  case StepCommandKind::Layers:
  case StepCommandKind::ReturnModelGrads:
    fail("unknown command '" + c.op + "' in a layers loop");
  }
  d.kind = *kind;
  return d;
}

StepCommand decodeTop(const bundle::PlanCommand &c,
                      const bundle::Function &fb) {
  std::optional<StepCommandKind> kind = kindOf(c.op);
  StepCommand d;
  switch (kind ? *kind : StepCommandKind::Compute) {
  case StepCommandKind::LoadModelWeights:
  case StepCommandKind::ReturnModelGrads:
    break;
  case StepCommandKind::Stage: {
    int64_t begin = c.intAttr("begin", -1), end = c.intAttr("end", -1);
    if (begin < 0 || end < begin || end > static_cast<int64_t>(fb.ops.size()))
      fail("stage [" + std::to_string(begin) + ", " + std::to_string(end) +
           ") is outside forward_backward's " + std::to_string(fb.ops.size()) +
           " ops");
    d.begin = static_cast<size_t>(begin);
    d.end = static_cast<size_t>(end);
    break;
  }
  case StepCommandKind::Layers: {
    int64_t index = c.intAttr("op_index", -1);
    if (index < 0 || index >= static_cast<int64_t>(fb.ops.size()))
      fail("layers loop names op " + std::to_string(index) +
           ", outside forward_backward");
    const bundle::Op &op = fb.ops[static_cast<size_t>(index)];
    d.forward =
        choiceField(c, "direction", {"forward", "backward"}) == "forward";
    d.layer = c.strAttr("layer");
    d.first = c.intAttr("first", -1);
    d.count = c.intAttr("count", -1);
    d.opIndex = static_cast<size_t>(index);
    d.op = &op;
    // Checked once here, by name: the loop runs on the decoded fields.
    if (op.name != (d.forward ? "apply_layers" : "apply_layers_grad") ||
        op.symbol != d.layer || op.intAttr("first") != d.first ||
        op.intAttr("count") != d.count)
      fail("layers loop over '" + d.layer + "' does not match op " +
           std::to_string(index) + " ('" + op.name + " @" + op.symbol + "')");
    for (const bundle::PlanCommand &bc : c.body)
      d.body.push_back(decodeBody(bc));
    break;
  }
  case StepCommandKind::OptimizerUpdate:
  case StepCommandKind::Prefetch:
  case StepCommandKind::WaitWeights:
  case StepCommandKind::Save:
  case StepCommandKind::Restore:
  case StepCommandKind::Compute:
  case StepCommandKind::GradReturn:
    fail("unknown command '" + c.op + "' in the program");
  }
  d.kind = *kind;
  return d;
}

} // namespace

const char *stepCommandName(StepCommandKind kind) {
  return kNames[static_cast<size_t>(kind)];
}

Expected<std::vector<StepCommand>>
decodeStepProgram(const bundle::StepPlan &plan,
                  const bundle::Function &forwardBackward) {
  std::vector<StepCommand> out;
  try {
    for (const bundle::PlanCommand &c : plan.program)
      out.push_back(decodeTop(c, forwardBackward));
  } catch (const DecodeError &e) {
    return Status::error(e.message);
  }
  return out;
}

} // namespace mtc::stream
