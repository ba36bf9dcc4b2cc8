//===- DeviceConformanceTest.cpp - The suite every Device passes ----------===//
//
// Part of mtc. The promises of runtime/device/Device.h, tested once against
// the interface (DeviceConformance.h says how a device runs them): stream FIFO
// order of copies and launches, events ordering streams (re-recording, never
// recorded events, synchronize on events and streams), copies both ways and
// the f32 -> bf16 conversion bit for bit against a reference, arena bounds
// (errors, never writes), errors in launched work, host streams, statistics
// and overlap, tracing, many streams and events, a randomised stress of
// thousands of commands, destruction with work queued. Timing tests use
// generous sleeps and loose bounds. Every test runs under a watchdog.
//
//===----------------------------------------------------------------------===//

#include "DeviceConformance.h"

#include "runtime/device/Trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <unistd.h>

namespace mtc::device::cts {

using namespace std::chrono_literals;

//===----------------------------------------------------------------------===//
// The fixture
//===----------------------------------------------------------------------===//

Watchdog::Watchdog(std::string what, std::chrono::seconds timeout) {
  thread = std::thread([this, what = std::move(what), timeout] {
    std::unique_lock<std::mutex> lock(mu);
    if (cv.wait_for(lock, timeout, [this] { return done; }))
      return;
    std::fprintf(stderr,
                 "\n%s: still running after %lld s: a command or a "
                 "synchronize() hangs (deadlock?); aborting\n",
                 what.c_str(), static_cast<long long>(timeout.count()));
    std::fflush(stderr);
    std::abort();
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  thread.join();
}

void DeviceTest::SetUp() {
  const DeviceFactory &f = GetParam();
  std::string unavailable;
  Expected<std::unique_ptr<Device>> probe = f.make(64, unavailable);
  if (probe.ok() && !*probe)
    GTEST_SKIP() << "device '" << f.name << "' is unavailable here: "
                 << (unavailable.empty() ? "(no reason given)" : unavailable);
  const ::testing::TestInfo *info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  watchdog = std::make_unique<Watchdog>(
      std::string(info->test_suite_name()) + "." + info->name(), kTimeout);
}

void DeviceTest::TearDown() {
  devices.clear(); // destruction is guarded too
  watchdog.reset();
}

std::unique_ptr<Device> DeviceTest::newDevice(int64_t capacity) {
  std::string unavailable;
  Expected<std::unique_ptr<Device>> d = GetParam().make(capacity, unavailable);
  if (!d.ok() || !*d)
    throw std::runtime_error("cannot make a '" + GetParam().name +
                             "' device of " + std::to_string(capacity) +
                             " bytes: " + (d.ok() ? unavailable : d.message()));
  return std::move(*d);
}

Device &DeviceTest::device(int64_t capacity) {
  devices.push_back(newDevice(capacity));
  return *devices.back();
}

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

constexpr size_t npos = std::string::npos;

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "mtc-device-cts-" + std::to_string(::getpid()) +
         "-" + name;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

/// fp32 -> bf16 with round to nearest even, written independently of any
/// device: keep the upper half, add one when the lower half is above the
/// halfway point, or at it with an odd upper half (a carry into the exponent
/// gives the next binade, or infinity). Not for NaN.
uint16_t bf16Reference(uint32_t u) {
  uint32_t upper = u >> 16, lower = u & 0xffffu;
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u)))
    ++upper;
  return static_cast<uint16_t>(upper);
}

bool isNaNBits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

uint32_t f32Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// A latch a launched closure blocks on until the test opens it; it opens at
/// the latest when the Gate goes out of scope, so that a failed assertion
/// never leaves a stream blocked. Closures capture waiter(), not the Gate.
class Gate {
public:
  Gate() = default;
  Gate(const Gate &) = delete;
  Gate &operator=(const Gate &) = delete;
  ~Gate() { open(); }
  void open() {
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->open = true;
    }
    st->cv.notify_all();
  }
  std::function<void()> waiter() const {
    std::shared_ptr<State> s = st;
    return [s] {
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait(lock, [&] { return s->open; });
    };
  }

private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  std::shared_ptr<State> st = std::make_shared<State>();
};

//===----------------------------------------------------------------------===//
// The arena
//===----------------------------------------------------------------------===//

TEST_P(DeviceTest, CapacityIsTheArenaSize) {
  for (int64_t cap :
       {int64_t(0), int64_t(1), int64_t(1000), int64_t(64) << 20}) {
    std::unique_ptr<Device> dev = newDevice(cap);
    EXPECT_EQ(dev->capacity(), cap);
    EXPECT_FALSE(dev->name().empty());
  }
  std::string unavailable;
  EXPECT_NE(deviceErrorOf([&] { return GetParam().make(-1, unavailable); }),
            "");
  // an arena no machine has: an error naming its size, not a crash
  const int64_t huge = int64_t(1) << 60;
  std::string m =
      deviceErrorOf([&] { return GetParam().make(huge, unavailable); });
  EXPECT_NE(m.find(std::to_string(huge)), npos) << m;
}

TEST_P(DeviceTest, ArenaAddressesAreAlignedAndContiguous) {
  // Addresses only: on a GPU they are device pointers, not for the host.
  Device &dev = device(1000);
  auto *p = static_cast<char *>(must(dev.at(0, 1000)));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(static_cast<char *>(must(dev.at(10, 0))), p + 10);
  EXPECT_EQ(static_cast<char *>(must(dev.at(999, 1))), p + 999);
  EXPECT_EQ(static_cast<char *>(must(dev.at(1000, 0))), p + 1000);
}

