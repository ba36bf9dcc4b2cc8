//===- CheckpointTest.cpp - Full-state checkpoints --------------*- C++ -*-===//
//
// Part of mtc. Round trip of runtime/checkpoint/Checkpoint (weights, AdamW
// moments, trainer state), the rename protocol's backup, and the errors for
// corrupt and mismatched checkpoints.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"
#include "lib/Format/Safetensors.h"
#include "lib/Support/Hash.h"

#include "runtime/exec/ParamStore.h"
#include "test/unit/Must.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

using namespace mtc;
using namespace mtc::driver;
namespace fs = std::filesystem;

namespace {

/// A model with a model-level embedding and norm and two layer instances.
bundle::Bundle tinyBundle(int64_t width = 4) {
  bundle::Bundle b;
  b.model = "Tiny";
  b.config = {{"dim", double(width)}, {"eps", 1e-5}};
  bundle::Param emb{"emb", {8, width}, DType::F32, "normal", {0.02}};
  bundle::Param norm{"norm", {width}, DType::F32, "ones", {}};
  b.params = {emb, norm};
  bundle::Layer l;
  l.name = "Block";
  l.count = 2;
  l.params = {bundle::Param{"w", {width, width}, DType::F32, "normal", {0.1}}};
  b.layers.push_back(l);
  return b;
}

/// Fills the moments with values no initializer produces.
void fillMoments(exec::ParamStore &store) {
  float x = 0.001f;
  for (exec::ParamSlot &s : store.slots())
    for (size_t i = 0; i < s.m.size(); ++i) {
      s.m[i] = x;
      s.v[i] = x * x / 3;
      x = x * 1.37f + 0.0001f;
      if (x > 10)
        x -= 9.99f;
    }
}

TrainerState someState(int64_t step) {
  TrainerState st;
  st.step = step;
  st.loss = 2.0 + 1.0 / 3;
  st.valLoss = 2.5;
  st.valStep = step;
  st.options.data = "corpus.txt";
  st.options.steps = 100;
  st.options.batch = 4;
  st.options.seq = 16;
  st.options.lr = 3e-3;
  st.options.seed = 7;
  st.data.path = "corpus.txt";
  st.data.format = "text";
  st.data.bytes = 1000;
  st.data.fingerprint = 0x0123456789abcdefULL;
  st.data.tokens = 1000;
  st.data.trainTokens = 900;
  st.data.valTokens = 100;
  return st;
}

class CheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "mtc-ckpt-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(::mkdtemp(buf.data()), nullptr);
    root = buf.data();
    dir = root + "/ckpt";
  }
  void TearDown() override { fs::remove_all(root); }

  std::string read(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void write(const std::string &path, const std::string &text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }

  std::string root, dir;
};

