//===- ParamStoreTest.cpp - Host-resident parameter state -------*- C++ -*-===//
//
// Part of mtc. runtime/exec/ParamStore: names and order of the slots, the
// initial values (checked against a checksum taken before the state moved
// into HostStore memory), and the layout of the four arrays.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/ParamStore.h"
#include "test/unit/Must.h"

#include "runtime/device/Device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

using namespace mtc;

namespace {

/// Every initializer, odd sizes (so that tensors do not end on a 64-byte
/// boundary), a tensor over one 64K-element task of the initializer, a model
/// with two layer kinds and a layer with experts.
bundle::Bundle mixedBundle() {
  bundle::Bundle b;
  b.model = "Mixed";
  b.config = {{"dim", 7.0}};
  b.params = {
      bundle::Param{"emb", {301, 257}, DType::F32, "normal", {0.02}},
      bundle::Param{"norm", {7}, DType::F32, "ones", {}},
      bundle::Param{"bias", {3}, DType::F32, "zeros", {}},
  };
  bundle::Layer a;
  a.name = "Attn";
  a.count = 3;
  a.params = {
      bundle::Param{"wq", {7, 9}, DType::F32, "normal", {0.1}},
      bundle::Param{"wo", {9, 7}, DType::F32, "scaled_normal", {0.02}},
      bundle::Param{"gain", {5}, DType::F32, "uniform", {-0.5, 0.25}},
  };
  bundle::Layer m;
  m.name = "Moe";
  m.count = 2;
  m.params = {bundle::Param{"router", {7, 4}, DType::F32, "normal", {0.3}}};
  bundle::Expert x;
  x.name = "Expert";
  x.count = 4;
  x.params = {
      bundle::Param{"w1", {7, 11}, DType::F32, "normal", {0.05}},
      bundle::Param{"b1", {11}, DType::F32, "zeros", {}},
  };
  m.experts.push_back(x);
  b.layers = {a, m};
  return b;
}

/// FNV-1a over the bytes of every slot's values, in slot order, with each
/// slot's name and size mixed in.
uint64_t valueChecksum(const exec::ParamStore &store) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void *p, size_t n) {
    const unsigned char *c = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; ++i)
      h = (h ^ c[i]) * 1099511628211ull;
  };
  for (const exec::ParamSlot &s : store.slots()) {
    mix(s.name.data(), s.name.size());
    uint64_t n = s.value.size();
    mix(&n, sizeof n);
    mix(s.value.data(), s.value.size() * sizeof(float));
  }
  return h;
}

/// The checksum of mixedBundle() initialised with seed 1234, taken from the
/// ParamStore of commit d1ae305 (four std::vector<float> per slot), before the
/// state moved into HostStore memory: the same valueChecksum() printed by a
/// test run against that code. Initial values must never change silently (a
/// checkpoint-free run would no longer reproduce).
constexpr uint64_t kMixedChecksum = 0x775d0de29f41975eull;
constexpr int64_t kMixedParams = 78520;

size_t padded(int64_t n) {
  size_t a = exec::ParamStore::kAlignFloats;
  return (static_cast<size_t>(n) + a - 1) / a * a;
}

bool allZero(const float *p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0.0f || std::signbit(p[i]))
      return false;
  return true;
}

const exec::ParamStore::Kind kKinds[] = {
    exec::ParamStore::Kind::Value, exec::ParamStore::Kind::Grad,
    exec::ParamStore::Kind::M, exec::ParamStore::Kind::V};

