//===- CpuDeviceTest.cpp - CpuDevice: the suite and what is its own -------===//
//
// Part of mtc. Runs the device conformance suite (DeviceConformanceTest.cpp)
// on CpuDevice, and tests what only CpuDevice promises: a zero-filled arena
// whose at() pointers launched work may dereference (host memory), the
// f32 -> bf16 conversion function itself, a failure that skips every copy and
// launch not yet run, error messages that name the cpu device, and a
// destructor that discards queued work.
//
//===----------------------------------------------------------------------===//

#include "DeviceConformance.h"

#include "runtime/device/CpuDevice.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

using namespace mtc::device;
using namespace mtc::device::cts;
using namespace std::chrono_literals;

namespace {

mtc::Expected<std::unique_ptr<Device>> makeCpuDevice(int64_t capacity,
                                                     std::string &) {
  mtc::Expected<std::unique_ptr<CpuDevice>> dev = CpuDevice::create(capacity);
  if (!dev)
    return dev.status();
  return std::unique_ptr<Device>(std::move(*dev));
}

} // namespace

INSTANTIATE_TEST_SUITE_P(CpuDevice, DeviceTest,
                         ::testing::Values(DeviceFactory{"cpu", makeCpuDevice}),
                         DeviceFactoryName());

namespace {

uint16_t bf16Of(float f) {
  uint16_t h = 0;
  convertF32ToBF16(&f, &h, 1);
  return h;
}

float bitsToF32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(CpuDevice, ArenaIsAlignedAndZeroed) {
  std::unique_ptr<CpuDevice> devOwned = must(CpuDevice::create(1000));
  CpuDevice &dev = *devOwned;
  EXPECT_EQ(dev.capacity(), 1000);
  EXPECT_EQ(dev.name(), "cpu");
  auto *p = static_cast<unsigned char *>(must(dev.at(0, 1000)));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(p[i], 0) << i;
  EXPECT_EQ(static_cast<unsigned char *>(must(dev.at(10, 0))), p + 10);
  EXPECT_EQ(static_cast<unsigned char *>(must(dev.at(1000, 0))), p + 1000);
}

TEST(CpuDevice, LaunchedWorkUsesArenaPointers) {
  // at() is host memory here: a launch is the kernel that reads and writes it.
  std::unique_ptr<CpuDevice> devOwned = must(CpuDevice::create(1 << 16));
  CpuDevice &dev = *devOwned;
  Stream s = must(dev.createStream("compute"));
  std::vector<float> src(256), back(256);
  for (int i = 0; i < 256; ++i)
    src[i] = static_cast<float>(i);
  must(dev.copyToDevice(s, 1024, src.data(), 1024));
  must(dev.launch(s, [&dev] {
    auto *p = static_cast<float *>(must(dev.at(1024, 1024)));
    for (int i = 0; i < 256; ++i)
      p[i] *= 2;
  }));
  must(dev.copyToHost(s, back.data(), 1024, 1024));
  must(dev.synchronize(s));
  for (int i = 0; i < 256; ++i)
    EXPECT_EQ(back[i], 2.0f * i);
}

TEST(CpuDevice, F32ToBF16Conversion) {
  EXPECT_EQ(bf16Of(1.0f), 0x3f80);
  EXPECT_EQ(bf16Of(-2.5f), 0xc020);
  EXPECT_EQ(bf16Of(0.0f), 0x0000);
  EXPECT_EQ(bf16Of(-0.0f), 0x8000);
  EXPECT_EQ(bf16Of(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16Of(-std::numeric_limits<float>::infinity()), 0xff80);
  // ties to even: 0x3f80_8000 is halfway between 0x3f80 and 0x3f81 -> 0x3f80
  EXPECT_EQ(bf16Of(bitsToF32(0x3f808000u)), 0x3f80);
  // 0x3f81_8000 is halfway between 0x3f81 and 0x3f82 -> 0x3f82 (even)
  EXPECT_EQ(bf16Of(bitsToF32(0x3f818000u)), 0x3f82);
  // above / below halfway
  EXPECT_EQ(bf16Of(bitsToF32(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16Of(bitsToF32(0x3f807fffu)), 0x3f80);
  // the largest finite values round to infinity
  EXPECT_EQ(bf16Of(bitsToF32(0x7f7fffffu)), 0x7f80);
  // NaN stays NaN (even one whose payload would round into the exponent)
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffffffffu, 0x7fffffffu}) {
    uint16_t h = bf16Of(bitsToF32(nan));
    EXPECT_EQ(h & 0x7f80, 0x7f80) << std::hex << nan;
    EXPECT_NE(h & 0x007f, 0) << std::hex << nan;
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
  }

  // through a copy, read in place: bytes/2 bytes written, nothing past them
  std::unique_ptr<CpuDevice> devOwned = must(CpuDevice::create(64));
  CpuDevice &dev = *devOwned;
  Stream s = must(dev.createStream("copy"));
  std::memset(must(dev.at(0, 64)), 0xAB, 64);
  float src[4] = {1.0f, -2.5f, std::nanf(""), 3.0f};
  must(dev.copyToDevice(s, 8, src, sizeof src, Convert::F32ToBF16));
  must(dev.synchronize(s));
  auto *h = static_cast<uint16_t *>(must(dev.at(8, 8)));
  EXPECT_EQ(h[0], 0x3f80);
  EXPECT_EQ(h[1], 0xc020);
  EXPECT_EQ(h[2] & 0x7fc0, 0x7fc0);
  EXPECT_EQ(h[3], 0x4040);
  EXPECT_EQ(static_cast<unsigned char *>(must(dev.at(16, 1)))[0], 0xAB);
  EXPECT_EQ(static_cast<unsigned char *>(must(dev.at(7, 1)))[0], 0xAB);
  EXPECT_EQ(dev.stats().h2dBytes, 8);
}

TEST(CpuDevice, FailureSkipsQueuedWork) {
  std::unique_ptr<CpuDevice> devOwned = must(CpuDevice::create(64));
  CpuDevice &dev = *devOwned;
  Stream a = must(dev.createStream("compute"));
  Stream b = must(dev.createStream("copy"));
  Event e = must(dev.createEvent());
  bool ranAfter = false;
  EXPECT_FALSE(dev.failed());
  must(dev.launch(
      a, [] { throw std::runtime_error("kernel exploded"); }, "layer 3 fwd"));
  must(dev.launch(a, [] { throw std::runtime_error("second error"); }));
  must(dev.launch(a, [&] { ranAfter = true; }));
  must(dev.record(e, a));
  must(dev.wait(b, e)); // must not block forever
  must(dev.launch(b, [&] { ranAfter = true; }));
  std::string m = deviceErrorOf([&] { return dev.synchronize(); });
  EXPECT_EQ(m, "cpu device: stream 'compute': layer 3 fwd: kernel exploded");
  EXPECT_FALSE(ranAfter);
  EXPECT_TRUE(dev.failed());
  // an exception that is not a std::exception
  std::unique_ptr<CpuDevice> dev2Owned = must(CpuDevice::create(64));
  CpuDevice &dev2 = *dev2Owned;
  Stream c = must(dev2.createStream("c"));
  must(dev2.launch(
      c, [] { throw 42; }, "odd"));
  m = deviceErrorOf([&] { return dev2.synchronize(); });
  EXPECT_EQ(m, "cpu device: stream 'c': odd: unknown exception");
}

TEST(CpuDevice, ErrorsNameTheCpuDevice) {
  std::unique_ptr<CpuDevice> devOwned = must(CpuDevice::create(128));
  CpuDevice &dev = *devOwned;
  Stream s = must(dev.createStream("copy"));
  std::vector<char> host(256);
  EXPECT_EQ(
      deviceErrorOf([&] {
        return dev.copyToDevice(s, 64, host.data(), 128, Convert::None, "w1");
      }),
      "cpu device: copyToDevice 'w1': 128 bytes at offset 64 [64, 192) are "
      "outside the arena (capacity 128 bytes)");
  EXPECT_EQ(deviceErrorOf([&] { return dev.launch(7, [] {}); }),
            "cpu device: launch: no stream 7 (1 created)");
  std::string m = deviceErrorOf([&] { return CpuDevice::create(-1); });
  EXPECT_EQ(m, "cpu device: negative arena capacity -1");
}

TEST(CpuDevice, DestructorWithPendingCommandsReturns) {
  std::atomic<int> ran{0};
  auto begin = std::chrono::steady_clock::now();
  {
    std::unique_ptr<CpuDevice> devOwned = must(CpuDevice::create(64));
    CpuDevice &dev = *devOwned;
    Stream a = must(dev.createStream("a"));
    Stream b = must(dev.createStream("b"));
    Event never = must(dev.createEvent());
    Event later = must(dev.createEvent());
    must(dev.launch(a, [&] {
      std::this_thread::sleep_for(30ms);
      ++ran;
    }));
    for (int i = 0; i < 100; ++i)
      must(dev.launch(a, [&] {
        std::this_thread::sleep_for(10ms);
        ++ran;
      }));
    must(dev.record(later, a));
    must(dev.wait(b, later)); // blocks b behind ~1 s of work on a
    must(dev.wait(b, never));
    must(dev.launch(b, [&] { ++ran; }));
    std::this_thread::sleep_for(5ms);
  }
  double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  EXPECT_LT(ran.load(), 10); // queued work was discarded, not run
  EXPECT_LT(s, 0.5);
}

} // namespace
