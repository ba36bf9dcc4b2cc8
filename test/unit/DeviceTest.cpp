//===- DeviceTest.cpp - Unit tests of runtime/device ----------------------===//
//
// Part of mtc. CpuDevice: in-order streams, events (generations, never
// recorded), arena bounds, bf16 conversion, errors in launched work,
// statistics and overlap, tracing, destruction with queued work; HostStore;
// the Chrome trace writer. Timing tests use generous sleeps and loose bounds.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/CpuDevice.h"
#include "runtime/device/HostStore.h"
#include "runtime/device/Trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace mtc::device;
using namespace std::chrono_literals;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "mtc-device-" + std::to_string(::getpid()) +
         "-" + name;
}

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

TEST(CpuDevice, OutOfArenaIsAnError) {
  CpuDevice dev(128);
  Stream s = dev.createStream("copy");
  std::string m = deviceErrorOf([&] { dev.at(100, 50); });
  EXPECT_NE(m.find("50 bytes at offset 100"), std::string::npos) << m;
  EXPECT_NE(m.find("[100, 150)"), std::string::npos) << m;
  EXPECT_NE(m.find("capacity 128 bytes"), std::string::npos) << m;
  EXPECT_NE(deviceErrorOf([&] { dev.at(-1, 4); }), "");
  EXPECT_NE(deviceErrorOf([&] { dev.at(0, -4); }), "");
  EXPECT_NE(deviceErrorOf([&] { dev.at(INT64_MAX, INT64_MAX); }), "");

  std::vector<char> host(256);
  m = deviceErrorOf(
      [&] { dev.copyToDevice(s, 64, host.data(), 128, Convert::None, "w1"); });
  EXPECT_NE(m.find("copyToDevice 'w1'"), std::string::npos) << m;
  EXPECT_NE(m.find("128 bytes at offset 64"), std::string::npos) << m;
  m = deviceErrorOf([&] { dev.copyToHost(s, host.data(), 120, 16); });
  EXPECT_NE(m.find("copyToHost"), std::string::npos) << m;
  EXPECT_NE(m.find("capacity 128"), std::string::npos) << m;
  // f32->bf16 writes half the source bytes: 256 source bytes fit in 128.
  EXPECT_EQ(deviceErrorOf([&] {
              dev.copyToDevice(s, 0, host.data(), 256, Convert::F32ToBF16);
            }),
            "");
  EXPECT_NE(deviceErrorOf([&] {
              dev.copyToDevice(s, 2, host.data(), 256, Convert::F32ToBF16);
            }),
            "");
  EXPECT_NE(deviceErrorOf([&] {
              dev.copyToDevice(s, 0, host.data(), 6, Convert::F32ToBF16);
            }),
            "");
  // unknown ids
  EXPECT_NE(deviceErrorOf([&] { dev.launch(7, [] {}); }).find("no stream 7"),
            std::string::npos);
  EXPECT_NE(deviceErrorOf([&] { dev.record(3, s); }).find("no event 3"),
            std::string::npos);
  dev.synchronize();
}

TEST(CpuDevice, OneStreamRunsInOrder) {
  CpuDevice dev(1 << 16);
  Stream s = dev.createStream("compute");
  std::vector<int> order;
  std::vector<float> src(256), back(256);
  for (int i = 0; i < 256; ++i)
    src[i] = static_cast<float>(i);
  for (int i = 0; i < 100; ++i) {
    dev.launch(s, [&order, i] {
      if (i % 10 == 0)
        std::this_thread::sleep_for(1ms);
      order.push_back(i);
    });
  }
  dev.copyToDevice(s, 1024, src.data(), 1024);
  dev.launch(s, [&dev] {
    auto *p = static_cast<float *>(dev.at(1024, 1024));
    for (int i = 0; i < 256; ++i)
      p[i] *= 2;
  });
  dev.copyToHost(s, back.data(), 1024, 1024);
  dev.synchronize(s);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(order[i], i);
  for (int i = 0; i < 256; ++i)
    EXPECT_EQ(back[i], 2.0f * i);
}

