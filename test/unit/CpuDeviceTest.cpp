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

std::unique_ptr<Device> makeCpuDevice(int64_t capacity, std::string &) {
  return std::make_unique<CpuDevice>(capacity);
}

} // namespace

INSTANTIATE_TEST_SUITE_P(CpuDevice, DeviceTest,
                         ::testing::Values(DeviceFactory{"cpu", makeCpuDevice}),
                         DeviceFactoryName());

namespace {

std::string deviceErrorOf(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const DeviceError &e) {
    return e.message;
  }
  return "";
}

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
  CpuDevice dev(1000);
  EXPECT_EQ(dev.capacity(), 1000);
  EXPECT_EQ(dev.name(), "cpu");
  auto *p = static_cast<unsigned char *>(dev.at(0, 1000));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(p[i], 0) << i;
  EXPECT_EQ(static_cast<unsigned char *>(dev.at(10, 0)), p + 10);
  EXPECT_EQ(static_cast<unsigned char *>(dev.at(1000, 0)), p + 1000);
}

TEST(CpuDevice, LaunchedWorkUsesArenaPointers) {
  // at() is host memory here: a launch is the kernel that reads and writes it.
  CpuDevice dev(1 << 16);
  Stream s = dev.createStream("compute");
  std::vector<float> src(256), back(256);
  for (int i = 0; i < 256; ++i)
    src[i] = static_cast<float>(i);
  dev.copyToDevice(s, 1024, src.data(), 1024);
  dev.launch(s, [&dev] {
    auto *p = static_cast<float *>(dev.at(1024, 1024));
    for (int i = 0; i < 256; ++i)
      p[i] *= 2;
  });
  dev.copyToHost(s, back.data(), 1024, 1024);
  dev.synchronize(s);
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
  CpuDevice dev(64);
  Stream s = dev.createStream("copy");
  std::memset(dev.at(0, 64), 0xAB, 64);
  float src[4] = {1.0f, -2.5f, std::nanf(""), 3.0f};
  dev.copyToDevice(s, 8, src, sizeof src, Convert::F32ToBF16);
  dev.synchronize(s);
  auto *h = static_cast<uint16_t *>(dev.at(8, 8));
  EXPECT_EQ(h[0], 0x3f80);
  EXPECT_EQ(h[1], 0xc020);
  EXPECT_EQ(h[2] & 0x7fc0, 0x7fc0);
  EXPECT_EQ(h[3], 0x4040);
  EXPECT_EQ(static_cast<unsigned char *>(dev.at(16, 1))[0], 0xAB);
  EXPECT_EQ(static_cast<unsigned char *>(dev.at(7, 1))[0], 0xAB);
  EXPECT_EQ(dev.stats().h2dBytes, 8);
}

TEST(CpuDevice, FailureSkipsQueuedWork) {
  CpuDevice dev(64);
  Stream a = dev.createStream("compute");
  Stream b = dev.createStream("copy");
  Event e = dev.createEvent();
  bool ranAfter = false;
  EXPECT_FALSE(dev.failed());
  dev.launch(
      a, [] { throw std::runtime_error("kernel exploded"); }, "layer 3 fwd");
  dev.launch(a, [] { throw std::runtime_error("second error"); });
  dev.launch(a, [&] { ranAfter = true; });
  dev.record(e, a);
  dev.wait(b, e); // must not block forever
  dev.launch(b, [&] { ranAfter = true; });
  std::string m = deviceErrorOf([&] { dev.synchronize(); });
  EXPECT_EQ(m, "cpu device: stream 'compute': layer 3 fwd: kernel exploded");
  EXPECT_FALSE(ranAfter);
  EXPECT_TRUE(dev.failed());
  // an exception that is not a std::exception
  CpuDevice dev2(64);
  Stream c = dev2.createStream("c");
  dev2.launch(
      c, [] { throw 42; }, "odd");
  m = deviceErrorOf([&] { dev2.synchronize(); });
  EXPECT_EQ(m, "cpu device: stream 'c': odd: unknown exception");
}

TEST(CpuDevice, ErrorsNameTheCpuDevice) {
  CpuDevice dev(128);
  Stream s = dev.createStream("copy");
  std::vector<char> host(256);
  EXPECT_EQ(
      deviceErrorOf([&] {
        dev.copyToDevice(s, 64, host.data(), 128, Convert::None, "w1");
      }),
      "cpu device: copyToDevice 'w1': 128 bytes at offset 64 [64, 192) are "
      "outside the arena (capacity 128 bytes)");
  EXPECT_EQ(deviceErrorOf([&] { dev.launch(7, [] {}); }),
            "cpu device: launch: no stream 7 (1 created)");
  std::string m = deviceErrorOf([&] { CpuDevice bad(-1); });
  EXPECT_EQ(m, "cpu device: negative arena capacity -1");
}

TEST(CpuDevice, DestructorWithPendingCommandsReturns) {
  std::atomic<int> ran{0};
  auto begin = std::chrono::steady_clock::now();
  {
    CpuDevice dev(64);
    Stream a = dev.createStream("a");
    Stream b = dev.createStream("b");
    Event never = dev.createEvent();
    Event later = dev.createEvent();
    dev.launch(a, [&] {
      std::this_thread::sleep_for(30ms);
      ++ran;
    });
    for (int i = 0; i < 100; ++i)
      dev.launch(a, [&] {
        std::this_thread::sleep_for(10ms);
        ++ran;
      });
    dev.record(later, a);
    dev.wait(b, later); // blocks b behind ~1 s of work on a
    dev.wait(b, never);
    dev.launch(b, [&] { ++ran; });
    std::this_thread::sleep_for(5ms);
  }
  double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  EXPECT_LT(ran.load(), 10); // queued work was discarded, not run
  EXPECT_LT(s, 0.5);
}

} // namespace