TEST_P(DeviceTest, OutOfArenaIsAnErrorNeverAWrite) {
  Device &dev = device(128);
  Stream s = must(dev.createStream("copy"));
  Event e = must(dev.createEvent());
  std::vector<unsigned char> fill(128, 0x5A);
  must(dev.copyToDevice(s, 0, fill.data(), 128));
  must(dev.synchronize(s));

  std::string m = deviceErrorOf([&] { return dev.at(100, 50); });
  EXPECT_NE(m.find("50 bytes at offset 100"), npos) << m;
  EXPECT_NE(m.find("[100, 150)"), npos) << m;
  EXPECT_NE(m.find("capacity 128 bytes"), npos) << m;
  EXPECT_NE(deviceErrorOf([&] { return dev.at(-1, 4); }), "");
  EXPECT_NE(deviceErrorOf([&] { return dev.at(0, -4); }), "");
  EXPECT_NE(deviceErrorOf([&] { return dev.at(129, 0); }), "");
  EXPECT_NE(deviceErrorOf([&] { return dev.at(INT64_MAX, INT64_MAX); }), "");

  std::vector<char> host(256, 0x11);
  m = deviceErrorOf([&] {
    return dev.copyToDevice(s, 64, host.data(), 128, Convert::None, "w1");
  });
  EXPECT_NE(m.find("copyToDevice 'w1'"), npos) << m;
  EXPECT_NE(m.find("128 bytes at offset 64"), npos) << m;
  m = deviceErrorOf([&] { return dev.copyToHost(s, host.data(), 120, 16); });
  EXPECT_NE(m.find("copyToHost"), npos) << m;
  EXPECT_NE(m.find("capacity 128"), npos) << m;
  EXPECT_NE(
      deviceErrorOf([&] { return dev.copyToDevice(s, -8, host.data(), 8); }),
      "");
  EXPECT_NE(
      deviceErrorOf([&] { return dev.copyToDevice(s, 0, host.data(), -1); }),
      "");
  EXPECT_NE(deviceErrorOf(
                [&] { return dev.copyToDevice(s, 8, host.data(), INT64_MAX); }),
            "");
  EXPECT_NE(
      deviceErrorOf([&] { return dev.copyToHost(s, host.data(), -1, 1); }), "");
  EXPECT_NE(
      deviceErrorOf([&] { return dev.copyToHost(s, host.data(), 0, 129); }),
      "");
  // f32->bf16 writes half the source bytes: 256 source bytes fit in 128
  // (fp32 0x5A5A0000 is bf16 0x5A5A exactly, so the fill stays as it was).
  std::vector<uint32_t> f32(64, 0x5A5A0000u);
  EXPECT_EQ(deviceErrorOf([&] {
              return dev.copyToDevice(s, 0, f32.data(), 256,
                                      Convert::F32ToBF16);
            }),
            "");
  EXPECT_NE(deviceErrorOf([&] {
              return dev.copyToDevice(s, 2, f32.data(), 256,
                                      Convert::F32ToBF16);
            }),
            "");
  EXPECT_NE(deviceErrorOf([&] {
              return dev.copyToDevice(s, 0, f32.data(), 6, Convert::F32ToBF16);
            }),
            "");
  // null host memory; zero bytes at the very end are fine
  EXPECT_NE(deviceErrorOf([&] { return dev.copyToDevice(s, 0, nullptr, 4); }),
            "");
  EXPECT_NE(deviceErrorOf([&] { return dev.copyToHost(s, nullptr, 0, 4); }),
            "");
  EXPECT_EQ(
      deviceErrorOf([&] { return dev.copyToDevice(s, 128, host.data(), 0); }),
      "");
  EXPECT_EQ(
      deviceErrorOf([&] { return dev.copyToHost(s, host.data(), 128, 0); }),
      "");
  // unknown ids, empty work
  EXPECT_NE(
      deviceErrorOf([&] { return dev.launch(7, [] {}); }).find("no stream 7"),
      npos);
  EXPECT_NE(deviceErrorOf([&] { return dev.record(3, s); }).find("no event 3"),
            npos);
  EXPECT_NE(deviceErrorOf([&] { return dev.record(e, 7); }), "");
  EXPECT_NE(deviceErrorOf([&] { return dev.wait(s, 3); }), "");
  EXPECT_NE(deviceErrorOf([&] { return dev.wait(7, e); }), "");
  EXPECT_NE(
      deviceErrorOf([&] { return dev.copyToDevice(9, 0, host.data(), 4); }),
      "");
  EXPECT_NE(deviceErrorOf([&] { return dev.copyToHost(9, host.data(), 0, 4); }),
            "");
  EXPECT_NE(deviceErrorOf([&] { return dev.synchronize(Stream(7)); }), "");
  EXPECT_NE(deviceErrorOf([&] { return dev.synchronize(Event(3)); }), "");
  EXPECT_NE(
      deviceErrorOf([&] { return dev.launch(s, std::function<void()>()); }),
      "");

  // Nothing was written, in the arena or in host memory, and a rejected
  // command does not fail the device.
  std::vector<unsigned char> back(128);
  must(dev.copyToHost(s, back.data(), 0, 128));
  EXPECT_EQ(deviceErrorOf([&] { return dev.synchronize(); }), "");
  EXPECT_EQ(back, fill);
  for (char c : host)
    ASSERT_EQ(c, 0x11);
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

TEST_P(DeviceTest, OneStreamRunsInOrder) {
  Device &dev = device(1 << 16);
  Stream s = must(dev.createStream("compute"));
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) {
    must(dev.launch(s, [&order, i] {
      if (i % 10 == 0)
        std::this_thread::sleep_for(1ms);
      order.push_back(i);
    }));
  }
  // Copies and launches share the FIFO, and a copy reads (or writes) its host
  // memory when it runs, not when it is queued: the second copy sends what
  // the launch before it wrote, the last launch sees what the copy before it
  // brought back.
  std::vector<float> a(256), b(256, -1.0f), back(256), seen;
  for (int i = 0; i < 256; ++i)
    a[i] = static_cast<float>(i);
  must(dev.copyToDevice(s, 1024, a.data(), 1024));
  must(dev.launch(s, [&] {
    std::this_thread::sleep_for(5ms);
    for (int i = 0; i < 256; ++i)
      b[i] = 2.0f * a[i];
  }));
  must(dev.copyToDevice(s, 2048, b.data(), 1024));
  must(dev.copyToHost(s, back.data(), 2048, 1024));
  must(dev.launch(s, [&] { seen = back; }));
  // a later copy to the same place wins
  must(dev.copyToDevice(s, 1024, b.data(), 1024));
  std::vector<float> again(256);
  must(dev.copyToHost(s, again.data(), 1024, 1024));
  must(dev.synchronize(s));
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(order[i], i);
  for (int i = 0; i < 256; ++i)
    EXPECT_EQ(back[i], 2.0f * i);
  EXPECT_EQ(seen, back);
  EXPECT_EQ(again, b);
}

