//===- ProfileFuzzer.cpp - libFuzzer target for hardware profiles -*- C++
//-*-===//
//
// Part of mtc. Feeds arbitrary text to sim::parseProfile (`--gpu FILE`,
// docs/simulate.md). Every input must end in a profile or an error naming
// the file. An accepted profile must lie within the documented bounds
// ("Limits"), and a step simulated on it must take a finite, positive time:
// the step plan of a seed bundle (mixtral-small, two layers) at its own
// micro-batch and at the largest one the flags allow (2^32 tokens), in fp32
// and bf16, with and without clipping and host conversion.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Bundle.h"
#include "lib/Sim/BuiltinProfiles.h"
#include "lib/Sim/Profile.h"
#include "lib/Sim/Simulator.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace mtc::sim {
// Built-in profiles are not this target's input (parseProfile is): none.
const std::vector<BuiltinProfile> &builtinProfiles() {
  static const std::vector<BuiltinProfile> none;
  return none;
}
} // namespace mtc::sim

namespace {

[[noreturn]] void bug(const char *what, const std::string &detail) {
  std::fprintf(stderr, "profile fuzzer: %s\n%s\n", what, detail.c_str());
  __builtin_trap();
}

/// The bundle whose step plan every accepted profile prices.
const mtc::bundle::Bundle &seedBundle() {
  static const std::optional<mtc::bundle::Bundle> b = [] {
    mtc::Expected<mtc::bundle::Bundle> read =
        mtc::bundle::readFile(MTC_FUZZ_SIM_BUNDLE);
    if (!read || !read->step)
      bug("cannot read the seed bundle",
          read ? "no step plan" : read.message());
    return std::optional<mtc::bundle::Bundle>(std::move(*read));
  }();
  return *b;
}

bool within(double v, double lo, double hi) {
  return std::isfinite(v) && v >= lo && v <= hi;
}

void checkBounds(const mtc::sim::Profile &p) {
  const auto &d = p.device;
  bool ok = within(static_cast<double>(d.memoryBytes), 1 << 20,
                   std::ldexp(1.0, 50)) &&
            within(d.peakFlopsBF16, 1e6, 1e18) &&
            within(d.peakFlopsFP32, 1e6, 1e18) &&
            within(d.memoryBandwidth, 1e6, 1e18) &&
            within(d.kernelTimeScale, 1e-3, 100) &&
            within(d.launchLatency, 0, 1) && within(d.kernelOverhead, 0, 1) &&
            within(p.link.h2dBandwidth, 1e6, 1e18) &&
            within(p.link.d2hBandwidth, 1e6, 1e18) &&
            within(p.link.duplexFactor, 0.5, 1) &&
            within(p.link.copyLatency, 0, 1) &&
            within(p.host.memoryBandwidth, 1e6, 1e18) &&
            within(p.host.adamwBytesPerS, 1e6, 1e18) &&
            within(p.host.convertBytesPerS, 1e6, 1e18) && p.host.cores >= 1 &&
            d.hostThreads >= 0 && !d.gemmEfficiency.points.empty() &&
            d.gemmEfficiency.points.size() <= 1024 &&
            !d.attentionEfficiency.points.empty() &&
            d.attentionEfficiency.points.size() <= 1024 &&
            d.gemmShapes.size() <= 4096;
  for (const auto *c : {&d.gemmEfficiency, &d.attentionEfficiency})
    for (const mtc::sim::EfficiencyPoint &e : c->points)
      ok = ok && within(e.efficiency, 1e-6, 1) && within(e.flops, 1, 1e30);
  for (const auto &[kind, bw] : d.memoryBandwidthByKind)
    ok = ok && within(bw, 1e6, 1e18);
  if (!ok)
    bug("parseProfile accepted a number outside the documented bounds", p.name);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  mtc::Expected<mtc::sim::Profile> parsed =
      mtc::sim::parseProfile(text, "fuzz.json");
  if (!parsed) {
    if (parsed.message().rfind("fuzz.json: ", 0) != 0)
      bug("a refused profile's error does not name the file", parsed.message());
    return 0;
  }
  const mtc::sim::Profile &p = *parsed;
  checkBounds(p);
  for (int variant = 0; variant < 4; ++variant) {
    mtc::bundle::Bundle b = seedBundle();
    auto step = std::make_shared<mtc::bundle::StepPlan>(*b.step);
    if (variant & 1) {
      step->batch = int64_t(1) << 20;
      step->seq = int64_t(1) << 12;
    }
    if (variant & 2)
      step->precision = "bf16";
    b.step = step;
    mtc::sim::SimOptions o;
    o.clip = variant != 1;
    o.convertOnHost = variant != 2;
    o.gradBytesPerParam = variant == 3 ? 2 : 4;
    mtc::Expected<mtc::sim::SimResult> r = mtc::sim::simulateStep(b, p, o);
    if (!r)
      bug("a step on an accepted profile is an error", r.message());
    if (!std::isfinite(r->stepSeconds) || !(r->stepSeconds > 0) ||
        !std::isfinite(r->hardwareFlops) || !std::isfinite(r->computeSeconds))
      bug("a step on an accepted profile is not finite and positive",
          std::to_string(r->stepSeconds));
  }
  return 0;
}
