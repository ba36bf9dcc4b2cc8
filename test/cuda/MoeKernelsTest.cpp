//===- MoeKernelsTest.cpp - Mixture-of-experts routing kernels ------------===//
//
// Part of mtc. runtime/cuda/kernels/moe.cu through its launchers
// (runtime/cuda/ops/Moe.h) against the CPU executor's rules on the same
// inputs: top 2 of 8 experts, token counts that are not multiples of the
// kernels' blocks (N = 300 > the 256-token scan chunk), an expert no token
// picks, exact ties (two identical router columns; crafted probabilities,
// NaN among them).
//
// Exact: top-k choices and gates (cpu::moeTopK on the device's
// probabilities), the per-expert lists, the gathered rows, dy_e. Within
// tolerance (fp32): the router probabilities 1e-6 relative, scattered
// outputs 1e-6 and dh / drouter 1e-5 of the reference's largest magnitude,
// the gate gradients and the aux loss (double) 1e-9 relative.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/ops/Moe.h"
#include "test/cuda/CudaTestDriver.h"

#include <algorithm>
#include <cmath>

using namespace mtc;
using namespace mtc::cuda::test;
namespace ops = mtc::cuda::ops;

namespace {

class MoeKernels : public CudaDriverTest {
protected:
  /// Routing buffers of N, E, K in device memory.
  ops::MoeRouting routing(int64_t N, int64_t E, int64_t K) {
    return ops::moeRoutingAt(alloc(ops::moeRoutingBytes(N, E, K)), N, E, K);
  }
};

/// max |got - ref| / max |ref|.
double relErr(const std::vector<float> &got, const std::vector<float> &ref) {
  double err = 0, mag = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(double(got[i]) - double(ref[i])));
    mag = std::max(mag, std::fabs(double(ref[i])));
  }
  return mag > 0 ? err / mag : err;
}

#define OK(expr)                                                               \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    ASSERT_TRUE(s_.ok()) << s_.message();                                      \
  } while (0)

constexpr int64_t kN = 300, kD = 19, kE = 8, kK = 2, kEmpty = 5;

/// h [N, D] and a router [D, E] whose columns 2 and 3 are equal (ties on
/// every token) and whose column kEmpty no token picks.
void routerInputs(std::vector<float> &h, std::vector<float> &router) {
  h = randoms(kN * kD, 11, -1, 1);
  router = randoms(kD * kE, 12, -1, 1);
  for (int64_t d = 0; d < kD; ++d) {
    router[d * kE + 3] = router[d * kE + 2];
    router[d * kE + kEmpty] = 0;
  }
  // A column of zeros gives logit 0; a constant feature pushes it down.
  for (int64_t t = 0; t < kN; ++t)
    h[t * kD] = 1;
  router[kEmpty] = -40;
}

TEST_P(MoeKernels, TopKBreaksTiesToTheLowerIndexAndRanksNaNLast) {
  const int N = 37, E = 8, K = 2;
  std::vector<float> probs = randoms(N * E, 21, 0, 1);
  for (int e = 0; e < E; ++e) {
    probs[0 * E + e] = 0.125f;                 // all tied
    probs[1 * E + e] = e == 6 ? 0.5f : 0.25f;  // one best, the rest tied
    probs[2 * E + e] = e < 3 ? NAN : 0.1f * e; // NaN ranks as -inf
    probs[3 * E + e] = NAN;                    // every one NaN
  }
  probs[4 * E + 7] = probs[4 * E + 1] = 2.0f; // a tie for first
  for (int normalize : {0, 1}) {
    std::vector<int32_t> refChoice(N * K);
    std::vector<float> refGate(N * K);
    cpu::moeTopK(probs.data(), N, E, K, normalize, refChoice.data(),
                 refGate.data());
    auto dprobs = upload(probs), dchoice = alloc(N * K * 4),
         dgate = alloc(N * K * 4);
    int n = N, e = E, k = K;
    launch(kernel("moe.cu", "moe_topk"), {1}, {128}, 0,
           {&dprobs, &n, &e, &k, &normalize, &dchoice, &dgate});
    EXPECT_EQ(download<int32_t>(dchoice, N * K), refChoice);
    std::vector<float> gate = download<float>(dgate, N * K);
    for (int i = 0; i < N * K; ++i)
      ASSERT_TRUE(gate[i] == refGate[i] ||
                  (std::isnan(gate[i]) && std::isnan(refGate[i])))
          << i << ": " << gate[i] << " vs " << refGate[i];
  }
  // The spot checks the rule promises.
  std::vector<int32_t> c(N * K);
  std::vector<float> g(N * K);
  cpu::moeTopK(probs.data(), N, E, K, false, c.data(), g.data());
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[1], 1);
  EXPECT_EQ(c[2], 6);
  EXPECT_EQ(c[3], 0);
  EXPECT_EQ(c[4], 7);
  EXPECT_EQ(c[5], 6);
  EXPECT_EQ(c[8], 1);
  EXPECT_EQ(c[9], 7);
}