bool sameBits(const exec::HostArray &a, const exec::HostArray &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

TEST_F(CheckpointTest, RoundTripIsBitExact) {
  bundle::Bundle b = tinyBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  store.initialize(3);
  fillMoments(store);
  ASSERT_TRUE(writeCheckpoint(dir, b, store, someState(12)).ok());
  for (const char *f : {"model.mtb", "model.safetensors",
                        "optimizer.safetensors", "trainer_state.json"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
  EXPECT_FALSE(fs::exists(dir + ".bak"));

  std::unique_ptr<exec::ParamStore> loadedOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &loaded = *loadedOwned;
  std::vector<std::string> notes;
  Expected<TrainerState> st = readCheckpoint(dir, b, loaded, &notes);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(st->step, 12);
  EXPECT_EQ(st->loss, 2.0 + 1.0 / 3);
  EXPECT_EQ(st->valLoss, 2.5);
  EXPECT_EQ(st->options.lr, 3e-3);
  EXPECT_EQ(st->options.seed, 7u);
  EXPECT_EQ(st->options.batch, 4);
  EXPECT_EQ(st->data.fingerprint, 0x0123456789abcdefULL);
  ASSERT_EQ(loaded.slots().size(), store.slots().size());
  for (size_t i = 0; i < store.slots().size(); ++i) {
    const exec::ParamSlot &a = store.slots()[i], &c = loaded.slots()[i];
    EXPECT_TRUE(sameBits(a.value, c.value)) << a.name;
    EXPECT_TRUE(sameBits(a.m, c.m)) << a.name;
    EXPECT_TRUE(sameBits(a.v, c.v)) << a.name;
  }
}

TEST_F(CheckpointTest, OptimizerTensorNames) {
  bundle::Bundle b = tinyBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  ASSERT_TRUE(writeCheckpoint(dir, b, store, someState(1)).ok());
  std::string text = read(dir + "/optimizer.safetensors");
  EXPECT_NE(text.find("\"Block.1.w.exp_avg\""), std::string::npos);
  EXPECT_NE(text.find("\"Block.1.w.exp_avg_sq\""), std::string::npos);
  EXPECT_NE(text.find("\"emb.exp_avg\""), std::string::npos);
}

TEST_F(CheckpointTest, OverwriteReplacesAndCleansUp) {
  bundle::Bundle b = tinyBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  ASSERT_TRUE(writeCheckpoint(dir, b, store, someState(5)).ok());
  ASSERT_TRUE(writeCheckpoint(dir + "/", b, store, someState(10)).ok());
  Expected<TrainerState> st = readTrainerState(dir);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(st->step, 10);
  EXPECT_FALSE(fs::exists(dir + ".bak"));
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
}

TEST_F(CheckpointTest, ResolveFallsBackToBackupOnlyWhenMissing) {
  bundle::Bundle b = tinyBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  ASSERT_TRUE(writeCheckpoint(dir, b, store, someState(5)).ok());
  std::string note;
  Expected<std::string> r = resolveCheckpoint(dir, &note);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, dir);
  EXPECT_TRUE(note.empty());

  // The state between the two renames of an interrupted write.
  fs::rename(dir, dir + ".bak");
  fs::create_directory(dir + ".tmp");
  r = resolveCheckpoint(dir, &note);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, dir + ".bak");
  EXPECT_NE(note.find("missing"), std::string::npos);
  std::unique_ptr<exec::ParamStore> loadedOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &loaded = *loadedOwned;
  EXPECT_TRUE(readCheckpoint(*r, b, loaded).ok());

  // The next write completes the swap and removes the backup.
  ASSERT_TRUE(writeCheckpoint(dir, b, store, someState(6)).ok());
  EXPECT_FALSE(fs::exists(dir + ".bak"));
  EXPECT_EQ(readTrainerState(dir)->step, 6);

  r = resolveCheckpoint(root + "/nothing");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("does not exist"), std::string::npos);
  fs::create_directory(root + "/empty");
  r = resolveCheckpoint(root + "/empty");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("is not a checkpoint"), std::string::npos);
}

TEST_F(CheckpointTest, CorruptFilesAreRefused) {
  bundle::Bundle b = tinyBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  store.initialize(1);
  ASSERT_TRUE(writeCheckpoint(dir, b, store, someState(5)).ok());
  std::string weights = read(dir + "/model.safetensors");
  std::string state = read(dir + "/trainer_state.json");
  std::unique_ptr<exec::ParamStore> loadedOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &loaded = *loadedOwned;

  write(dir + "/model.safetensors", weights.substr(0, weights.size() - 7));
  Expected<TrainerState> st = readCheckpoint(dir, b, loaded);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("model.safetensors"), std::string::npos);
  EXPECT_NE(st.message().find("truncated"), std::string::npos);

  std::string flipped = weights;
  flipped[flipped.size() - 2] ^= 1;
  write(dir + "/model.safetensors", flipped);
  st = readCheckpoint(dir, b, loaded);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("checksum mismatch"), std::string::npos);
  write(dir + "/model.safetensors", weights);

  write(dir + "/trainer_state.json", state.substr(0, state.size() / 2));
  st = readCheckpoint(dir, b, loaded);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("trainer_state.json: not valid JSON"),
            std::string::npos)
      << st.message();

  // A number past a double's range: an error with its place, not an
  // uncaught exception of the parser.
  std::string huge = state;
  huge.replace(huge.find("\n \"step\": 5"), 11, "\n \"step\": 1e999");
  write(dir + "/trainer_state.json", huge);
  st = readCheckpoint(dir, b, loaded);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("trainer_state.json: line "), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("number 1e999 is out of the range of a double"),
            std::string::npos)
      << st.message();

  write(dir + "/trainer_state.json", "{\"step\": 3}");
  st = readCheckpoint(dir, b, loaded);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a resumable checkpoint"), std::string::npos);

  std::string noStep = state;
  noStep.replace(noStep.find("\n \"step\""), 8, "\n \"stop\"");
  write(dir + "/trainer_state.json", noStep);
  st = readCheckpoint(dir, b, loaded);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("missing field 'step'"), std::string::npos)
      << st.message();
}