TEST_P(DeviceTest, EventOrdersStreams) {
  Device &dev = device(64);
  Stream a = must(dev.createStream("a"));
  Stream b = must(dev.createStream("b"));
  Event e = must(dev.createEvent());
  std::atomic<int> value{0};
  int seen = -1;
  must(dev.launch(a, [&] {
    std::this_thread::sleep_for(20ms);
    value = 42;
  }));
  must(dev.record(e, a));
  must(dev.wait(b, e));
  must(dev.launch(b, [&] { seen = value; }));
  must(dev.synchronize(b));
  EXPECT_EQ(seen, 42);
  must(dev.synchronize(e)); // already reached
  must(dev.synchronize());
}

TEST_P(DeviceTest, WaitOnNeverRecordedEventDoesNotBlock) {
  Device &dev = device(64);
  Stream s = must(dev.createStream("s"));
  Event e = must(dev.createEvent());
  bool ran = false;
  must(dev.wait(s, e));
  must(dev.launch(s, [&] { ran = true; }));
  must(dev.synchronize(s));
  EXPECT_TRUE(ran);
  must(dev.synchronize(e)); // never recorded: returns at once
}

TEST_P(DeviceTest, ReRecordingGivesNewGenerations) {
  Device &dev = device(64);
  Stream a = must(dev.createStream("a"));
  Stream b = must(dev.createStream("b"));
  Event e = must(dev.createEvent());
  std::atomic<int> value{0};
  std::vector<int> seen;
  // generation 1: reached quickly
  must(dev.launch(a, [&] { value = 1; }));
  must(dev.record(e, a));
  must(dev.wait(b, e));
  must(dev.launch(b, [&] { seen.push_back(value); }));
  must(dev.synchronize());
  // generation 2: the wait queued now must not be satisfied by generation 1
  must(dev.launch(a, [&] {
    std::this_thread::sleep_for(20ms);
    value = 2;
  }));
  must(dev.record(e, a));
  must(dev.wait(b, e));
  must(dev.launch(b, [&] { seen.push_back(value); }));
  // a wait queued before a third record captures generation 2 only (were
  // it to wait for generation 3, synchronize(b) would hang on the gate)
  Gate gate;
  must(dev.launch(a, [&value, hold = gate.waiter()] {
    hold();
    value = 3;
  }));
  must(dev.record(e, a));
  must(dev.synchronize(b));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], 1);
  EXPECT_EQ(seen[1], 2);
  gate.open();
  must(dev.synchronize(e));
  EXPECT_EQ(value, 3);
}

TEST_P(DeviceTest, SynchronizeEventWaitsForItsRecordOnly) {
  Device &dev = device(64);
  Stream a = must(dev.createStream("a"));
  Event e = must(dev.createEvent());
  Gate gate;
  std::atomic<bool> before{false}, after{false};
  must(dev.launch(a, [&] {
    std::this_thread::sleep_for(50ms);
    before = true;
  }));
  must(dev.record(e, a));
  must(dev.launch(a, gate.waiter())); // queued after the record: not waited for
  must(dev.launch(a, [&] { after = true; }));
  must(dev.synchronize(e));
  EXPECT_TRUE(before);
  EXPECT_FALSE(after);
  gate.open();
  must(dev.synchronize(a));
  EXPECT_TRUE(after);
}

TEST_P(DeviceTest, SynchronizeStreamWaitsForThatStreamOnly) {
  Device &dev = device(64);
  Stream a = must(dev.createStream("a"));
  Stream b = must(dev.createStream("b"));
  Gate gate;
  std::atomic<bool> ranA{false}, ranB{false};
  must(dev.launch(b, gate.waiter()));
  must(dev.launch(b, [&] { ranB = true; }));
  must(dev.launch(a, [&] {
    std::this_thread::sleep_for(20ms);
    ranA = true;
  }));
  must(dev.synchronize(a)); // returns although b is blocked
  EXPECT_TRUE(ranA);
  EXPECT_FALSE(ranB);
  gate.open();
  must(dev.synchronize());
  EXPECT_TRUE(ranB);
}

TEST_P(DeviceTest, SynchronizeWaitsForEveryStream) {
  Device &dev = device(64);
  std::vector<Stream> streams{
      must(dev.createStream("a")), must(dev.createStream("b")),
      must(dev.createHostStream("host")), must(dev.createStream("c"))};
  for (size_t i = 0; i < streams.size(); ++i) // ids in creation order
    EXPECT_EQ(static_cast<int>(streams[i]), static_cast<int>(i));
  std::atomic<int> ran{0};
  for (Stream s : streams)
    for (int i = 0; i < 3; ++i)
      must(dev.launch(s, [&] {
        std::this_thread::sleep_for(10ms);
        ++ran;
      }));
  must(dev.synchronize());
  EXPECT_EQ(ran, 12);
}