TEST_P(MoeKernels, RouteGatherScatterAndAuxLossMatchCpu) {
  ops::Launch L = makeLaunch();
  std::vector<float> h, router;
  routerInputs(h, router);
  auto dh = upload(h), drouter = upload(router);
  ops::MoeRouting r = routing(kN, kE, kK);
  OK(ops::moeRoute(L, dh, drouter, r, kD, true));
  sync();

  // Probabilities: the CPU's router GEMM and softmax.
  std::vector<float> logits(kN * kE), refProbs(kN * kE);
  cpu::matmul(h.data(), router.data(), nullptr, logits.data(), kN, kD, kE);
  cpu::softmax(logits.data(), refProbs.data(), kN, kE, 1);
  std::vector<float> probs = download<float>(r.probs, kN * kE);
  EXPECT_LT(relErr(probs, refProbs), 1e-6);

  // Choices and gates: exactly the CPU rule on those probabilities.
  std::vector<int32_t> refChoice(kN * kK);
  std::vector<float> refGate(kN * kK);
  cpu::moeTopK(probs.data(), kN, kE, kK, true, refChoice.data(),
               refGate.data());
  std::vector<int32_t> choice = download<int32_t>(r.choice, kN * kK);
  ASSERT_EQ(choice, refChoice);
  EXPECT_EQ(download<float>(r.gate, kN * kK), refGate);
  int ties = 0;
  for (int64_t t = 0; t < kN; ++t)
    ties += choice[t * kK] == 2 && choice[t * kK + 1] == 3;
  EXPECT_GT(ties, 0) << "the tied columns never won";

  // Lists: tokens ascending, their gates and row positions.
  std::vector<int32_t> count = download<int32_t>(r.count, kE),
                       list = download<int32_t>(r.list, kE * kN),
                       slotOf = download<int32_t>(r.slotOf, kN * kK);
  std::vector<float> slotGate = download<float>(r.slotGate, kE * kN);
  EXPECT_EQ(count[kEmpty], 0);
  for (int64_t e = 0; e < kE; ++e) {
    std::vector<int32_t> want;
    for (int64_t t = 0; t < kN; ++t)
      for (int64_t k = 0; k < kK; ++k)
        if (choice[t * kK + k] == e) {
          EXPECT_EQ(slotOf[t * kK + k], int32_t(want.size())) << t;
          EXPECT_EQ(slotGate[e * kN + want.size()], refGate[t * kK + k]);
          want.push_back(int32_t(t));
        }
    ASSERT_EQ(count[e], int32_t(want.size())) << e;
    EXPECT_TRUE(std::equal(want.begin(), want.end(), list.begin() + e * kN))
        << e;
  }

  // Gather (rows then zeros) and the gate-weighted scatter, expert by
  // expert, against the CPU's y_t += g * out_j in ascending expert order.
  std::vector<float> y = randoms(kN * kD, 13), refY = y;
  auto dx = alloc(kN * kD * 4), dout = alloc(kN * kD * 4), dy = upload(y);
  for (int64_t e = 0; e < kE; ++e) {
    OK(ops::moeGather(L, dh, r, e, dx, kD));
    std::vector<float> out = randoms(kN * kD, 100 + uint32_t(e));
    copyIn(dout, out.data(), out.size() * 4);
    OK(ops::moeScatter(L, dout, r, e, true, dy, kD));
    sync();
    std::vector<float> x = download<float>(dx, kN * kD);
    for (int64_t j = 0; j < kN; ++j)
      for (int64_t d = 0; d < kD; ++d)
        ASSERT_EQ(x[j * kD + d],
                  j < count[e] ? h[list[e * kN + j] * kD + d] : 0.0f)
            << e << "," << j << "," << d;
    for (int64_t j = 0; j < count[e]; ++j) {
      float g = slotGate[e * kN + j];
      for (int64_t d = 0; d < kD; ++d)
        refY[list[e * kN + j] * kD + d] += g * out[j * kD + d];
    }
  }
  EXPECT_LT(relErr(download<float>(dy, kN * kD), refY), 1e-6);

  // The aux loss: c * E * sum_e f_e P_e / N, in double.
  const double coef = 0.02;
  auto daux = alloc(8);
  OK(ops::moeAuxLoss(L, r, coef, daux));
  sync();
  double ref = 0;
  for (int64_t e = 0; e < kE; ++e) {
    double P = 0;
    for (int64_t t = 0; t < kN; ++t)
      P += probs[t * kE + e];
    ref += double(count[e]) / (kN * kK) * P / kN;
  }
  ref *= coef * kE;
  EXPECT_NEAR(download<double>(daux, 1)[0], ref, 1e-9 * ref);
}

