//===- Moe.cpp - Mixture-of-experts routing -------------------------------===//
//
// Part of mtc. The top-k selection of the moe ops: per row a partial sort of
// the expert indices by (probability descending, index ascending), which is
// a strict total order, so the choice does not depend on the sort's
// algorithm (NaN probabilities rank as -inf).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace mtc::cpu {

void moeTopK(const float *probs, int64_t n, int64_t E, int64_t K,
             bool normalize, int32_t *choice, float *gate) {
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    const float *p = probs + t * E;
    auto key = [&](int32_t e) { return std::isnan(p[e]) ? -INFINITY : p[e]; };
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int32_t a, int32_t b) {
                        float ka = key(a), kb = key(b);
                        return ka > kb || (ka == kb && a < b);
                      });
    std::copy(order.begin(), order.begin() + K, choice + t * K);
    float sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      gate[t * K + k] = p[choice[t * K + k]];
      sum += gate[t * K + k];
    }
    if (normalize)
      for (int64_t k = 0; k < K; ++k)
        gate[t * K + k] /= sum;
  }
}

} // namespace mtc::cpu