TEST(CpuDevice, EventOrdersStreams) {
  CpuDevice dev(64);
  Stream a = dev.createStream("a");
  Stream b = dev.createStream("b");
  Event e = dev.createEvent();
  std::atomic<int> value{0};
  int seen = -1;
  dev.launch(a, [&] {
    std::this_thread::sleep_for(20ms);
    value = 42;
  });
  dev.record(e, a);
  dev.wait(b, e);
  dev.launch(b, [&] { seen = value; });
  dev.synchronize(b);
  EXPECT_EQ(seen, 42);
  dev.synchronize(e); // already reached
  dev.synchronize();
}

TEST(CpuDevice, WaitOnNeverRecordedEventDoesNotBlock) {
  CpuDevice dev(64);
  Stream s = dev.createStream("s");
  Event e = dev.createEvent();
  bool ran = false;
  dev.wait(s, e);
  dev.launch(s, [&] { ran = true; });
  dev.synchronize(s);
  EXPECT_TRUE(ran);
  dev.synchronize(e); // never recorded: returns at once
}

TEST(CpuDevice, ReRecordingGivesNewGenerations) {
  CpuDevice dev(64);
  Stream a = dev.createStream("a");
  Stream b = dev.createStream("b");
  Event e = dev.createEvent();
  std::atomic<int> value{0};
  std::vector<int> seen;
  // generation 1: reached quickly
  dev.launch(a, [&] { value = 1; });
  dev.record(e, a);
  dev.wait(b, e);
  dev.launch(b, [&] { seen.push_back(value); });
  dev.synchronize();
  // generation 2: the wait queued now must not be satisfied by generation 1
  dev.launch(a, [&] {
    std::this_thread::sleep_for(20ms);
    value = 2;
  });
  dev.record(e, a);
  dev.wait(b, e);
  dev.launch(b, [&] { seen.push_back(value); });
  // a wait queued before a third record captures generation 2 only
  dev.launch(a, [&] {
    std::this_thread::sleep_for(200ms);
    value = 3;
  });
  dev.record(e, a);
  dev.synchronize(b);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], 1);
  EXPECT_EQ(seen[1], 2);
  dev.synchronize(e);
  EXPECT_EQ(value, 3);
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

  // through a copy: bytes/2 bytes written, nothing past them
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

TEST(CpuDevice, ErrorInLaunchSurfacesAtSynchronize) {
  CpuDevice dev(64);
  Stream a = dev.createStream("compute");
  Stream b = dev.createStream("copy");
  Event e = dev.createEvent();
  bool ranAfter = false;
  dev.launch(
      a, [] { throw std::runtime_error("kernel exploded"); }, "layer 3 fwd");
  dev.launch(a, [] { throw std::runtime_error("second error"); });
  dev.launch(a, [&] { ranAfter = true; });
  dev.record(e, a);
  dev.wait(b, e); // must not block forever
  dev.launch(b, [&] { ranAfter = true; });
  std::string m = deviceErrorOf([&] { dev.synchronize(); });
  EXPECT_NE(m.find("kernel exploded"), std::string::npos) << m;
  EXPECT_NE(m.find("layer 3 fwd"), std::string::npos) << m;
  EXPECT_NE(m.find("compute"), std::string::npos) << m;
  EXPECT_EQ(m.find("second error"), std::string::npos) << m;
  EXPECT_FALSE(ranAfter);
  EXPECT_TRUE(dev.failed());
  // sticky: every later synchronize reports it
  EXPECT_NE(deviceErrorOf([&] { dev.synchronize(b); }), "");
  EXPECT_NE(deviceErrorOf([&] { dev.synchronize(e); }), "");
  // a DeviceError thrown by a command keeps its message
  CpuDevice dev2(64);
  Stream c = dev2.createStream("c");
  dev2.launch(c, [&dev2] { dev2.at(60, 8); });
  m = deviceErrorOf([&] { dev2.synchronize(c); });
  EXPECT_NE(m.find("capacity 64"), std::string::npos) << m;
}