TEST_P(MoeKernels, BackwardMatchesCpu) {
  ops::Launch L = makeLaunch();
  std::vector<float> h, router;
  routerInputs(h, router);
  auto dh = upload(h), drouter = upload(router);
  ops::MoeRouting r = routing(kN, kE, kK);
  const double aux = 0.02;
  for (bool normalize : {false, true}) {
    OK(ops::moeRoute(L, dh, drouter, r, kD, normalize));
    sync();
    std::vector<float> probs = download<float>(r.probs, kN * kE),
                       gate = download<float>(r.gate, kN * kK),
                       slotGate = download<float>(r.slotGate, kE * kN);
    std::vector<int32_t> choice = download<int32_t>(r.choice, kN * kK),
                         count = download<int32_t>(r.count, kE),
                         list = download<int32_t>(r.list, kE * kN);

    // Per expert: dy_e = g * dy (then zeros), dg = <dy_t, out_j>; the
    // expert's input gradient (random here) scattered into dh unweighted.
    std::vector<float> dy = randoms(kN * kD, 31), dhGot = randoms(kN * kD, 32);
    std::vector<float> refDh = dhGot;
    std::vector<double> refDg(kN * kK, 0.0);
    auto ddy = upload(dy), dout = alloc(kN * kD * 4), ddye = alloc(kN * kD * 4),
         ddx = alloc(kN * kD * 4), ddh = upload(dhGot),
         ddrouter = upload(std::vector<float>(kD * kE, 0.0f));
    for (int64_t e = 0; e < kE; ++e) {
      std::vector<float> out = randoms(kN * kD, 200 + uint32_t(e)),
                         dx = randoms(kN * kD, 300 + uint32_t(e));
      copyIn(dout, out.data(), out.size() * 4);
      copyIn(ddx, dx.data(), dx.size() * 4);
      OK(ops::moeGradRows(L, ddy, dout, r, e, ddye, kD));
      OK(ops::moeScatter(L, ddx, r, e, false, ddh, kD));
      sync();
      std::vector<float> dye = download<float>(ddye, kN * kD);
      std::vector<double> dg = download<double>(r.dgOf(e), kN);
      for (int64_t j = 0; j < kN; ++j) {
        const int64_t t = j < count[e] ? list[e * kN + j] : -1;
        double dot = 0;
        for (int64_t d = 0; d < kD; ++d) {
          float want = t < 0 ? 0.0f : slotGate[e * kN + j] * dy[t * kD + d];
          ASSERT_EQ(dye[j * kD + d], want) << e << "," << j << "," << d;
          if (t >= 0) {
            dot += double(dy[t * kD + d]) * out[j * kD + d];
            refDh[t * kD + d] += dx[j * kD + d];
          }
        }
        if (t < 0)
          continue;
        EXPECT_NEAR(dg[j], dot, 1e-9 * std::max(1.0, std::fabs(dot)));
        for (int64_t k = 0; k < kK; ++k)
          if (choice[t * kK + k] == e)
            refDg[t * kK + k] = dot;
      }
    }
    EXPECT_LT(relErr(download<float>(ddh, kN * kD), refDh), 1e-6);

    // The router: ExecMoE.cpp's moeGrad on the same routing.
    OK(ops::moeRouterGrad(L, dh, drouter, r, kD, normalize, aux, ddh,
                          ddrouter));
    sync();
    std::vector<float> dp(kN * kE, 0.0f);
    for (int64_t t = 0; t < kN; ++t) {
      const float *p = probs.data() + t * kE;
      const int32_t *ch = choice.data() + t * kK;
      if (normalize) {
        double sum = 0, dot = 0;
        for (int64_t k = 0; k < kK; ++k) {
          sum += p[ch[k]];
          dot += refDg[t * kK + k] * gate[t * kK + k];
        }
        for (int64_t k = 0; k < kK; ++k)
          dp[t * kE + ch[k]] +=
              static_cast<float>((refDg[t * kK + k] - dot) / sum);
      } else {
        for (int64_t k = 0; k < kK; ++k)
          dp[t * kE + ch[k]] += static_cast<float>(refDg[t * kK + k]);
      }
    }
    for (int64_t e = 0; e < kE; ++e) {
      double f = static_cast<double>(count[e]) / (kN * kK);
      float c = static_cast<float>(aux * kE * f / kN);
      for (int64_t t = 0; t < kN; ++t)
        dp[t * kE + e] += c;
    }
    std::vector<float> dr(kN * kE), refDrouter(kD * kE, 0.0f);
    cpu::softmaxGrad(probs.data(), dp.data(), dr.data(), kN, kE, 1);
    cpu::gemm(false, true, kN, kD, kE, 1.0f, dr.data(), router.data(), 1.0f,
              refDh.data());
    cpu::matmulGradWeightAcc(h.data(), dr.data(), refDrouter.data(), kN, kD,
                             kE);
    EXPECT_LT(relErr(download<float>(ddh, kN * kD), refDh), 1e-5) << normalize;
    EXPECT_LT(relErr(download<float>(ddrouter, kD * kE), refDrouter), 1e-5)
        << normalize;
  }
}

