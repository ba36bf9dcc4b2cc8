//===- GradCheck.cpp - Compiled gradients vs finite differences -----------===//
//
// Part of mtc.
//
// Numerics: the model runs in fp32, the loss is read in double. For a
// direction d the check compares <g, d> with the five-point central
// difference of t -> L(p + t d) at 0 (truncation O(h^4), so h can be large
// enough for fp32 rounding of the loss not to matter).
// The relative error is |fd - an| / max(|fd|, |an|, floor), where the floor
// (1e-3 of the largest |an| seen in the tensor and 1e-4 absolute) keeps
// coordinates whose gradient is zero up to rounding from dominating.
//
// Mixture-of-experts routing (each token's top-k experts) is piecewise
// constant in the parameters: a finite difference whose evaluations route a
// token differently measures a jump, not a derivative, and with hundreds of
// tokens some near-tie always flips within any useful step. The check
// therefore pins the routing: the unperturbed forward pass records every moe
// op's expert choices and the finite differences replay them
// (Executor::pinRouting), so they differentiate the smooth loss of the
// routing piece the compiled gradient belongs to. Everything else (gate
// weights, their renormalisation, the router softmax, the aux loss' mean
// probabilities) follows the perturbed parameters. The summary reports how
// many evaluations would have routed differently without the pin.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/GradCheck.h"
#include "runtime/driver/HFWeights.h"

#include "runtime/exec/Executor.h"
#include "runtime/exec/ParamStore.h"
#include "runtime/train/Random.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <numeric>