/// Checks names, order, sizes, offsets and alignment of every slot.
void checkLayout(const bundle::Bundle &b, const exec::ParamStore &store) {
  std::vector<std::pair<std::string, int64_t>> want;
  for (const bundle::Param &p : b.params)
    want.push_back({p.name, p.numel()});
  for (const bundle::Layer &l : b.layers)
    for (int64_t i = 0; i < l.count; ++i) {
      std::string prefix = l.name + "." + std::to_string(i) + ".";
      for (const bundle::Param &p : l.params)
        want.push_back({prefix + p.name, p.numel()});
      for (const bundle::Expert &x : l.experts)
        for (int64_t e = 0; e < x.count; ++e)
          for (const bundle::Param &p : x.params)
            want.push_back(
                {prefix + x.name + "." + std::to_string(e) + "." + p.name,
                 p.numel()});
    }
  ASSERT_EQ(store.slots().size(), want.size());
  size_t offset = 0;
  int64_t total = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    const exec::ParamSlot &s = store.slots()[k];
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.name, want[k].first);
    EXPECT_EQ(s.offset, offset);
    EXPECT_EQ(s.offset % exec::ParamStore::kAlignFloats, 0u);
    const exec::HostArray *arrays[] = {&s.value, &s.grad, &s.m, &s.v};
    for (int a = 0; a < 4; ++a) {
      EXPECT_EQ(arrays[a]->size(), static_cast<size_t>(want[k].second));
      EXPECT_EQ(reinterpret_cast<uintptr_t>(arrays[a]->data()) % 64, 0u);
      EXPECT_EQ(arrays[a]->data(), store.block(kKinds[a]) + s.offset);
    }
    offset += padded(want[k].second);
    total += want[k].second;
  }
  EXPECT_EQ(store.blockElements(), offset);
  EXPECT_EQ(store.totalParams(), total);
  for (exec::ParamStore::Kind kind : kKinds)
    EXPECT_EQ(reinterpret_cast<uintptr_t>(store.block(kind)) % 4096, 0u);
}

} // namespace

static_assert(!std::is_copy_constructible_v<exec::HostArray>,
              "a copy of a view would alias the store's memory");
static_assert(!std::is_copy_constructible_v<exec::ParamStore>,
              "the store owns its memory");

TEST(ParamStore, InitialValuesUnchanged) {
  bundle::Bundle b = mixedBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  store.initialize(1234);
  EXPECT_EQ(store.totalParams(), kMixedParams);
  EXPECT_EQ(valueChecksum(store), kMixedChecksum);
  // A different seed gives different values, the same seed the same.
  std::unique_ptr<exec::ParamStore> otherOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &other = *otherOwned;
  other.initialize(1235);
  EXPECT_NE(valueChecksum(other), kMixedChecksum);
  other.initialize(1234);
  EXPECT_EQ(valueChecksum(other), kMixedChecksum);
}

TEST(ParamStore, LayoutNamesOffsetsAlignment) {
  bundle::Bundle b = mixedBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  checkLayout(b, store);
  // Model-level, layer and expert look-ups find the slots by name.
  EXPECT_EQ(store.model("emb"), &store.slots()[0]);
  ASSERT_NE(store.layer("Attn", 2, "gain"), nullptr);
  EXPECT_EQ(store.layer("Attn", 2, "gain")->name, "Attn.2.gain");
  ASSERT_NE(store.expert("Moe", 1, "Expert", 3, "b1"), nullptr);
  EXPECT_EQ(store.expert("Moe", 1, "Expert", 3, "b1")->name,
            "Moe.1.Expert.3.b1");
  EXPECT_EQ(store.find("Attn.3.gain"), nullptr);
  EXPECT_EQ(store.slots().back().name, "Moe.1.Expert.3.b1");
}

TEST(ParamStore, HostBytesIsTheSumOfTheBlocks) {
  bundle::Bundle b = mixedBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  size_t elements = 0;
  for (const exec::ParamSlot &s : store.slots())
    elements += padded(static_cast<int64_t>(s.value.size()));
  EXPECT_EQ(store.hostBytes(), static_cast<int64_t>(4 * 4 * elements));
  EXPECT_FALSE(store.fileBacked());
  // Padding costs at most 60 bytes per tensor and kind.
  EXPECT_LE(store.hostBytes(),
            kMixedParams * exec::ParamStore::kBytesPerParam +
                static_cast<int64_t>(store.slots().size()) * 4 * 60);
}

