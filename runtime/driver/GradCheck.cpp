//===- GradCheck.cpp - Compiled gradients vs finite differences -----------===//
//
// Part of mtc.
//
// Numerics: the model runs in fp32, the loss is read in double. For a
// direction d (a random unit vector over a tensor, or one coordinate) the
// check compares <g, d> with a finite difference of phi(t) = L(p + t d) at 0,
// and accepts |fd - an| <= E + tolerance * scale, where E bounds the finite
// difference's own error and scale = max(|fd|, |an|, 1e-3 * the tensor's
// largest |g|). The error model (docs/training.md, "mtc gradcheck"):
//
//   1. Loss noise. fp32 rounding makes L(p + t d) a smooth function plus
//      noise of standard deviation sigma, nearly independent between
//      evaluations once the parameters move by more than a few ulp. Measured
//      once per run: L along a random direction through every parameter at
//      33 points a few 1e-5 of each tensor's RMS apart, a least-squares
//      cubic through them, sigma = the residuals' RMS (29 degrees of
//      freedom).
//   2. Truncation. The five-point central differences D(h) (error c h^4 +
//      O(h^6)) at steps h and 2h (six evaluations: +-h, +-2h, +-4h) give the
//      Richardson value R = D(h) + (D(h) - D(2h)) / 15, whose error is
//      O(h^6); T = |D(h) - D(2h)| / 15, the estimated error of D(h), bounds
//      it with a wide margin while the step is in the asymptotic range.
//   3. E = 2 T + 6 N, N = 1.018 sigma / h the standard deviation of the
//      noise in R (sqrt(2 (256^2 + 40^2 + 1)) / 360 per unit of sigma / h).
//   4. The step: the smallest at which 6 N is half of tolerance * |an| (so
//      that truncation is as small as it can be), within [hMax / 1024,
//      hMax]: hMax is GradCheckOptions::step for a coordinate (rounded to a
//      power of two, so that the perturbed weights are exact floats), and
//      for the direction the step that moves each coordinate by about
//      2.5 step RMS. While E is above tolerance * |an| the difference moves
//      to h / 2 or 2h, whichever predicts the smaller E, at most twice (two
//      more evaluations each).
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
// Memory: besides the parameter store (whose AdamW moments, unused here,
// hold the saved values and the random directions) and the executor's
// values, nothing proportional to the model is allocated; the total is
// checked against MemAvailable first, as `mtc train` does.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/GradCheck.h"
#include "lib/Support/ByteSize.h"
#include "runtime/driver/Train.h"
#include "runtime/hf/HFWeights.h"

#include "runtime/device/Device.h"
#include "runtime/driver/DeviceModel.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ParamStore.h"
#include "runtime/train/Random.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <new>
#include <set>
#include <sstream>
#include <stdexcept>

