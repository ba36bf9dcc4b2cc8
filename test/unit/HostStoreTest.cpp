//===- HostStoreTest.cpp - Unit tests of runtime/device/HostStore ---------===//
//
// Part of mtc. Page-aligned zero-filled allocations and their accounting,
// errors naming what and how much, best-effort pinning, file-backed buffers.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/HostStore.h"
#include "runtime/device/Device.h"
#include "test/unit/Must.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <unistd.h>

using namespace mtc::device;
using mtc::Status;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "mtc-hoststore-" + std::to_string(::getpid()) +
         "-" + name;
}

TEST(HostStore, AllocateIsAlignedAndZeroed) {
  HostStore store;
  HostBuffer a = must(store.allocate(10000, "adamw m"));
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
    HostBuffer b = must(store.allocate(4096, "v"));
    EXPECT_EQ(store.hostBytes(), 14096);
    HostBuffer moved = std::move(b);
    EXPECT_EQ(b.data(), nullptr);
    EXPECT_EQ(store.hostBytes(), 14096);
  }
  EXPECT_EQ(store.hostBytes(), 10000);
  HostBuffer empty = must(store.allocate(0, "nothing"));
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0);
  a.release();
  EXPECT_EQ(store.hostBytes(), 0);
}

TEST(HostStore, ErrorsNameWhatAndSize) {
  HostStore store;
  std::string m = mtc::errorOf([&] { return store.allocate(-5, "grads"); });
  EXPECT_NE(m.find("grads"), std::string::npos) << m;
  // far more than any address space allows
  m = mtc::errorOf([&] { return store.allocate(int64_t(1) << 62, "master"); });
  EXPECT_NE(m.find("master"), std::string::npos) << m;
  EXPECT_NE(m.find("4611686018427387904 bytes"), std::string::npos) << m;
  m = mtc::errorOf([&] {
    return store.allocateFileBacked("/nonexistent-dir/state.bin", 4096);
  });
  EXPECT_NE(m.find("/nonexistent-dir/state.bin"), std::string::npos) << m;
}

TEST(HostStore, PinIsBestEffort) {
  HostStore store;
  HostBuffer a = must(store.allocate(4096, "small"));
  Status st = store.pin(a);
  EXPECT_EQ(a.pinned(), st.ok());
  EXPECT_EQ(store.pinnedBytes(), st.ok() ? 4096 : 0);
  if (!st.ok()) {
    EXPECT_NE(st.message().find("small"), std::string::npos) << st.message();
  }
  a.release();
  EXPECT_EQ(store.pinnedBytes(), 0);
}

TEST(HostStore, FileBackedRoundTrip) {
  HostStore store;
  std::string path = tempPath("state.bin");
  ::unlink(path.c_str());
  {
    HostBuffer f =
        must(store.allocateFileBacked(path, 3 * 4096 + 100, "master"));
    ASSERT_NE(f.data(), nullptr);
    EXPECT_TRUE(f.fileBacked());
    EXPECT_EQ(store.fileBytes(), 3 * 4096 + 100);
    EXPECT_EQ(store.hostBytes(), 0);
    auto *p = f.as<unsigned char>();
    for (int64_t i = 0; i < f.size(); ++i)
      ASSERT_EQ(p[i], 0);
    for (int64_t i = 0; i < f.size(); ++i)
      p[i] = static_cast<unsigned char>(i * 31);
    Status st = f.sync();
    EXPECT_TRUE(st.ok()) << st.message();
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
    HostBuffer f = must(store.allocateFileBacked(path, 4 * 4096));
    auto *p = f.as<unsigned char>();
    EXPECT_EQ(p[1000], static_cast<unsigned char>(1000 * 31));
    EXPECT_EQ(p[4 * 4096 - 1], 0);
  }
  ::unlink(path.c_str());
}

} // namespace