TEST_P(DeviceTest, HostStreamsTakePartInEvents) {
  // The streaming runtime's pattern: compute uses the weights, the optimizer
  // (a host stream) updates them in host memory once compute is done, the
  // next load waits for the update.
  Device &dev = device(4096);
  Stream h2d = must(dev.createStream("h2d"));
  Stream compute = must(dev.createStream("compute"));
  Stream opt = must(dev.createHostStream("optimizer"));
  Event loaded = must(dev.createEvent()), used = must(dev.createEvent()),
        updated = must(dev.createEvent());
  std::vector<float> weights(256, 1.0f), back(256);
  std::atomic<int> ticket{0};
  int computeAt = -1, updateAt = -1;
  std::vector<int> order;
  must(dev.copyToDevice(h2d, 0, weights.data(), 1024));
  must(dev.record(loaded, h2d));
  must(dev.wait(compute, loaded));
  must(dev.launch(compute, [&] {
    std::this_thread::sleep_for(20ms);
    computeAt = ticket++;
  }));
  must(dev.record(used, compute));
  must(dev.wait(opt, used));
  must(dev.launch(opt, [&] {
    for (float &w : weights)
      w += 1.0f;
    updateAt = ticket++;
  }));
  for (int i = 0; i < 50; ++i)
    must(dev.launch(opt, [&order, i] { order.push_back(i); }));
  must(dev.record(updated, opt));
  must(dev.wait(h2d, updated));
  must(dev.copyToDevice(h2d, 0, weights.data(), 1024));
  must(dev.copyToHost(h2d, back.data(), 0, 1024));
  must(dev.synchronize());
  EXPECT_EQ(computeAt, 0);
  EXPECT_EQ(updateAt, 1);
  EXPECT_EQ(back, std::vector<float>(256, 2.0f));
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(order[i], i);
  DeviceStats st = dev.stats();
  EXPECT_EQ(st.launches, 52);
  ASSERT_EQ(st.streams.size(), 3u);
  EXPECT_EQ(st.streams[opt].label, "optimizer");
  EXPECT_EQ(st.streams[opt].commands, 51);
}

TEST_P(DeviceTest, ManyStreamsAndEvents) {
  // 64 streams (every fourth a host stream) pass a token around 8 times,
  // each hop ordered by its own event; one more stream waits for all 512
  // events. Each stream also round-trips its own bytes.
  constexpr int kStreams = 64, kRounds = 8, kBytes = 256;
  Device &dev = device(kStreams * kBytes);
  std::vector<Stream> streams;
  for (int i = 0; i < kStreams; ++i)
    streams.push_back(
        i % 4 == 3 ? must(dev.createHostStream("host " + std::to_string(i)))
                   : must(dev.createStream("s" + std::to_string(i))));
  Stream last = must(dev.createStream("fan-in"));
  std::vector<Event> events;
  for (int i = 0; i < kStreams * kRounds; ++i)
    events.push_back(must(dev.createEvent()));
  std::atomic<int> ticket{0};
  std::vector<int> when(kStreams * kRounds, -1);
  std::vector<std::vector<unsigned char>> src(kStreams), dst(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    src[i].assign(kBytes, static_cast<unsigned char>(i * 7 + 1));
    dst[i].assign(kBytes, 0);
    must(dev.copyToDevice(streams[i], i * kBytes, src[i].data(), kBytes));
  }
  for (int r = 0; r < kRounds; ++r)
    for (int i = 0; i < kStreams; ++i) {
      int k = r * kStreams + i;
      if (k > 0)
        must(dev.wait(streams[i], events[k - 1]));
      must(dev.launch(streams[i], [&when, &ticket, k] { when[k] = ticket++; }));
      must(dev.record(events[k], streams[i]));
    }
  for (int i = 0; i < kStreams; ++i)
    must(dev.copyToHost(streams[i], dst[i].data(), i * kBytes, kBytes));
  for (Event e : events)
    must(dev.wait(last, e));
  bool allSeen = false;
  must(dev.launch(last, [&] {
    allSeen =
        std::all_of(when.begin(), when.end(), [](int w) { return w >= 0; });
  }));
  must(dev.synchronize());
  EXPECT_TRUE(allSeen);
  for (int k = 0; k < kStreams * kRounds; ++k)
    ASSERT_EQ(when[k], k) << "hop " << k << " ran out of order";
  for (int i = 0; i < kStreams; ++i)
    EXPECT_EQ(dst[i], src[i]) << "stream " << i;
}

TEST_P(DeviceTest, StressThousandsOfCommands) {
  // A random program of launches, copies, records and waits over 8 streams
  // (two of them host streams) and 16 events, queued while the streams run,
  // with a synchronize now and then. Every wait captures a record queued
  // before it, so there is no cycle and it must finish (the watchdog fails
  // it otherwise). Each launch takes a ticket; afterwards every launch's
  // ticket is above those of the launches it was ordered after (the launch
  // before it on its stream, and the launch before each record it waited
  // for), and every copy round trip returned its bytes.
  constexpr int kStreams = 8, kEvents = 16, kSteps = 20000, kRegion = 64;
  Device &dev = device(kStreams * kRegion);
  std::vector<Stream> streams;
  for (int i = 0; i < kStreams; ++i)
    streams.push_back(
        i % 4 == 1 ? must(dev.createHostStream("host " + std::to_string(i)))
                   : must(dev.createStream("s" + std::to_string(i))));
  std::vector<Event> events;
  for (int i = 0; i < kEvents; ++i)
    events.push_back(must(dev.createEvent()));

  std::mt19937 rng(20261122);
  std::atomic<int64_t> ticket{0};
  std::vector<int64_t> when(kSteps, -1); // sized up front: closures write it
  std::vector<std::vector<int>> deps(kSteps);
  std::vector<int> lastLaunch(kStreams, -1);
  std::vector<std::vector<int>> pending(kStreams);
  std::vector<int> recordedAfter(kEvents, -1); // launch before the record
  std::vector<std::vector<uint32_t>> src(kSteps), dst(kSteps);
  int launches = 0, copies = 0;
  for (int step = 0; step < kSteps; ++step) {
    int s = static_cast<int>(rng() % kStreams);
    int e = static_cast<int>(rng() % kEvents);
    unsigned op = rng() % 10;
    if (op < 4) {
      int k = launches++;
      deps[k] = std::move(pending[s]);
      pending[s].clear();
      if (lastLaunch[s] >= 0)
        deps[k].push_back(lastLaunch[s]);
      lastLaunch[s] = k;
      must(dev.launch(streams[s], [&when, &ticket, k] { when[k] = ticket++; }));
    } else if (op < 6) {
      must(dev.record(events[e], streams[s]));
      recordedAfter[e] = lastLaunch[s];
    } else if (op < 8) {
      must(dev.wait(streams[s], events[e]));
      if (recordedAfter[e] >= 0)
        pending[s].push_back(recordedAfter[e]);
    } else {
      src[step].assign(kRegion / 4, static_cast<uint32_t>(step) * 2654435761u);
      dst[step].assign(kRegion / 4, 0);
      must(
          dev.copyToDevice(streams[s], s * kRegion, src[step].data(), kRegion));
      must(dev.copyToHost(streams[s], dst[step].data(), s * kRegion, kRegion));
      copies += 2;
    }
    if (step % 997 == 996)
      must(dev.synchronize(streams[rng() % kStreams]));
    else if (step % 1499 == 1498)
      must(dev.synchronize(events[rng() % kEvents]));
  }
  must(dev.synchronize());

  int unordered = 0, notRun = 0;
  for (int k = 0; k < launches; ++k) {
    if (when[k] < 0) {
      ++notRun;
      continue;
    }
    for (int d : deps[k])
      if (when[d] >= when[k] && ++unordered <= 5)
        ADD_FAILURE() << "launch " << k << " (ticket " << when[k]
                      << ") ran before launch " << d << " (ticket " << when[d]
                      << ") it was ordered after";
  }
  EXPECT_EQ(notRun, 0);
  EXPECT_EQ(unordered, 0);
  for (int step = 0; step < kSteps; ++step)
    ASSERT_EQ(dst[step], src[step]) << "copy round trip at step " << step;
  DeviceStats st = dev.stats();
  EXPECT_EQ(st.launches, launches);
  EXPECT_EQ(st.copies, copies);
  int64_t commands = 0;
  for (const StreamStats &ss : st.streams)
    commands += ss.commands;
  EXPECT_EQ(commands, launches + copies);
  EXPECT_GT(launches, 1000);
}

