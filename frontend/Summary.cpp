//===- Summary.cpp - Parameter summary of a checked model -------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "frontend/Summary.h"

#include <iomanip>
#include <sstream>

namespace mtc {
namespace {

/// 1234567 -> "1,234,567".
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count && count % 3 == 0)
      out.push_back(',');
    out.push_back(*it);
    ++count;
  }
  if (n < 0)
    out.push_back('-');
  return std::string(out.rbegin(), out.rend());
}

/// "12.3M", "1.2B", "512" — a short human figure.
std::string human(int64_t n) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2);
  if (n >= 1000000000)
    s << n / 1e9 << "B";
  else if (n >= 1000000)
    s << n / 1e6 << "M";
  else if (n >= 1000)
    s << n / 1e3 << "K";
  else
    return std::to_string(n);
  return s.str();
}

void printParams(const std::vector<Param> &params, const std::string &indent,
                 std::ostream &os) {
  for (const Param &p : params) {
    os << indent << std::left << std::setw(18) << p.name << " " << std::setw(16)
       << formatShape(p.shape) << " " << std::setw(5) << dtypeName(p.dtype)
       << " " << std::setw(14) << ast::initKindName(p.init) << std::right
       << std::setw(14) << grouped(p.numel()) << "\n";
  }
}

int64_t sumParams(const std::vector<Param> &params) {
  int64_t n = 0;
  for (const Param &p : params)
    n += p.numel();
  return n;
}

} // namespace

void printSummary(const CheckedModel &model, std::ostream &os) {
  os << "model " << model.name << "\n";
  if (!model.config.empty()) {
    os << "config:";
    for (const auto &[name, v] : model.config) {
      os << " " << name << "=";
      if (v.isInt)
        os << static_cast<int64_t>(v.value);
      else
        os << v.value;
    }
    os << "\n";
  }
  int64_t modelLevel = sumParams(model.params);
  os << "\nmodel parameters (" << grouped(modelLevel) << "):\n";
  printParams(model.params, "  ", os);

  for (const Layer &layer : model.layers) {
    int64_t per = layer.paramsPerInstance();
    os << "\nlayer " << layer.name << " x " << layer.count << " ("
       << grouped(per) << " per instance, " << grouped(per * layer.count)
       << " in all):\n";
    printParams(layer.params, "  ", os);
    for (const Expert &e : layer.experts) {
      int64_t pe = e.paramsPerExpert();
      os << "  expert " << e.name << " x " << e.count << " (" << grouped(pe)
         << " per expert, " << grouped(pe * e.count) << " per layer):\n";
      printParams(e.params, "    ", os);
    }
  }

  int64_t total = model.totalParams();
  os << "\nlayer instances: " << model.totalLayerInstances() << "\n";
  os << "total: " << grouped(total) << " (" << human(total) << ")\n";
  os << "parameters: " << total << "\n";
}

} // namespace mtc