TEST(ParamStore, ZeroFilledAndPaddingStaysZero) {
  bundle::Bundle b = mixedBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  for (exec::ParamStore::Kind kind : kKinds)
    EXPECT_TRUE(allZero(store.block(kind), store.blockElements()));
  store.initialize(7);
  for (exec::ParamStore::Kind kind :
       {exec::ParamStore::Kind::Grad, exec::ParamStore::Kind::M,
        exec::ParamStore::Kind::V})
    EXPECT_TRUE(allZero(store.block(kind), store.blockElements()));
  const float *values = store.block(exec::ParamStore::Kind::Value);
  for (size_t k = 0; k < store.slots().size(); ++k) {
    const exec::ParamSlot &s = store.slots()[k];
    size_t end = k + 1 < store.slots().size() ? store.slots()[k + 1].offset
                                              : store.blockElements();
    EXPECT_TRUE(allZero(values + s.offset + s.value.size(),
                        end - s.offset - s.value.size()))
        << s.name;
  }
  // zeroGrads clears every gradient; the arrays are distinct memory.
  for (exec::ParamSlot &s : store.slots())
    for (float &g : s.grad)
      g = 2.5f;
  EXPECT_TRUE(
      allZero(store.block(exec::ParamStore::Kind::M), store.blockElements()));
  EXPECT_EQ(store.slots()[0].grad[0], 2.5f);
  store.zeroGrads();
  EXPECT_TRUE(allZero(store.block(exec::ParamStore::Kind::Grad),
                      store.blockElements()));
}

TEST(ParamStore, HostArrayView) {
  bundle::Bundle b = mixedBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  exec::ParamSlot &s = *store.model("norm");
  EXPECT_FALSE(s.value.empty());
  float x = 1;
  for (float &f : s.value)
    f = x++;
  EXPECT_EQ(s.value[6], 7.0f);
  EXPECT_EQ(s.value.end() - s.value.begin(), 7);
  std::vector<float> copy = s.value.toVector();
  ASSERT_EQ(copy.size(), 7u);
  copy[0] = 100;
  EXPECT_EQ(s.value[0], 1.0f);
  const exec::ParamSlot &c = s;
  static_assert(std::is_same_v<decltype(c.value.data()), const float *>);
  static_assert(std::is_same_v<decltype(s.value.data()), float *>);
  EXPECT_TRUE(exec::HostArray().empty());
}

TEST(ParamStore, NoParameters) {
  bundle::Bundle b;
  b.model = "Empty";
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  EXPECT_TRUE(store.slots().empty());
  EXPECT_EQ(store.hostBytes(), 0);
  EXPECT_EQ(store.blockElements(), 0u);
  EXPECT_EQ(store.block(exec::ParamStore::Kind::Grad), nullptr);
  store.zeroGrads();
  store.initialize(1);
  std::string reason;
  EXPECT_EQ(store.pin(&reason), 0);
  EXPECT_EQ(reason, "");
}

TEST(ParamStore, PinIsBestEffort) {
  bundle::Bundle b = mixedBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  store.initialize(1234);
  std::string reason;
  int64_t pinned = store.pin(&reason);
  EXPECT_EQ(pinned, store.pinnedBytes());
  if (pinned == store.hostBytes())
    EXPECT_EQ(reason, "");
  else
    EXPECT_NE(reason, "") << "pinned " << pinned << " of " << store.hostBytes();
  // Pinning twice is harmless and changes nothing.
  EXPECT_EQ(store.pin(), pinned);
  EXPECT_EQ(valueChecksum(store), kMixedChecksum);
}

class ParamStoreFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "mtc-paramstore-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(::mkdtemp(buf.data()), nullptr);
    root = buf.data();
  }
  void TearDown() override { std::filesystem::remove_all(root); }
  std::string root;
};

TEST_F(ParamStoreFileTest, FileBackedStateIsScratch) {
  bundle::Bundle b = mixedBundle();
  std::string path = root + "/state";
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b, exec::HostStateOptions{path}));
  exec::ParamStore &store = *storeOwned;
  EXPECT_TRUE(store.fileBacked());
  // The file is unlinked as soon as it is mapped.
  EXPECT_FALSE(std::filesystem::exists(path));
  checkLayout(b, store);
  // Four page-aligned blocks of at least blockElements() floats each.
  EXPECT_GE(store.hostBytes(),
            static_cast<int64_t>(4 * 4 * store.blockElements()));
  EXPECT_EQ(store.hostBytes() % 4096, 0);
  for (exec::ParamStore::Kind kind : kKinds)
    EXPECT_TRUE(allZero(store.block(kind), store.blockElements()));
  store.initialize(1234);
  EXPECT_EQ(valueChecksum(store), kMixedChecksum);
  std::string reason;
  EXPECT_EQ(store.pin(&reason), 0);
  EXPECT_NE(reason.find("mapped from the file"), std::string::npos) << reason;
  // Same path again: it was removed, so a second store can use it.
  std::unique_ptr<exec::ParamStore> againOwned =
      must(exec::ParamStore::create(b, exec::HostStateOptions{path}));
  exec::ParamStore &again = *againOwned;
  again.initialize(1234);
  EXPECT_EQ(valueChecksum(again), kMixedChecksum);
}

