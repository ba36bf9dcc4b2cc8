//===- InitWeights.cpp - Start a model from given weights -----------------===//
//
// Part of mtc. See InitWeights.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/InitWeights.h"

#include "lib/Format/Safetensors.h"

#include <set>
#include <vector>

namespace mtc::driver {

namespace {

/// Every name, one per line after the heading (the user fixes each).
std::string listAll(const std::string &heading,
                    const std::vector<std::string> &items) {
  std::string out =
      "\n  " + heading + " (" + std::to_string(items.size()) + "):";
  for (const std::string &s : items)
    out += "\n    " + s;
  return out;
}

} // namespace

Expected<size_t> loadInitWeights(exec::ParamStore &store,
                                 const std::string &path) {
  Expected<SafetensorsModel> file = SafetensorsModel::open(path);
  if (!file)
    return Status::error("--init-from: " + file.message());

  // Pass 1: names, shapes and dtypes from the headers, every problem listed;
  // pass 2 reads the values only when all agree.
  std::vector<std::string> missing, mismatched, unexpected;
  std::set<std::string> used;
  for (const exec::ParamSlot &s : store.slots()) {
    used.insert(s.name);
    const TensorInfo *t = file->find(s.name);
    std::vector<int64_t> want(s.decl->shape.begin(), s.decl->shape.end());
    if (!t) {
      missing.push_back(s.name + " " + formatTensorShape(want));
      continue;
    }
    if (t->shape != want)
      mismatched.push_back(s.name + ": the file has " +
                           formatTensorShape(t->shape) + ", the model " +
                           formatTensorShape(want));
    else if (t->dtype != TensorDType::F32 && t->dtype != TensorDType::BF16 &&
             t->dtype != TensorDType::F16 && t->dtype != TensorDType::F64)
      mismatched.push_back(s.name + ": dtype " +
                           std::string(dtypeName(t->dtype)) +
                           " (expected F32, BF16, F16 or F64)");
  }
  for (const std::string &name : file->names())
    if (!used.count(name))
      unexpected.push_back(name + " " +
                           formatTensorShape(file->find(name)->shape));
  if (!missing.empty() || !mismatched.empty() || !unexpected.empty()) {
    std::string msg = "--init-from " + path +
                      ": the tensors do not match the model's parameters";
    if (!missing.empty())
      msg += listAll("parameters without a tensor", missing);
    if (!mismatched.empty())
      msg += listAll("shape or dtype mismatches", mismatched);
    if (!unexpected.empty())
      msg += listAll("tensors that are no parameter of the model", unexpected);
    return Status::error(msg);
  }
  for (exec::ParamSlot &s : store.slots())
    if (Status st = file->readAsF32(s.name, s.value.data(), s.value.size());
        !st.ok())
      return Status::error("--init-from: " + st.message());
  return store.slots().size();
}

} // namespace mtc::driver