TEST(CpuDevice, SynchronizeFromACommandIsAnError) {
  CpuDevice dev(64);
  Stream s = dev.createStream("s");
  dev.launch(s, [&dev] { dev.synchronize(); });
  std::string m = deviceErrorOf([&] { dev.synchronize(); });
  EXPECT_NE(m.find("would wait for itself"), std::string::npos) << m;
}

TEST(CpuDevice, StatsCountBytes) {
  CpuDevice dev(4096);
  Stream s = dev.createStream("copy");
  Stream c = dev.createStream("compute");
  std::vector<float> host(256, 1.0f);
  dev.copyToDevice(s, 0, host.data(), 1024);
  dev.copyToDevice(s, 1024, host.data(), 1024, Convert::F32ToBF16);
  dev.copyToHost(s, host.data(), 0, 512);
  dev.launch(c, [] {});
  dev.synchronize();
  DeviceStats st = dev.stats();
  EXPECT_EQ(st.h2dBytes, 1024 + 512);
  EXPECT_EQ(st.d2hBytes, 512);
  EXPECT_EQ(st.copies, 3);
  EXPECT_EQ(st.launches, 1);
  ASSERT_EQ(st.streams.size(), 2u);
  EXPECT_EQ(st.streams[0].label, "copy");
  EXPECT_EQ(st.streams[0].commands, 3);
  EXPECT_EQ(st.streams[1].label, "compute");
  EXPECT_EQ(st.streams[1].commands, 1);
  EXPECT_GE(st.streams[0].busySeconds, 0.0);
  EXPECT_GE(st.overlap, 0.0);
  EXPECT_LE(st.overlap, 1.0);
  dev.resetStats();
  st = dev.stats();
  EXPECT_EQ(st.h2dBytes, 0);
  EXPECT_EQ(st.d2hBytes, 0);
  EXPECT_EQ(st.copies, 0);
  EXPECT_EQ(st.streams[0].commands, 0);
  EXPECT_EQ(st.overlap, 0.0);
}

// 64 MiB copies: long enough to measure, short next to the sleeps.
constexpr int64_t kBig = 64 << 20;

TEST(CpuDevice, OverlapIsHighWhenACopyRunsUnderALaunch) {
  CpuDevice dev(kBig);
  Stream copy = dev.createStream("copy");
  Stream compute = dev.createStream("compute");
  std::vector<char> host(kBig, 1);
  dev.launch(compute, [] { std::this_thread::sleep_for(50ms); });
  dev.launch(compute, [] { std::this_thread::sleep_for(400ms); });
  // the copy starts while the first launch sleeps
  std::this_thread::sleep_for(10ms);
  dev.copyToDevice(copy, 0, host.data(), kBig);
  dev.copyToDevice(copy, 0, host.data(), kBig);
  dev.synchronize(copy);
  dev.synchronize();
  DeviceStats st = dev.stats();
  EXPECT_EQ(st.copies, 2);
  EXPECT_GT(st.copySeconds, 0.0);
  EXPECT_GT(st.overlap, 0.5) << "copy " << st.copySeconds << " s";
  EXPECT_LE(st.overlap, 1.0);
  EXPECT_GT(st.computeSeconds, 0.4);
}

TEST(CpuDevice, HostStreamWorkDoesNotCountAsOverlap) {
  CpuDevice dev(kBig);
  Stream copy = dev.createStream("copy");
  Stream host = dev.createHostStream("optimizer");
  std::vector<char> bytes(kBig, 1);
  dev.launch(host, [] { std::this_thread::sleep_for(300ms); });
  std::this_thread::sleep_for(10ms);
  dev.copyToDevice(copy, 0, bytes.data(), kBig);
  dev.synchronize();
  DeviceStats st = dev.stats();
  EXPECT_EQ(st.copies, 1);
  EXPECT_LT(st.overlap, 0.1) << "copy " << st.copySeconds << " s";
}