namespace mtc::driver {

namespace {

/// The value of \p e; its error ends gradCheck (caught there and printed).
template <typename T> T orFail(Expected<T> e) {
  if (!e.ok())
    throw std::runtime_error(e.message());
  return std::move(e).value();
}

/// Safety factors of the error bound: truncation estimates, noise standard
/// deviations.
constexpr double kTruncationFactor = 2, kNoiseFactor = 6;
/// Standard deviation of the Richardson value's noise per unit of sigma / h.
constexpr double kRichardsonNoise = 1.018;
/// Extra steps a difference may take in search of a smaller error bound.
constexpr int kMaxMoves = 2;
/// Points (2K + 1) and spacing (relative to each tensor's RMS) of the loss
/// noise scan.
constexpr int kNoiseHalfPoints = 16;
constexpr double kNoiseSpacing = 1e-5;
/// Smallest RMS assumed for a tensor when choosing steps (zero-initialised
/// biases).
constexpr double kMinRms = 2e-2;

/// A finite-difference derivative and its error bound.
struct Derivative {
  double value = 0; ///< Richardson value from steps h and 2h
  double bound = 0; ///< kTruncationFactor * T + kNoiseFactor * N
  double step = 0;  ///< h
};

/// The derivative of phi at 0 on the steps h0 * 2^j (see the file comment).
/// \p target: the bound that is good enough.
template <typename F>
Derivative differentiate(F &&phi, double h0, double sigma, double target) {
  std::map<int, double> odd; // j -> phi(h0 2^j) - phi(-h0 2^j)
  auto O = [&](int j) {
    auto it = odd.find(j);
    if (it != odd.end())
      return it->second;
    double t = std::ldexp(h0, j);
    double v = phi(t) - phi(-t);
    odd[j] = v;
    return v;
  };
  // Five-point difference at step h0 2^j.
  auto d5 = [&](int j) {
    return (8 * O(j) - O(j + 1)) / (12 * std::ldexp(h0, j));
  };
  auto truncation = [&](int j) {
    return kTruncationFactor * std::fabs(d5(j) - d5(j + 1)) / 15;
  };
  auto noise = [&](int j) {
    return kNoiseFactor * kRichardsonNoise * sigma / std::ldexp(h0, j);
  };
  int best = 0;
  double bestBound = truncation(0) + noise(0);
  std::set<int> tried = {0};
  for (int move = 0; move < kMaxMoves && bestBound > target; ++move) {
    // Halving h divides the truncation by 16 and doubles the noise;
    // doubling does the opposite.
    double t = truncation(best), n = noise(best);
    int next = t / 16 + 2 * n < t + n   ? best - 1
               : 16 * t + n / 2 < t + n ? best + 1
                                        : best;
    if (!tried.insert(next).second)
      break;
    double b = truncation(next) + noise(next);
    if (b >= bestBound)
      break;
    best = next;
    bestBound = b;
  }
  Derivative d;
  d.value = d5(best) + (d5(best) - d5(best + 1)) / 15;
  d.bound = bestBound;
  d.step = std::ldexp(h0, best);
  return d;
}

/// The step a difference starts from: where the noise part of its bound is
/// half of \p target (the smallest step for that, so that truncation is as
/// small as it can be), within [max(hMax / 1024, hMin), hMax].
double firstStep(double sigma, double target, double hMax, double hMin) {
  double h = kNoiseFactor * kRichardsonNoise * sigma / (0.5 * target);
  double lo = std::max(hMax / 1024, hMin);
  return std::isfinite(h) ? std::min(std::max(h, lo), hMax) : hMax;
}

/// Distance from |x| to the next float up.
float ulp(float x) {
  float a = std::fabs(x);
  return std::nextafter(a, HUGE_VALF) - a;
}

/// Standard deviation of the fp32 rounding noise of the loss (file comment,
/// 1). Uses the slots' m and v arrays as scratch and restores the values.
template <typename F>
double lossNoise(exec::ParamStore &store, uint64_t seed, F &&lossAt) {
  uint64_t index = 0;
  for (exec::ParamSlot &s : store.slots()) {
    std::copy(s.value.begin(), s.value.end(), s.m.begin());
    train::initNormal(s.v.data(), s.v.size(), 0.0f, 1.0f, seed, index++);
    double ss = 0;
    for (float x : s.value)
      ss += double(x) * x;
    double rms = std::sqrt(ss / std::max<size_t>(s.value.size(), 1));
    float scale = static_cast<float>(std::max(rms, kMinRms) * kNoiseSpacing);
    for (float &x : s.v)
      x *= scale;
  }
  // Least squares: L(k) ~ c0 + c1 u + c2 u^2 + c3 u^3, u = k / K.
  constexpr int P = 4, K = kNoiseHalfPoints;
  std::vector<double> us, ls;
  for (int k = -K; k <= K; ++k) {
    for (exec::ParamSlot &s : store.slots())
      for (size_t i = 0; i < s.value.size(); ++i)
        s.value[i] = s.m[i] + static_cast<float>(k) * s.v[i];
    us.push_back(double(k) / K);
    ls.push_back(lossAt());
  }
  for (exec::ParamSlot &s : store.slots())
    std::copy(s.m.begin(), s.m.end(), s.value.begin());
  double mean = 0;
  for (double l : ls)
    mean += l / ls.size();
  double a[P][P + 1] = {};
  for (size_t i = 0; i < us.size(); ++i) {
    double pw[P] = {1, us[i], us[i] * us[i], us[i] * us[i] * us[i]};
    for (int r = 0; r < P; ++r) {
      for (int c = 0; c < P; ++c)
        a[r][c] += pw[r] * pw[c];
      a[r][P] += pw[r] * (ls[i] - mean);
    }
  }
  for (int c = 0; c < P; ++c) // Gaussian elimination (positive definite)
    for (int r = c + 1; r < P; ++r) {
      double f = a[r][c] / a[c][c];
      for (int q = c; q <= P; ++q)
        a[r][q] -= f * a[c][q];
    }
  double coef[P];
  for (int r = P - 1; r >= 0; --r) {
    double v = a[r][P];
    for (int q = r + 1; q < P; ++q)
      v -= a[r][q] * coef[q];
    coef[r] = v / a[r][r];
  }
  double rss = 0;
  for (size_t i = 0; i < us.size(); ++i) {
    double u = us[i];
    double fit = coef[0] + u * (coef[1] + u * (coef[2] + u * coef[3]));
    rss += (ls[i] - mean - fit) * (ls[i] - mean - fit);
  }
  return std::sqrt(rss / static_cast<double>(us.size() - P));
}

/// Whether \p name matches one of the comma-separated globs (all: empty).
bool selected(const std::string &name, const std::string &patterns) {
  if (patterns.empty())
    return true;
  std::stringstream ss(patterns);
  std::string p;
  while (std::getline(ss, p, ','))
    if (!p.empty() && fnmatch(p.c_str(), name.c_str(), 0) == 0)
      return true;
  return false;
}

/// One comparison: finite difference, compiled value, what is allowed.
struct Check {
  double fd = 0, an = 0, allowed = 0, scale = 1;
  double error() const { return std::fabs(fd - an); }
  /// The error as a fraction of what is allowed (> 1: failed).
  double ratio() const {
    return error() == 0 ? 0 : allowed > 0 ? error() / allowed : HUGE_VAL;
  }
};

/// The checks of one tensor: along a random unit direction, and on its
/// largest coordinates (TensorCheck).
struct TensorCheck {
  Check direction, coordinates;
  bool haveCoordinates = false; ///< --coordinates 0 or an empty tensor: none
};

/// Checks tensor \p s (number \p index of the store) against finite
/// differences of \p lossAt, whose noise is \p sigma. The tensor's value is
/// restored; its AdamW moments are used as scratch.
template <typename F>
TensorCheck checkTensor(exec::ParamSlot &s, uint64_t index,
                        const GradCheckOptions &opts, double sigma,
                        F &&lossAt) {
  exec::HostArray &p = s.value, &g = s.grad;
  exec::HostArray &saved = s.m, &dir = s.v; // AdamW state: unused here
  size_t len = p.size();
  double gmax = 0, pss = 0;
  for (size_t i = 0; i < len; ++i) {
    gmax = std::max(gmax, std::fabs(double(g[i])));
    pss += double(p[i]) * p[i];
  }
  const double floor = 1e-3 * gmax;
  const double rms = std::max(std::sqrt(pss / double(len)), kMinRms);
  auto judge = [&](const Derivative &d, double an) {
    Check c;
    c.fd = d.value;
    c.an = an;
    c.scale = std::max({std::fabs(d.value), std::fabs(an), floor});
    c.allowed = d.bound + opts.tolerance * c.scale;
    return c;
  };

  // Directional check along a random unit vector.
  train::initNormal(dir.data(), len, 0.0f, 1.0f, opts.seed + 1, index);
  double norm = 0;
  for (float d : dir)
    norm += double(d) * d;
  norm = std::sqrt(norm);
  double an = 0;
  for (size_t i = 0; i < len; ++i) {
    dir[i] = static_cast<float>(dir[i] / norm);
    an += double(g[i]) * dir[i];
  }
  std::copy(p.begin(), p.end(), saved.begin());
  auto lossAlong = [&](double t) {
    for (size_t i = 0; i < len; ++i)
      p[i] = static_cast<float>(saved[i] + t * dir[i]);
    return lossAt();
  };
  double target = opts.tolerance * std::max(std::fabs(an), floor);
  double hMax = 2.5 * opts.step * rms * std::sqrt(double(len));
  Check dirCheck =
      judge(differentiate(lossAlong, firstStep(sigma, target, hMax, 0), sigma,
                          target),
            an);
  std::copy(saved.begin(), saved.end(), p.begin());

  // Coordinate checks on the largest gradients (ties: lower index).
  size_t k = std::min<size_t>(static_cast<size_t>(opts.coordinates), len);
  auto larger = [&](size_t a, size_t c) {
    float ga = std::fabs(g[a]), gc = std::fabs(g[c]);
    return ga > gc || (ga == gc && a < c);
  };
  std::vector<size_t> top; // a min-heap of the k largest
  for (size_t i = 0; i < len && k > 0; ++i) {
    if (top.size() < k) {
      top.push_back(i);
      std::push_heap(top.begin(), top.end(), larger);
    } else if (larger(i, top.front())) {
      std::pop_heap(top.begin(), top.end(), larger);
      top.back() = i;
      std::push_heap(top.begin(), top.end(), larger);
    }
  }
  std::sort(top.begin(), top.end(), larger);
  Check coordCheck;
  bool first = true;
  for (size_t i : top) {
    float orig = p[i];
    double target = opts.tolerance * std::max(std::fabs(double(g[i])), floor);
    // A power of two, so that orig +- 2^j h are exact floats.
    double h =
        firstStep(sigma, target, opts.step, std::ldexp(double(ulp(orig)), 12));
    h = std::exp2(std::round(std::log2(h)));
    Derivative d = differentiate(
        [&](double t) {
          p[i] = static_cast<float>(orig + t);
          return lossAt();
        },
        h, sigma, target);
    p[i] = orig;
    Check c = judge(d, g[i]);
    if (first || c.ratio() > coordCheck.ratio())
      coordCheck = c;
    first = false;
  }
  return {dirCheck, coordCheck, !top.empty()};
}

int gradCheckImpl(const bundle::Bundle &b, const GradCheckOptions &opts,
                  std::ostream &os, std::ostream &err) {
  // Checked before allocating, as `mtc train` does: the parameter store
  // (values, gradients, and the two scratch arrays) and the values of one
  // forward_backward at [batch, seq].
  double tokenCount = double(opts.batch) * double(opts.seq);
  if (tokenCount > 0x1p40) { // 4 TiB of token ids alone; B * S would overflow
    err << "mtc: error: --batch " << opts.batch << " x --seq " << opts.seq
        << " is more tokens than any host memory holds; lower --batch or "
           "--seq\n";
    return -1;
  }
  double need = trainingHostBytes(b, opts.batch, opts.seq);
  double avail = hostMemoryAvailable();
  if (avail > 0 && need > avail) {
    err << "mtc: error: gradcheck may need up to "
        << formatBytes(int64_t(need), ByteFormat::approx())
        << " of host memory at --batch " << opts.batch << " --seq " << opts.seq
        << ", but " << formatBytes(int64_t(avail), ByteFormat::approx())
        << " are available; lower --batch or --seq\n";
    return -1;
  }

  std::unique_ptr<exec::ParamStore> stored =
      orFail(exec::ParamStore::create(b));
  exec::ParamStore &store = *stored;
  store.initialize(opts.seed);
  if (!opts.hfWeights.empty()) {
    if (Status st = loadHFWeights(store, b, opts.hfWeights); !st.ok()) {
      err << "mtc: error: " << st.message() << "\n";
      return -1;
    }
    os << "initialised from " << opts.hfWeights << "\n";
  }
  size_t checked = 0;
  for (const exec::ParamSlot &s : store.slots())
    checked += selected(s.name, opts.tensors);
  if (checked == 0) {
    err << "mtc: error: --tensors '" << opts.tensors
        << "' matches no parameter tensor\n";
    return -1;
  }
  Expected<std::unique_ptr<DeviceModel>> opened =
      DeviceModel::open(b, store, opts.device, opts.deviceMemory);
  if (!opened) {
    err << "mtc: error: gradcheck: " << opened.message() << "\n";
    return -1;
  }
  DeviceModel &dm = **opened;
  exec::Executor &ex = dm.executor();
  if (!dm.host())
    os << "device " << dm.describe() << "\n";

  int64_t vocab = std::max<int64_t>(b.vocabulary(), 2);

  size_t n = static_cast<size_t>(opts.batch * opts.seq);
  std::vector<int32_t> tokens(n), targets(n);
  train::Rng rng(opts.seed, 7);
  for (size_t i = 0; i < n; ++i) {
    tokens[i] = static_cast<int32_t>(rng.below(vocab));
    targets[i] = static_cast<int32_t>(rng.below(vocab));
  }

  store.zeroGrads();
  // Routing pins need the choices on the host: the CPU executor's.
  if (dm.host())
    ex.pinRouting(exec::Executor::RoutingPin::Record);
  double loss0 = orFail(
      dm.forwardBackward(tokens.data(), targets.data(), opts.batch, opts.seq));
  if (dm.host())
    ex.pinRouting(exec::Executor::RoutingPin::Replay);
  const uint64_t routing = ex.routingSignature();
  int64_t evaluations = 0, rerouted = 0;

  auto lossAt = [&]() {
    double l =
        orFail(dm.loss(tokens.data(), targets.data(), opts.batch, opts.seq));
    ++evaluations;
    if (ex.routingSignature() != routing)
      ++rerouted;
    return l;
  };
  const double sigma = lossNoise(store, opts.seed + 2, lossAt);

  os << "gradcheck: batch " << opts.batch << ", seq " << opts.seq << ", loss "
     << std::setprecision(8) << loss0 << ", " << checked << " of "
     << store.slots().size() << " tensors, loss noise " << std::scientific
     << std::setprecision(2) << sigma << std::defaultfloat << ", tolerance "
     << opts.tolerance << " beyond the finite differences' error bound\n";

  int failures = 0;
  double worst = 0;
  std::string worstName;
  for (exec::ParamSlot &s : store.slots()) {
    if (!selected(s.name, opts.tensors))
      continue;
    const TensorCheck t =
        checkTensor(s, static_cast<uint64_t>(&s - store.slots().data()), opts,
                    sigma, lossAt);
    const Check &dirCheck = t.direction, &coordCheck = t.coordinates;
    const Check &w =
        !t.haveCoordinates || dirCheck.ratio() >= coordCheck.ratio()
            ? dirCheck
            : coordCheck;
    bool ok = w.ratio() <= 1;
    if (!ok)
      ++failures;
    if (w.ratio() >= worst) {
      worst = w.ratio();
      worstName = s.name;
    }
    auto pair = [&](const Check &c) {
      std::ostringstream o;
      o << std::scientific << std::setprecision(2) << c.error() / c.scale
        << " of " << c.allowed / c.scale;
      return o.str();
    };
    os << "  " << std::left << std::setw(28) << s.name << std::right
       << " rel error " << pair(w) << " allowed (direction " << pair(dirCheck);
    if (t.haveCoordinates)
      os << ", largest coordinates " << pair(coordCheck);
    os << ")" << (ok ? "" : "  FAILED") << "\n";
  }
  os << (failures ? "gradcheck FAILED: " : "gradcheck passed: ") << failures
     << " of " << checked << " tensors beyond their bound (largest error "
     << std::fixed << std::setprecision(2) << worst << std::defaultfloat
     << " of its bound, " << worstName << ")\n";
  if (routing != 0)
    os << "gradcheck: mixture-of-experts routing pinned: " << rerouted << " of "
       << evaluations << " loss evaluations would have chosen other experts\n";
  return failures;
}

} // namespace

int gradCheck(const bundle::Bundle &b, const GradCheckOptions &opts,
              std::ostream &out, std::ostream &err) {
  try {
    return gradCheckImpl(b, opts, out, err);
  } catch (const std::bad_alloc &) {
    err << "mtc: error: out of host memory (--batch " << opts.batch << " --seq "
        << opts.seq << "); lower --batch or --seq\n";
  } catch (const std::exception &e) {
    err << "mtc: error: " << e.what() << "\n";
  }
  return -1;
}

} // namespace mtc::driver