namespace mtc::driver {

namespace {

/// Fourth-order central difference of f at 0: truncation error O(h^4), so
/// a step large enough to drown fp32 rounding noise stays accurate.
template <typename F> double fivePoint(F &&f, double h) {
  double a = f(2 * h), b = f(h), c = f(-h), d = f(-2 * h);
  return (-a + 8 * b - 8 * c + d) / (12 * h);
}

double relError(double fd, double an, double floor) {
  double denom = std::max({std::fabs(fd), std::fabs(an), floor});
  return std::fabs(fd - an) / denom;
}

} // namespace

static int gradCheckImpl(const bundle::Bundle &b, const GradCheckOptions &opts,
                         std::ostream &os);

int gradCheck(const bundle::Bundle &b, const GradCheckOptions &opts,
              std::ostream &os) {
  try {
    return gradCheckImpl(b, opts, os);
  } catch (const exec::ExecError &e) {
    os << "mtc: error: " << e.message << "\n";
  } catch (const std::exception &e) {
    os << "mtc: error: " << e.what() << "\n";
  }
  return -1;
}

static int gradCheckImpl(const bundle::Bundle &b, const GradCheckOptions &opts,
                         std::ostream &os) {
  exec::ParamStore store(b);
  store.initialize(opts.seed);
  if (!opts.hfWeights.empty()) {
    if (Status st = loadHFWeights(store, b, opts.hfWeights); !st.ok()) {
      os << "mtc: error: " << st.message() << "\n";
      return -1;
    }
    os << "initialised from " << opts.hfWeights << "\n";
  }
  exec::Executor ex(b, store);
  if (Status st = ex.useBundleKernels(); !st.ok()) {
    os << "mtc: error: " << st.message() << "\n";
    return -1;
  }

  int64_t vocab = std::max<int64_t>(b.vocabulary(), 2);

  size_t n = static_cast<size_t>(opts.batch * opts.seq);
  std::vector<int32_t> tokens(n), targets(n);
  train::Rng rng(opts.seed, 7);
  for (size_t i = 0; i < n; ++i) {
    tokens[i] = static_cast<int32_t>(rng.below(vocab));
    targets[i] = static_cast<int32_t>(rng.below(vocab));
  }

  store.zeroGrads();
  ex.pinRouting(exec::Executor::RoutingPin::Record);
  double loss0 =
      ex.forwardBackward(tokens.data(), targets.data(), opts.batch, opts.seq);
  ex.pinRouting(exec::Executor::RoutingPin::Replay);
  const uint64_t routing = ex.routingSignature();
  int64_t evaluations = 0, rerouted = 0;
  os << "gradcheck: batch " << opts.batch << ", seq " << opts.seq << ", loss "
     << std::setprecision(8) << loss0 << ", " << store.slots().size()
     << " tensors, tolerance " << opts.tolerance << "\n";

  auto lossAt = [&]() {
    double l = ex.loss(tokens.data(), targets.data(), opts.batch, opts.seq);
    ++evaluations;
    if (ex.routingSignature() != routing)
      ++rerouted;
    return l;
  };

  int failures = 0;
  double worst = 0;
  for (exec::ParamSlot &s : store.slots()) {
    exec::HostArray &p = s.value;
    const std::vector<float> g = s.grad.toVector();
    size_t len = p.size();
    double gmax = 0;
    for (size_t i = 0; i < len; ++i)
      gmax = std::max(gmax, std::fabs(double(g[i])));
    double h = opts.step;
    // Below ~1e-4 the fp32 rounding of the loss (about 1e-7 relative,
    // divided by the step) dominates any finite difference.
    double floor = std::max(1e-3 * gmax, 1e-4);

    // Directional check along a random unit vector.
    std::vector<float> dir(len);
    train::initNormal(dir.data(), len, 0.0f, 1.0f, opts.seed + 1,
                      static_cast<uint64_t>(&s - store.slots().data()));
    double norm = 0;
    for (float d : dir)
      norm += double(d) * d;
    norm = std::sqrt(norm);
    double an = 0;
    for (size_t i = 0; i < len; ++i) {
      dir[i] = static_cast<float>(dir[i] / norm);
      an += double(g[i]) * dir[i];
    }
    std::vector<float> saved = p.toVector();
    auto lossAlong = [&](double t) {
      for (size_t i = 0; i < len; ++i)
        p[i] = static_cast<float>(saved[i] + t * dir[i]);
      return lossAt();
    };
    double fdDir = fivePoint(lossAlong, h);
    std::copy(saved.begin(), saved.end(), p.begin());
    double dirErr = relError(fdDir, an, floor), coordErr = 0;

    // Coordinate checks on the largest gradients.
    std::vector<size_t> order(len);
    std::iota(order.begin(), order.end(), 0);
    size_t k = std::min<size_t>(opts.coordinates, len);
    std::partial_sort(
        order.begin(), order.begin() + k, order.end(),
        [&](size_t a, size_t c) { return std::fabs(g[a]) > std::fabs(g[c]); });
    for (size_t j = 0; j < k; ++j) {
      size_t i = order[j];
      float orig = p[i];
      double fd = fivePoint(
          [&](double t) {
            p[i] = static_cast<float>(orig + t);
            return lossAt();
          },
          h);
      p[i] = orig;
      coordErr = std::max(coordErr, relError(fd, g[i], floor));
    }
    double err = std::max(dirErr, coordErr);
    bool ok = err <= opts.tolerance;
    if (!ok)
      ++failures;
    worst = std::max(worst, err);
    os << "  " << std::left << std::setw(28) << s.name << std::right
       << " max rel error " << std::scientific << std::setprecision(2) << err
       << " (direction " << dirErr << ", largest coordinates " << coordErr
       << ")" << std::defaultfloat << (ok ? "" : "  FAILED") << "\n";
  }
  os << (failures ? "gradcheck FAILED: " : "gradcheck passed: ") << failures
     << " of " << store.slots().size() << " tensors beyond tolerance (worst "
     << std::scientific << std::setprecision(2) << worst << std::defaultfloat
     << ")\n";
  if (routing != 0)
    os << "gradcheck: mixture-of-experts routing pinned: " << rerouted << " of "
       << evaluations << " loss evaluations would have chosen other experts\n";
  return failures;
}

} // namespace mtc::driver