//===----------------------------------------------------------------------===//
// Copies
//===----------------------------------------------------------------------===//

TEST_P(DeviceTest, CopiesRoundTripAnyOffsetAndSize) {
  constexpr int64_t kCap = 1 << 20;
  Device &dev = device(kCap);
  Stream up = must(dev.createStream("h2d"));
  Stream down = must(dev.createStream("d2h"));
  Event e = must(dev.createEvent());
  const std::pair<int64_t, int64_t> cases[] = {
      {0, 1},           {1, 3},        {7, 4096}, {4095, 12345},
      {100000, 196608}, {kCap - 5, 5}, {0, kCap}, {kCap, 0}};
  int n = 0;
  for (auto [off, bytes] : cases) {
    std::vector<unsigned char> src(static_cast<size_t>(bytes)), dst(src.size());
    for (size_t i = 0; i < src.size(); ++i)
      src[i] = static_cast<unsigned char>(i * 131 + n * 17 + 3);
    must(dev.copyToDevice(up, off, src.data(), bytes));
    must(dev.record(e, up));
    must(dev.wait(down, e));
    must(dev.copyToHost(down, dst.data(), off, bytes));
    must(dev.synchronize(down));
    EXPECT_EQ(dst, src) << bytes << " bytes at offset " << off;
    ++n;
  }
}

TEST_P(DeviceTest, F32ToBF16MatchesTheReferenceBitForBit) {
  // Every upper half with the lower halves around the rounding point, and
  // random bit patterns.
  std::vector<uint32_t> bits;
  for (uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      bits.push_back(hi << 16 | lo);
  std::mt19937 rng(7);
  for (int i = 0; i < 65536; ++i)
    bits.push_back(static_cast<uint32_t>(rng()));
  const int64_t n = static_cast<int64_t>(bits.size());
  const int64_t cap = 2 * n + 64, at = 32;
  Device &dev = device(cap);
  Stream s = must(dev.createStream("copy"));
  std::vector<unsigned char> guard(static_cast<size_t>(cap), 0xAB);
  std::vector<unsigned char> back(static_cast<size_t>(cap));
  must(dev.copyToDevice(s, 0, guard.data(), cap));
  must(dev.synchronize(s));
  dev.resetStats();
  must(dev.copyToDevice(s, at, bits.data(), 4 * n, Convert::F32ToBF16,
                        "convert"));
  must(dev.copyToHost(s, back.data(), 0, cap));
  must(dev.synchronize(s));
  EXPECT_EQ(dev.stats().h2dBytes, 2 * n);

  // nothing before or after the 2n bytes written
  for (int64_t i = 0; i < at; ++i)
    ASSERT_EQ(back[i], 0xAB) << i;
  for (int64_t i = at + 2 * n; i < cap; ++i)
    ASSERT_EQ(back[i], 0xAB) << i;
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, back.data() + at + 2 * i, 2);
    uint32_t u = bits[i];
    bool ok;
    if (isNaNBits(u)) // a quiet NaN with the sign; the payload is free
      ok = (h & 0x7fc0u) == 0x7fc0u && (h & 0x8000u) == ((u >> 16) & 0x8000u);
    else
      ok = h == bf16Reference(u);
    if (!ok && ++wrong <= 10)
      ADD_FAILURE() << std::hex << "fp32 0x" << u << " gave bf16 0x" << h
                    << ", want 0x" << bf16Reference(u);
  }
  EXPECT_EQ(wrong, 0);
}