TEST_F(CheckpointTest, AnotherModelIsRefused) {
  bundle::Bundle b = tinyBundle(4);
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  ASSERT_TRUE(writeCheckpoint(dir, b, store, someState(5)).ok());

  bundle::Bundle wider = tinyBundle(4);
  wider.params[0].shape = {8, 5};
  std::unique_ptr<exec::ParamStore> s2Owned =
      must(exec::ParamStore::create(wider));
  exec::ParamStore &s2 = *s2Owned;
  Expected<TrainerState> st = readCheckpoint(dir, wider, s2);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'emb' is [8, 4] in model.safetensors, [8, 5] "
                              "in the model"),
            std::string::npos)
      << st.message();

  bundle::Bundle eps = tinyBundle(4);
  eps.config["eps"] = 1e-6;
  std::unique_ptr<exec::ParamStore> s3Owned =
      must(exec::ParamStore::create(eps));
  exec::ParamStore &s3 = *s3Owned;
  st = readCheckpoint(dir, eps, s3);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("config entry 'eps' is 1e-05 in the "
                              "checkpoint, 1e-06 in the model"),
            std::string::npos)
      << st.message();

  bundle::Bundle deeper = tinyBundle(4);
  deeper.layers[0].count = 3;
  std::unique_ptr<exec::ParamStore> s4Owned =
      must(exec::ParamStore::create(deeper));
  exec::ParamStore &s4 = *s4Owned;
  st = readCheckpoint(dir, deeper, s4);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("has no tensor 'Block.2.w'"), std::string::npos)
      << st.message();
}

// A seed takes all 64 bits: written exactly, read back exactly, and seeds
// that differ beyond 2^53 are told apart and shown as they are.
TEST_F(CheckpointTest, SeedsRoundTripExactly) {
  bundle::Bundle b = tinyBundle();
  std::unique_ptr<exec::ParamStore> store = must(exec::ParamStore::create(b));
  TrainerState state = someState(5);
  state.options.seed = UINT64_MAX;
  ASSERT_TRUE(writeCheckpoint(dir, b, *store, state).ok());
  EXPECT_NE(read(dir + "/trainer_state.json").find("18446744073709551615"),
            std::string::npos);
  Expected<TrainerState> back = readTrainerState(dir);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->options.seed, UINT64_MAX);
  std::vector<std::string> notes;
  TrainOptions near = back->options;
  near.seed = UINT64_MAX - 1; // the same double
  Status s = checkResume(*back, "ck", near, back->data, notes);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--seed 18446744073709551614 differs from the "
                             "checkpoint's 18446744073709551615"),
            std::string::npos)
      << s.message();
}

TEST(CheckpointResume, OptionsThatMustMatch) {
  TrainerState ck = someState(5);
  TrainOptions opts = ck.options;
  std::vector<std::string> notes;
  EXPECT_TRUE(checkResume(ck, "ck", opts, ck.data, notes).ok());
  EXPECT_TRUE(notes.empty());

  TrainOptions batch = opts;
  batch.batch = 8;
  Status s = checkResume(ck, "ck", batch, ck.data, notes);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--batch 8 differs from the checkpoint's 4"),
            std::string::npos)
      << s.message();

  TrainOptions lr = opts;
  lr.lr = 1e-3;
  lr.steps = 200;
  EXPECT_TRUE(checkResume(ck, "ck", lr, ck.data, notes).ok());
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("--steps 200"), std::string::npos);
  EXPECT_NE(notes[1].find("--lr 0.001 (checkpoint: 0.003)"), std::string::npos)
      << notes[1];

  DataIdentity other = ck.data;
  other.fingerprint ^= 1;
  s = checkResume(ck, "ck", opts, other, notes);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is not the one checkpoint 'ck' trained on"),
            std::string::npos);

  TrainOptions fewer = opts;
  fewer.steps = 4;
  s = checkResume(ck, "ck", fewer, ck.data, notes);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("below the checkpoint's step 5"),
            std::string::npos);
}

