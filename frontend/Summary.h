//===- Summary.h - Parameter summary of a checked model ---------*- C++ -*-===//
//
// Part of mtc. What `mtc compile --emit=summary` prints.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_FRONTEND_SUMMARY_H
#define MTC_FRONTEND_SUMMARY_H

#include "frontend/Sema.h"

#include <ostream>

namespace mtc {

/// Prints per-parameter shapes and counts, per-layer and total counts, and a
/// final machine-readable line `parameters: <N>` with the exact total.
void printSummary(const CheckedModel &model, std::ostream &os);

} // namespace mtc

#endif // MTC_FRONTEND_SUMMARY_H