TEST_P(DeviceTest, F32ToBF16WritesHalfTheBytes) {
  Device &dev = device(64);
  Stream s = must(dev.createStream("copy"));
  std::vector<unsigned char> fill(64, 0xAB), back(64);
  must(dev.copyToDevice(s, 0, fill.data(), 64));
  must(dev.synchronize(s));
  dev.resetStats();
  float src[4] = {1.0f, -2.5f, std::nanf(""), 3.0f};
  must(dev.copyToDevice(s, 8, src, sizeof src, Convert::F32ToBF16));
  must(dev.copyToHost(s, back.data(), 0, 64));
  must(dev.synchronize(s));
  uint16_t h[4];
  std::memcpy(h, back.data() + 8, 8);
  EXPECT_EQ(h[0], 0x3f80);
  EXPECT_EQ(h[1], 0xc020);
  EXPECT_EQ(h[2] & 0x7fc0, 0x7fc0);
  EXPECT_EQ(h[3], 0x4040);
  EXPECT_EQ(back[16], 0xAB);
  EXPECT_EQ(back[7], 0xAB);
  EXPECT_EQ(dev.stats().h2dBytes, 8);
  EXPECT_EQ(bf16Reference(f32Bits(1.0f)), 0x3f80); // the reference agrees
}

TEST_P(DeviceTest, CopyToHostF32ToBF16MatchesTheReference) {
  // The gradient copy of --grad-dtype bf16: fp32 in the arena, bf16 in host
  // memory, rounded as copyToDevice rounds (every upper half with the lower
  // halves around the rounding point, and random bit patterns).
  std::vector<uint32_t> bits;
  for (uint32_t hi = 0; hi < 0x10000u; hi += 3)
    for (uint32_t lo : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      bits.push_back(hi << 16 | lo);
  std::mt19937 rng(11);
  for (int i = 0; i < 4096; ++i)
    bits.push_back(static_cast<uint32_t>(rng()));
  const int64_t n = static_cast<int64_t>(bits.size());
  Device &dev = device(4 * n + 64);
  Stream s = must(dev.createStream("copy"));
  must(dev.copyToDevice(s, 64, bits.data(), 4 * n));
  must(dev.synchronize(s));
  dev.resetStats();
  const size_t guard = 16;
  std::vector<uint16_t> back(static_cast<size_t>(n) + 2 * guard, 0xABCD);
  must(dev.copyToHost(s, back.data() + guard, 64, 4 * n, "grads",
                      Convert::F32ToBF16));
  must(dev.synchronize(s));
  EXPECT_EQ(dev.stats().d2hBytes, 4 * n); // the arena's bytes
  for (size_t i = 0; i < guard; ++i) {
    ASSERT_EQ(back[i], 0xABCD) << i;
    ASSERT_EQ(back[guard + static_cast<size_t>(n) + i], 0xABCD) << i;
  }
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h = back[guard + static_cast<size_t>(i)];
    uint32_t u = bits[static_cast<size_t>(i)];
    bool ok = isNaNBits(u) ? (h & 0x7fc0u) == 0x7fc0u &&
                                 (h & 0x8000u) == ((u >> 16) & 0x8000u)
                           : h == bf16Reference(u);
    if (!ok && ++wrong <= 10)
      ADD_FAILURE() << std::hex << "fp32 0x" << u << " gave bf16 0x" << h
                    << ", want 0x" << bf16Reference(u);
  }
  EXPECT_EQ(wrong, 0);
  // Not a whole number of fp32 values, or outside the arena: errors.
  EXPECT_NE(deviceErrorOf([&] {
              return dev.copyToHost(s, back.data(), 0, 6, "",
                                    Convert::F32ToBF16);
            }),
            "");
  EXPECT_NE(deviceErrorOf([&] {
              return dev.copyToHost(s, back.data(), 64, 4 * n + 4, "",
                                    Convert::F32ToBF16);
            }),
            "");
}

//===----------------------------------------------------------------------===//
// Errors in launched work
//===----------------------------------------------------------------------===//

TEST_P(DeviceTest, ErrorInLaunchSurfacesAtSynchronize) {
  Device &dev = device(64);
  Stream a = must(dev.createStream("compute"));
  Stream b = must(dev.createStream("copy"));
  Event e = must(dev.createEvent());
  must(dev.launch(
      a, [] { throw std::runtime_error("kernel exploded"); }, "layer 3 fwd"));
  must(dev.launch(a, [] { throw std::runtime_error("second error"); }));
  must(dev.record(e, a));
  must(dev.wait(b, e)); // must not block forever
  must(dev.launch(b, [] {}));
  std::string m = deviceErrorOf([&] { return dev.synchronize(); });
  EXPECT_NE(m.find("kernel exploded"), npos) << m;
  EXPECT_NE(m.find("layer 3 fwd"), npos) << m;
  EXPECT_NE(m.find("compute"), npos) << m;
  EXPECT_EQ(m.find("second error"), npos) << m;
  // sticky: every later synchronize reports it
  EXPECT_NE(deviceErrorOf([&] { return dev.synchronize(b); }), "");
  EXPECT_NE(deviceErrorOf([&] { return dev.synchronize(a); }), "");
  EXPECT_NE(deviceErrorOf([&] { return dev.synchronize(e); }), "");
  EXPECT_NE(deviceErrorOf([&] { return dev.synchronize(); }), "");
  // an error raised by a command keeps its message
  Device &dev2 = device(64);
  Stream c = must(dev2.createStream("c"));
  must(dev2.launch(c, [&dev2] { must(dev2.at(60, 8)); }));
  m = deviceErrorOf([&] { return dev2.synchronize(c); });
  EXPECT_NE(m.find("capacity 64"), npos) << m;
  // so does one thrown on a host stream; any exception type is reported
  Device &dev3 = device(64);
  Stream h = must(dev3.createHostStream("optimizer"));
  must(dev3.launch(h, [] { throw std::runtime_error("adamw diverged"); }));
  m = deviceErrorOf([&] { return dev3.synchronize(h); });
  EXPECT_NE(m.find("adamw diverged"), npos) << m;
  Device &dev4 = device(64);
  Stream d = must(dev4.createStream("d"));
  must(dev4.launch(d, [] { throw 42; }));
  EXPECT_NE(deviceErrorOf([&] { return dev4.synchronize(); }), "");
}