TEST(CheckpointResume, InheritsOptionsNotGiven) {
  TrainOptions recorded;
  recorded.batch = 3;
  recorded.lr = 0.5;
  recorded.data = "x.txt";
  TrainOptions opts;
  opts.lr = 0.25;
  inheritOptions(recorded, {"--lr"}, opts);
  EXPECT_EQ(opts.batch, 3);
  EXPECT_EQ(opts.lr, 0.25);
  EXPECT_EQ(opts.data, "x.txt");
}

TEST_F(CheckpointTest, TargetAndMetrics) {
  EXPECT_TRUE(checkCheckpointTarget(dir).ok());
  fs::create_directory(dir);
  EXPECT_TRUE(checkCheckpointTarget(dir).ok());
  write(dir + "/notes.txt", "mine");
  Status s = checkCheckpointTarget(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("holds no checkpoint"), std::string::npos);

  std::string m = root + "/m.jsonl";
  write(m, "{\"step\":1,\"loss\":3}\n{\"step\":2,\"loss\":2}\n"
           "{\"step\":3,\"loss\":1}\n");
  ASSERT_TRUE(trimMetrics(m, 2).ok());
  EXPECT_EQ(read(m), "{\"step\":1,\"loss\":3}\n{\"step\":2,\"loss\":2}\n");
  EXPECT_TRUE(trimMetrics(root + "/absent.jsonl", 2).ok());
}

// Readers of a checkpoint (generate, export-hf, --init-from) see one whole
// checkpoint while a run replaces it: the weights they read are those of the
// step its trainer_state.json names, and no read fails because a rename
// happened between two of its files.
TEST_F(CheckpointTest, ReadersSeeOneWholeCheckpointDuringRewrites) {
  bundle::Bundle b = tinyBundle();
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  auto fill = [&](int64_t step) {
    for (exec::ParamSlot &s : store.slots())
      for (size_t i = 0; i < s.value.size(); ++i)
        s.value[i] = static_cast<float>(step);
  };
  fill(1);
  ASSERT_TRUE(writeCheckpoint(dir, b, store, someState(1)).ok());
  std::atomic<bool> stop{false};
  std::atomic<int64_t> written{1};
  std::thread writer([&] {
    for (int64_t step = 2; !stop.load() && step < 100000; ++step) {
      fill(step);
      if (!writeCheckpoint(dir, b, store, someState(step)).ok())
        break;
      written.store(step);
    }
  });
  int reads = 0;
  std::string failure;
  // At least 60 reads while at least 10 replacements happen (the writer may
  // lag on a busy machine; 30 s bounds the wait, not the test's outcome).
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (failure.empty() && (reads < 60 || written.load() < 10) &&
         std::chrono::steady_clock::now() < until) {
    Status st = readStableCheckpoint(dir, [&](const std::string &resolved) {
      if (Status v = verifyCheckpointFiles(resolved); !v.ok())
        return v;
      Expected<TrainerState> state = readTrainerState(resolved);
      if (!state)
        return state.status();
      Expected<SafetensorsFile> w =
          SafetensorsFile::open(resolved + "/model.safetensors");
      if (!w)
        return w.status();
      std::vector<float> v(16);
      if (Status r = w->readAsF32("Block.1.w", v.data(), v.size()); !r.ok())
        return r;
      const float x = v.back();
      if (x != static_cast<float>(state->step))
        return Status::error("step " + std::to_string(state->step) +
                             " with the weights of step " +
                             std::to_string(static_cast<int64_t>(x)));
      return Status::success();
    });
    if (!st.ok())
      failure = st.message();
    ++reads;
  }
  stop.store(true);
  writer.join();
  EXPECT_EQ(failure, "") << "after " << reads << " reads";
  EXPECT_GT(written.load(), 2) << "the writer never replaced the checkpoint";
}