TEST_P(MoeKernels, Bf16RowsGatherExactlyAndScatterWithinTwoUlp) {
  ops::Launch L = makeLaunch();
  std::vector<float> h, router;
  routerInputs(h, router);
  auto dh32 = upload(h), drouter = upload(router);
  ops::MoeRouting r = routing(kN, kE, kK);
  OK(ops::moeRoute(L, dh32, drouter, r, kD, true));
  std::vector<uint16_t> hH(kN * kD), yH(kN * kD), outH(kN * kD);
  std::vector<float> out = randoms(kN * kD, 41), y = randoms(kN * kD, 42);
  for (int64_t i = 0; i < kN * kD; ++i) {
    hH[i] = toBf16(h[i]);
    outH[i] = toBf16(out[i]);
    yH[i] = toBf16(y[i]);
  }
  auto dh = upload(hH), dout = upload(outH), dy = upload(yH),
       dx = alloc(kN * kD * 2);
  const int64_t e = 0;
  OK(ops::moeGather(L, dh, r, e, dx, kD, ops::DType::BF16));
  OK(ops::moeScatter(L, dout, r, e, true, dy, kD, ops::DType::BF16));
  sync();
  std::vector<int32_t> count = download<int32_t>(r.count, kE),
                       list = download<int32_t>(r.list, kN);
  std::vector<float> slotGate = download<float>(r.slotGate, kN);
  ASSERT_GT(count[e], 0);
  std::vector<uint16_t> x = download<uint16_t>(dx, kN * kD),
                        yGot = download<uint16_t>(dy, kN * kD);
  std::vector<uint16_t> refY = yH;
  for (int64_t j = 0; j < count[e]; ++j)
    for (int64_t d = 0; d < kD; ++d) {
      const int64_t t = list[j];
      float v =
          fromBf16(yH[t * kD + d]) + slotGate[j] * fromBf16(outH[j * kD + d]);
      refY[t * kD + d] = toBf16(v);
    }
  for (int64_t j = 0; j < kN; ++j)
    for (int64_t d = 0; d < kD; ++d) {
      ASSERT_EQ(x[j * kD + d], j < count[e] ? hH[list[j] * kD + d] : 0)
          << j << "," << d;
      ASSERT_LE(bf16Ulps(yGot[j * kD + d], refY[j * kD + d]), 2)
          << j << "," << d;
    }
}

TEST_P(MoeKernels, ErrorsNameTheLauncher) {
  ops::Launch L = makeLaunch();
  ops::MoeRouting r = routing(4, 3, 4);
  Status s = ops::moeRoute(L, 0, 0, r, 5, true);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("moeRoute: top k = 4 must be in [1, 3]"),
            std::string::npos)
      << s.message();
  r = routing(4, 3, 2);
  s = ops::moeGather(L, 0, r, 3, 0, 5);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("moeGather: expert 3 of 3"), std::string::npos)
      << s.message();
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(MoeKernels);