TEST_P(DeviceTest, SynchronizeFromACommandIsAnError) {
  Device &dev = device(64);
  Stream s = must(dev.createStream("s"));
  must(dev.launch(s, [&dev] { must(dev.synchronize()); }));
  std::string m = deviceErrorOf([&] { return dev.synchronize(); });
  EXPECT_NE(m.find("would wait for itself"), npos) << m;
  Device &dev2 = device(64);
  Stream h = must(dev2.createHostStream("host"));
  Stream other = must(dev2.createStream("other"));
  must(dev2.launch(h, [&dev2, other] { must(dev2.synchronize(other)); }));
  m = deviceErrorOf([&] { return dev2.synchronize(); });
  EXPECT_NE(m.find("would wait for itself"), npos) << m;
}

//===----------------------------------------------------------------------===//
// Statistics
//===----------------------------------------------------------------------===//

TEST_P(DeviceTest, StatsCountBytes) {
  Device &dev = device(4096);
  Stream s = must(dev.createStream("copy"));
  Stream c = must(dev.createStream("compute"));
  Event e = must(dev.createEvent());
  std::vector<float> host(256, 1.0f);
  must(dev.copyToDevice(s, 0, host.data(), 1024));
  must(dev.copyToDevice(s, 1024, host.data(), 1024, Convert::F32ToBF16));
  must(dev.record(e, s)); // records and waits are not commands
  must(dev.copyToHost(s, host.data(), 0, 512));
  must(dev.wait(c, e));
  must(dev.launch(c, [] {}));
  must(dev.synchronize());
  DeviceStats st = dev.stats();
  EXPECT_EQ(st.h2dBytes, 1024 + 512);
  EXPECT_EQ(st.d2hBytes, 512);
  EXPECT_EQ(st.copies, 3);
  EXPECT_EQ(st.launches, 1);
  ASSERT_EQ(st.streams.size(), 2u);
  EXPECT_EQ(st.streams[s].label, "copy");
  EXPECT_EQ(st.streams[s].commands, 3);
  EXPECT_EQ(st.streams[c].label, "compute");
  EXPECT_EQ(st.streams[c].commands, 1);
  EXPECT_GE(st.streams[s].busySeconds, 0.0);
  EXPECT_GE(st.overlap, 0.0);
  EXPECT_LE(st.overlap, 1.0);
  dev.resetStats();
  st = dev.stats();
  EXPECT_EQ(st.h2dBytes, 0);
  EXPECT_EQ(st.d2hBytes, 0);
  EXPECT_EQ(st.copies, 0);
  EXPECT_EQ(st.streams[s].commands, 0);
  EXPECT_EQ(st.overlap, 0.0);
}

TEST_P(DeviceTest, ResetStatsStartsANewPeriod) {
  Device &dev = device(4096);
  Stream s = must(dev.createStream("only"));
  std::vector<char> host(1024, 1);
  must(dev.launch(s, [] { std::this_thread::sleep_for(300ms); }));
  must(dev.copyToDevice(s, 0, host.data(), 1024));
  must(dev.synchronize());
  DeviceStats before = dev.stats();
  EXPECT_GT(before.elapsedSeconds, 0.29);
  dev.resetStats();
  DeviceStats st = dev.stats();
  EXPECT_EQ(st.launches, 0);
  EXPECT_EQ(st.computeSeconds, 0.0);
  EXPECT_EQ(st.copySeconds, 0.0);
  EXPECT_LT(st.elapsedSeconds, before.elapsedSeconds);
  ASSERT_EQ(st.streams.size(), 1u); // the streams stay
  EXPECT_EQ(st.streams[s].label, "only");
  EXPECT_EQ(st.streams[s].busySeconds, 0.0);
  must(dev.copyToHost(s, host.data(), 0, 100));
  must(dev.launch(s, [] {}));
  must(dev.synchronize());
  st = dev.stats();
  EXPECT_EQ(st.launches, 1);
  EXPECT_EQ(st.copies, 1);
  EXPECT_EQ(st.h2dBytes, 0);
  EXPECT_EQ(st.d2hBytes, 100);
  EXPECT_EQ(st.streams[s].commands, 2);
  EXPECT_LT(st.streams[s].busySeconds, 0.25); // not the 300 ms launch
}

TEST_P(DeviceTest, BusyTimeExcludesWaits) {
  Device &dev = device(64);
  Stream a = must(dev.createStream("a"));
  Stream b = must(dev.createStream("b"));
  Event e = must(dev.createEvent());
  must(dev.launch(a, [] { std::this_thread::sleep_for(100ms); }));
  must(dev.record(e, a));
  must(dev.wait(b, e)); // b stalls ~100 ms here: not busy time
  must(dev.launch(b, [] {}));
  must(dev.synchronize());
  DeviceStats st = dev.stats();
  EXPECT_GT(st.streams[a].busySeconds, 0.09);
  EXPECT_LT(st.streams[b].busySeconds, 0.05);
  EXPECT_EQ(st.streams[b].commands, 1);
  EXPECT_GT(st.computeSeconds, 0.09);
  EXPECT_GT(st.elapsedSeconds, 0.09);
}

// 64 MiB copies: long enough to measure, short next to the sleeps.
constexpr int64_t kBig = 64 << 20;

TEST_P(DeviceTest, OverlapIsHighWhenACopyRunsUnderALaunch) {
  Device &dev = device(kBig);
  Stream copy = must(dev.createStream("copy"));
  Stream compute = must(dev.createStream("compute"));
  Event copied = must(dev.createEvent());
  std::vector<char> host(kBig, 1);
  // The launch runs from before the copies are queued until after they are
  // done, however slowly a loaded machine copies.
  Gate gate;
  std::atomic<bool> started{false};
  must(dev.launch(compute, [&started, hold = gate.waiter()] {
    started = true;
    hold();
    std::this_thread::sleep_for(400ms);
  }));
  while (!started)
    std::this_thread::sleep_for(1ms);
  must(dev.copyToDevice(copy, 0, host.data(), kBig));
  must(dev.copyToDevice(copy, 0, host.data(), kBig));
  must(dev.record(copied, copy));
  must(dev.synchronize(copied));
  gate.open();
  must(dev.synchronize());
  DeviceStats st = dev.stats();
  EXPECT_EQ(st.copies, 2);
  EXPECT_GT(st.copySeconds, 0.0);
  EXPECT_GT(st.overlap, 0.5) << "copy " << st.copySeconds << " s";
  EXPECT_LE(st.overlap, 1.0);
  EXPECT_GT(st.computeSeconds, 0.4);
}

