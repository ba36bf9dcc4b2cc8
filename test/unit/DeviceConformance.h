//===- DeviceConformance.h - The suite every Device passes ------*- C++ -*-===//
//
// Part of mtc. The device conformance suite (in the manner of IREE's
// hal/cts): DeviceConformanceTest.cpp tests the promises of Device.h once,
// against the interface, and every device runs them by instantiating the
// suite with a factory, one line in its own test file:
//
//   INSTANTIATE_TEST_SUITE_P(CpuDevice, DeviceTest,
//                            ::testing::Values(cpuDeviceFactory()),
//                            DeviceFactoryName());
//
// which names the tests `CpuDevice/DeviceTest.EventOrdersStreams/cpu`. A
// device that cannot run on this machine (a CudaDevice without a GPU) has its
// factory return nullptr with a reason: every test is then skipped with that
// reason printed, never passed silently. Tests that only one device can pass
// (its threads, its exact statistics) belong in that device's own test file.
//
// The suite's launches run host closures that touch host memory only (never
// arena memory through at()), so that they mean the same on a GPU, where a
// closure is a host function (see Device.h, "Launches").
//
//===----------------------------------------------------------------------===//
#ifndef MTC_TEST_UNIT_DEVICECONFORMANCE_H
#define MTC_TEST_UNIT_DEVICECONFORMANCE_H

#include "runtime/device/Device.h"
#include "test/unit/Must.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace mtc::device::cts {

/// How the suite makes devices of one kind.
struct DeviceFactory {
  /// The instantiation's suffix in test names ([A-Za-z0-9_]+).
  std::string name;
  /// A device whose arena holds \p capacity bytes. Returns nullptr and sets
  /// \p unavailable when this kind of device cannot run here (no GPU, no
  /// driver); an error for what the device itself rejects (a negative or
  /// impossible capacity).
  std::function<Expected<std::unique_ptr<Device>>(int64_t capacity,
                                                  std::string &unavailable)>
      make;
};

/// gtest prints a parameter by its name (not as a dump of its bytes).
/// The error message of a device call ("" when it succeeded; errorOf,
/// Must.h).
template <typename F> std::string deviceErrorOf(F &&call) {
  return errorOf(std::forward<F>(call));
}

inline void PrintTo(const DeviceFactory &f, std::ostream *os) { *os << f.name; }

/// Test names end with the factory's name.
struct DeviceFactoryName {
  std::string
  operator()(const ::testing::TestParamInfo<DeviceFactory> &info) const {
    return info.param.name;
  }
};

/// Aborts the process with a message naming the test if it is still alive
/// after a timeout: a deadlocked device fails its test (and ctest goes on)
/// instead of hanging. A blocked synchronize() cannot be interrupted, and a
/// test that returned while a stream still ran its closures would leave them
/// touching freed memory, so ending the process is the only safe failure.
class Watchdog {
public:
  Watchdog(std::string what, std::chrono::seconds timeout);
  ~Watchdog();
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

private:
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread thread;
};

/// The fixture of the suite: GetParam() is the device kind under test.
class DeviceTest : public ::testing::TestWithParam<DeviceFactory> {
protected:
  /// Every test of the suite fails (process abort) after this long.
  static constexpr std::chrono::seconds kTimeout{120};

  /// Skips the test if the device is unavailable here; starts the watchdog.
  void SetUp() override;
  void TearDown() override;

  /// A new device of the kind under test, owned by the test (to destroy it
  /// mid-test). Throws if the factory cannot make one.
  std::unique_ptr<Device> newDevice(int64_t capacity);
  /// A new device owned by the fixture, destroyed after the test body.
  Device &device(int64_t capacity);

private:
  std::vector<std::unique_ptr<Device>> devices;
  std::unique_ptr<Watchdog> watchdog;
};

} // namespace mtc::device::cts

#endif // MTC_TEST_UNIT_DEVICECONFORMANCE_H