TEST_F(ParamStoreFileTest, ExistingFileIsRefused) {
  bundle::Bundle b = mixedBundle();
  std::string path = root + "/taken";
  std::ofstream(path) << "precious";
  std::string m = mtc::errorOf([&] {
    return exec::ParamStore::create(b, exec::HostStateOptions{path});
  });
  EXPECT_NE(m.find("host state file '" + path + "' exists"), std::string::npos)
      << m;
  std::ifstream in(path);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "precious");
}

TEST_F(ParamStoreFileTest, MissingDirectoryIsAnError) {
  bundle::Bundle b = mixedBundle();
  std::string path = root + "/no/such/dir/state";
  std::string m = mtc::errorOf([&] {
    return exec::ParamStore::create(b, exec::HostStateOptions{path});
  });
  EXPECT_NE(m.find(path), std::string::npos) << m;
}

TEST(ParamStore, Bf16GradientsAreTwoBytesPerParameter) {
  // --grad-dtype bf16 under a step plan: value, m, v fp32 and the gradient
  // block bf16, 14 bytes per parameter before padding.
  bundle::Bundle b = mixedBundle();
  exec::HostStateOptions options;
  options.bf16Gradients = true;
  std::unique_ptr<exec::ParamStore> store =
      must(exec::ParamStore::create(b, options));
  const size_t elements = store->blockElements();
  EXPECT_EQ(store->hostBytes(), static_cast<int64_t>((3 * 4 + 2) * elements));
  EXPECT_EQ(store->block(exec::ParamStore::Kind::Grad), nullptr);
  ASSERT_NE(store->gradBf16Block(), nullptr);
  for (const exec::ParamSlot &s : store->slots()) {
    EXPECT_TRUE(s.grad.empty()) << s.name;
    EXPECT_EQ(s.gradBf16, store->gradBf16Block() + s.offset) << s.name;
  }
  // zeroGrads clears the bf16 block; the values are distinct memory.
  store->initialize(1234);
  EXPECT_EQ(valueChecksum(*store), kMixedChecksum);
  for (exec::ParamSlot &s : store->slots())
    std::fill(s.gradBf16, s.gradBf16 + s.value.size(), uint16_t(0x4020));
  EXPECT_EQ(valueChecksum(*store), kMixedChecksum);
  store->zeroGrads();
  for (size_t i = 0; i < elements; ++i)
    ASSERT_EQ(store->gradBf16Block()[i], 0) << i;
  // Without gradients (the immediate placement) the option changes nothing.
  options.gradients = false;
  std::unique_ptr<exec::ParamStore> none =
      must(exec::ParamStore::create(b, options));
  EXPECT_EQ(none->gradBf16Block(), nullptr);
  EXPECT_EQ(none->hostBytes(), static_cast<int64_t>(3 * 4 * elements));
}

TEST_F(ParamStoreFileTest, FileBackedBf16Gradients) {
  bundle::Bundle b = mixedBundle();
  exec::HostStateOptions options;
  options.file = root + "/state";
  options.bf16Gradients = true;
  std::unique_ptr<exec::ParamStore> store =
      must(exec::ParamStore::create(b, options));
  const int64_t page = 4096;
  auto pages = [&](int64_t bytes) { return (bytes + page - 1) / page * page; };
  const int64_t n = static_cast<int64_t>(store->blockElements());
  EXPECT_EQ(store->hostBytes(), 3 * pages(4 * n) + pages(2 * n));
  // Four distinct blocks: writing the gradients leaves the others alone.
  store->initialize(1234);
  for (exec::ParamSlot &s : store->slots())
    std::fill(s.gradBf16, s.gradBf16 + s.value.size(), uint16_t(0xffff));
  EXPECT_EQ(valueChecksum(*store), kMixedChecksum);
  EXPECT_TRUE(allZero(store->block(exec::ParamStore::Kind::M), n));
  EXPECT_TRUE(allZero(store->block(exec::ParamStore::Kind::V), n));
}