TEST(CpuDevice, OverlapIsZeroWhenSerializedOnOneStream) {
  CpuDevice dev(kBig);
  Stream s = dev.createStream("only");
  std::vector<char> host(kBig, 1);
  dev.launch(s, [] { std::this_thread::sleep_for(50ms); });
  dev.copyToDevice(s, 0, host.data(), kBig);
  dev.launch(s, [] { std::this_thread::sleep_for(50ms); });
  dev.synchronize();
  DeviceStats st = dev.stats();
  EXPECT_EQ(st.copies, 1);
  EXPECT_LT(st.overlap, 0.1);
  ASSERT_EQ(st.streams.size(), 1u);
  EXPECT_GT(st.streams[0].busySeconds, 0.09);
  EXPECT_GT(st.elapsedSeconds, 0.09);
}

TEST(CpuDevice, TraceHasOneEventPerCommand) {
  Trace trace;
  CpuDevice dev(4096);
  Stream a = dev.createStream("h2d");
  dev.setTrace(&trace);
  Stream b = dev.createStream("compute");
  Stream c = dev.createStream("compute"); // duplicate label: its own track
  Event e = dev.createEvent();
  std::vector<char> host(1024);
  dev.copyToDevice(a, 0, host.data(), 1024, Convert::None, "weights layer 0");
  dev.copyToDevice(a, 1024, host.data(), 512);
  dev.record(e, a);
  dev.wait(b, e);
  dev.launch(
      b, [] {}, "layer 0 fwd");
  dev.launch(c, [] {});
  dev.copyToHost(c, host.data(), 0, 64);
  dev.synchronize();
  auto t0 = Trace::Clock::now();
  trace.span("optimizer", "adamw layer 0", t0, t0 + 1ms);
  { Trace::Scope scope(&trace, trace.track("optimizer"), "adamw layer 1"); }

  std::string path = tempPath("trace.json");
  std::string err;
  ASSERT_TRUE(trace.write(path, err)) << err;
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  std::map<int, std::string> threadNames;
  std::map<std::string, std::vector<std::string>> byTrack;
  int xEvents = 0;
  for (const auto &ev : j.at("traceEvents")) {
    if (ev.at("ph") == "M" && ev.at("name") == "thread_name")
      threadNames[ev.at("tid").get<int>()] = ev.at("args").at("name");
  }
  for (const auto &ev : j.at("traceEvents")) {
    if (ev.at("ph") != "X")
      continue;
    ++xEvents;
    EXPECT_TRUE(ev.contains("ts") && ev.contains("dur") && ev.contains("pid") &&
                ev.contains("cat"));
    EXPECT_GE(ev.at("dur").get<double>(), 0.0);
    byTrack[threadNames.at(ev.at("tid").get<int>())].push_back(ev.at("name"));
  }
  EXPECT_EQ(xEvents, 9);
  EXPECT_EQ(byTrack["h2d"],
            (std::vector<std::string>{"weights layer 0", "copy h2d 512 bytes",
                                      "record event 0"}));
  EXPECT_EQ(byTrack["compute"],
            (std::vector<std::string>{"wait event 0", "layer 0 fwd"}));
  EXPECT_EQ(byTrack["compute #2"],
            (std::vector<std::string>{"launch", "copy d2h 64 bytes"}));
  EXPECT_EQ(byTrack["optimizer"],
            (std::vector<std::string>{"adamw layer 0", "adamw layer 1"}));
  ::unlink(path.c_str());

  EXPECT_FALSE(trace.write("/nonexistent-dir/x/trace.json", err));
  EXPECT_NE(err.find("/nonexistent-dir/x/trace.json"), std::string::npos)
      << err;
}

TEST(Trace, EscapesAndLimits) {
  Trace trace(2);
  auto t = Trace::Clock::now();
  trace.span("a \"quoted\"\ttrack", "line\nbreak \\ \x01", t, t);
  trace.span("a", "2", t, t);
  trace.span("a", "3", t, t);
  EXPECT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace.dropped(), 1u);
  nlohmann::json j = nlohmann::json::parse(trace.json());
  bool found = false;
  for (const auto &ev : j.at("traceEvents"))
    if (ev.at("ph") == "X" && ev.at("name") == "line\nbreak \\ \x01")
      found = true;
  EXPECT_TRUE(found);
  trace.clear();
  EXPECT_EQ(trace.size(), 0u);
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