TEST_P(DeviceTest, HostStreamWorkDoesNotCountAsOverlap) {
  Device &dev = device(kBig);
  Stream copy = must(dev.createStream("copy"));
  Stream host = must(dev.createHostStream("optimizer"));
  std::vector<char> bytes(kBig, 1);
  must(dev.launch(host, [] { std::this_thread::sleep_for(300ms); }));
  std::this_thread::sleep_for(10ms);
  must(dev.copyToDevice(copy, 0, bytes.data(), kBig));
  must(dev.synchronize());
  DeviceStats st = dev.stats();
  EXPECT_EQ(st.copies, 1);
  EXPECT_LT(st.overlap, 0.1) << "copy " << st.copySeconds << " s";
}

TEST_P(DeviceTest, OverlapIsZeroWhenSerializedOnOneStream) {
  Device &dev = device(kBig);
  Stream s = must(dev.createStream("only"));
  std::vector<char> host(kBig, 1);
  must(dev.launch(s, [] { std::this_thread::sleep_for(50ms); }));
  must(dev.copyToDevice(s, 0, host.data(), kBig));
  must(dev.launch(s, [] { std::this_thread::sleep_for(50ms); }));
  must(dev.synchronize());
  DeviceStats st = dev.stats();
  EXPECT_EQ(st.copies, 1);
  EXPECT_LT(st.overlap, 0.1);
  ASSERT_EQ(st.streams.size(), 1u);
  EXPECT_GT(st.streams[0].busySeconds, 0.09);
  EXPECT_GT(st.elapsedSeconds, 0.09);
}

//===----------------------------------------------------------------------===//
// Tracing
//===----------------------------------------------------------------------===//

TEST_P(DeviceTest, TraceHasOneEventPerCommand) {
  Trace trace;
  Device &dev = device(4096);
  Stream a = must(dev.createStream("h2d"));
  dev.setTrace(&trace);
  Stream b = must(dev.createStream("compute"));
  Stream c =
      must(dev.createStream("compute")); // duplicate label: its own track
  Event e = must(dev.createEvent());
  const std::string eid = std::to_string(e);
  std::vector<char> host(1024);
  must(dev.copyToDevice(a, 0, host.data(), 1024, Convert::None,
                        "weights layer 0"));
  must(dev.copyToDevice(a, 1024, host.data(), 512));
  must(dev.record(e, a));
  must(dev.wait(b, e));
  must(dev.launch(
      b, [] {}, "layer 0 fwd"));
  must(dev.launch(c, [] {}));
  must(dev.copyToHost(c, host.data(), 0, 64));
  must(dev.synchronize());
  auto t0 = Trace::Clock::now();
  trace.span("optimizer", "adamw layer 0", t0, t0 + 1ms);
  { Trace::Scope scope(&trace, trace.track("optimizer"), "adamw layer 1"); }
  // no trace, no spans
  dev.setTrace(nullptr);
  must(dev.launch(
      b, [] {}, "untraced"));
  must(dev.synchronize());

  std::string path = tempPath("trace.json");
  Status written = trace.write(path);
  ASSERT_TRUE(written.ok()) << written.message();
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  std::map<int, std::string> threadNames;
  std::map<std::string, std::vector<std::string>> byTrack;
  std::map<std::string, std::string> category;
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
    category[ev.at("name")] = ev.at("cat");
  }
  ::unlink(path.c_str());
  EXPECT_EQ(xEvents, 9);
  EXPECT_EQ(byTrack["h2d"],
            (std::vector<std::string>{"weights layer 0", "copy h2d 512 bytes",
                                      "record event " + eid}));
  EXPECT_EQ(byTrack["compute"],
            (std::vector<std::string>{"wait event " + eid, "layer 0 fwd"}));
  EXPECT_EQ(byTrack["compute #" + std::to_string(c)],
            (std::vector<std::string>{"launch", "copy d2h 64 bytes"}));
  EXPECT_EQ(byTrack["optimizer"],
            (std::vector<std::string>{"adamw layer 0", "adamw layer 1"}));
  EXPECT_EQ(category["weights layer 0"], "copy");
  EXPECT_EQ(category["copy d2h 64 bytes"], "copy");
  EXPECT_EQ(category["layer 0 fwd"], "compute");
  EXPECT_EQ(category["wait event " + eid], "sync");
  EXPECT_EQ(category["record event " + eid], "sync");
}

//===----------------------------------------------------------------------===//
// Destruction
//===----------------------------------------------------------------------===//

TEST_P(DeviceTest, DestructionWithQueuedWorkReturns) {
  // The device may run or discard what is queued (CpuDevice discards it),
  // but it must not block on the waits, and nothing runs once it is gone.
  auto ran = std::make_shared<std::atomic<int>>(0);
  auto begin = std::chrono::steady_clock::now();
  {
    std::unique_ptr<Device> dev = newDevice(64);
    Stream a = must(dev->createStream("a"));
    Stream b = must(dev->createStream("b"));
    Event never = must(dev->createEvent());
    Event later = must(dev->createEvent());
    for (int i = 0; i < 20; ++i)
      must(dev->launch(a, [ran] {
        std::this_thread::sleep_for(10ms);
        ++*ran;
      }));
    must(dev->record(later, a));
    must(dev->wait(b, later)); // blocks b behind ~200 ms of work on a
    must(dev->wait(b, never));
    must(dev->launch(b, [ran] { ++*ran; }));
    std::this_thread::sleep_for(5ms);
  }
  double s = secondsSince(begin);
  int after = ran->load();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(ran->load(), after) << "a command ran after the destructor";
  EXPECT_LT(s, 5.0);
}

} // namespace
} // namespace mtc::device::cts