TEST(HostStore, AllocateIsAlignedAndZeroed) {
  HostStore store;
  HostBuffer a = store.allocate(10000, "adamw m");
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 4096, 0u);
  EXPECT_EQ(a.size(), 10000);
  EXPECT_EQ(a.what(), "adamw m");
  EXPECT_FALSE(a.fileBacked());
  for (int i = 0; i < 10000; ++i)
    ASSERT_EQ(a.as<unsigned char>()[i], 0);
  std::memset(a.data(), 7, 10000);
  EXPECT_EQ(store.hostBytes(), 10000);
  {
    HostBuffer b = store.allocate(4096, "v");
    EXPECT_EQ(store.hostBytes(), 14096);
    HostBuffer moved = std::move(b);
    EXPECT_EQ(b.data(), nullptr);
    EXPECT_EQ(store.hostBytes(), 14096);
  }
  EXPECT_EQ(store.hostBytes(), 10000);
  HostBuffer empty = store.allocate(0, "nothing");
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0);
  a.release();
  EXPECT_EQ(store.hostBytes(), 0);
}

TEST(HostStore, ErrorsNameWhatAndSize) {
  HostStore store;
  std::string m = deviceErrorOf([&] { store.allocate(-5, "grads"); });
  EXPECT_NE(m.find("grads"), std::string::npos) << m;
  // far more than any address space allows
  m = deviceErrorOf([&] { store.allocate(int64_t(1) << 62, "master"); });
  EXPECT_NE(m.find("master"), std::string::npos) << m;
  EXPECT_NE(m.find("4611686018427387904 bytes"), std::string::npos) << m;
  m = deviceErrorOf(
      [&] { store.allocateFileBacked("/nonexistent-dir/state.bin", 4096); });
  EXPECT_NE(m.find("/nonexistent-dir/state.bin"), std::string::npos) << m;
}

TEST(HostStore, PinIsBestEffort) {
  HostStore store;
  HostBuffer a = store.allocate(4096, "small");
  std::string reason;
  bool ok = store.pin(a, &reason);
  EXPECT_EQ(a.pinned(), ok);
  EXPECT_EQ(store.pinnedBytes(), ok ? 4096 : 0);
  if (!ok)
    EXPECT_NE(reason.find("small"), std::string::npos) << reason;
  a.release();
  EXPECT_EQ(store.pinnedBytes(), 0);
}

TEST(HostStore, FileBackedRoundTrip) {
  HostStore store;
  std::string path = tempPath("state.bin");
  ::unlink(path.c_str());
  {
    HostBuffer f = store.allocateFileBacked(path, 3 * 4096 + 100, "master");
    ASSERT_NE(f.data(), nullptr);
    EXPECT_TRUE(f.fileBacked());
    EXPECT_EQ(store.fileBytes(), 3 * 4096 + 100);
    EXPECT_EQ(store.hostBytes(), 0);
    auto *p = f.as<unsigned char>();
    for (int64_t i = 0; i < f.size(); ++i)
      ASSERT_EQ(p[i], 0);
    for (int64_t i = 0; i < f.size(); ++i)
      p[i] = static_cast<unsigned char>(i * 31);
    std::string err;
    EXPECT_TRUE(f.sync(err)) << err;
  }
  EXPECT_EQ(store.fileBytes(), 0);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), 3u * 4096 + 100);
  for (size_t i = 0; i < bytes.size(); ++i)
    ASSERT_EQ(static_cast<unsigned char>(bytes[i]),
              static_cast<unsigned char>(i * 31));
  {
    // mapping the file again keeps its contents; growing it adds zeros
    HostBuffer f = store.allocateFileBacked(path, 4 * 4096);
    auto *p = f.as<unsigned char>();
    EXPECT_EQ(p[1000], static_cast<unsigned char>(1000 * 31));
    EXPECT_EQ(p[4 * 4096 - 1], 0);
  }
  ::unlink(path.c_str());
}

} // namespace
