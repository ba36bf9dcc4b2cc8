//===- DataParallelTest.cpp - Collectives, gradient sums, shards ----------===//
//
// Part of mtc. runtime/dist and the data-parallel parts of runtime/driver
// without MPI: "ranks" are threads of this process joined by ThreadComm, a
// Communicator over shared memory that sums in rank order. The sharded
// optimizer over two such ranks must give the values and moments of one
// AdamW over the summed gradients, bit for bit (AdamW is elementwise).
// The MPI plugin itself is tested by test/dist (two processes, mpirun).
//
//===----------------------------------------------------------------------===//

#include "runtime/dataparallel/DataParallel.h"
#include "runtime/dataparallel/ShardedOptimizer.h"
#include "runtime/dist/Communicator.h"
#include "runtime/dist/GradientReducer.h"
#include "runtime/exec/ParamStore.h"
#include "runtime/train/Optimizer.h"
#include "runtime/train/Random.h"

#include "Must.h"
#include "TinyBundle.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

namespace mtc {
namespace {

/// What the ranks of one ThreadComm group share: each rank's buffer of the
/// collective under way, a barrier, and the groups of their duplicates.
struct Group {
  explicit Group(int n) : n(n), ptrs(n) {}
  void barrier() {
    std::unique_lock<std::mutex> lk(mu);
    int gen = generation;
    if (++arrived == n) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lk, [&] { return gen != generation; });
    }
  }
  std::shared_ptr<Group> child(size_t k) {
    std::lock_guard<std::mutex> g(mu);
    while (children.size() <= k)
      children.push_back(std::make_shared<Group>(n));
    return children[k];
  }
  int n;
  std::vector<const void *> ptrs;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0, generation = 0;
  std::vector<std::shared_ptr<Group>> children;
};

/// One rank of a Group: collectives over shared memory, sums in rank order.
class ThreadComm final : public dist::Communicator {
public:
  ThreadComm(std::shared_ptr<Group> g, int rank) : g(std::move(g)), r(rank) {}
  int rank() const override { return r; }
  int size() const override { return g->n; }
  std::string name() const override { return "threads"; }
  Status allreduceSum(float *buf, int64_t n) override { return sum(buf, n); }
  Status allreduceSum(double *buf, int64_t n) override { return sum(buf, n); }
  Status reduceScatterSum(const float *send, float *recv,
                          const std::vector<int64_t> &counts) override {
    g->ptrs[r] = send;
    g->barrier();
    int64_t off = 0;
    for (int q = 0; q < r; ++q)
      off += counts[q];
    for (int64_t i = 0; i < counts[r]; ++i) {
      float s = 0;
      for (int q = 0; q < g->n; ++q)
        s += static_cast<const float *>(g->ptrs[q])[off + i];
      recv[i] = s;
    }
    g->barrier();
    return Status::success();
  }
  Status allgather(const void *send, void *recv,
                   const std::vector<int64_t> &counts) override {
    g->ptrs[r] = send;
    g->barrier();
    int64_t off = 0;
    for (int q = 0; q < g->n; ++q) {
      std::memmove(static_cast<char *>(recv) + off, g->ptrs[q], counts[q]);
      off += counts[q];
    }
    g->barrier();
    return Status::success();
  }
  Status broadcast(void *buf, int64_t bytes, int root) override {
    g->ptrs[r] = buf;
    g->barrier();
    if (r != root)
      std::memcpy(buf, g->ptrs[root], bytes);
    g->barrier();
    return Status::success();
  }
  Status barrier() override {
    g->barrier();
    return Status::success();
  }
  Expected<std::unique_ptr<Communicator>> duplicate() override {
    return std::unique_ptr<Communicator>(new ThreadComm(g->child(dups++), r));
  }
  [[noreturn]] void abort(int) override { std::abort(); }

private:
  template <typename T> Status sum(T *buf, int64_t n) {
    g->ptrs[r] = buf;
    g->barrier();
    std::vector<T> s(n, T(0));
    for (int q = 0; q < g->n; ++q)
      for (int64_t i = 0; i < n; ++i)
        s[i] += static_cast<const T *>(g->ptrs[q])[i];
    g->barrier();
    std::copy(s.begin(), s.end(), buf);
    g->barrier();
    return Status::success();
  }
  std::shared_ptr<Group> g;
  int r;
  size_t dups = 0;
};

/// Runs \p fn(rank, comm) on \p n threads, one rank each.
void onRanks(int n,
             const std::function<void(int, std::shared_ptr<ThreadComm>)> &fn) {
  auto group = std::make_shared<Group>(n);
  std::vector<std::thread> ts;
  std::vector<std::string> errors(n);
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        fn(r, std::make_shared<ThreadComm>(group, r));
      } catch (const std::exception &e) {
        errors[r] = e.what();
      }
    });
  for (std::thread &t : ts)
    t.join();
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(CommunicatorTest, SingleProcessIsTheIdentity) {
  std::unique_ptr<dist::Communicator> c = dist::singleProcess();
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->size(), 1);
  float x[3] = {1, 2, 3}, y[3] = {};
  must(c->allreduceSum(x, 3));
  EXPECT_EQ(x[2], 3.0f);
  must(c->reduceScatterSum(x, y, {3}));
  EXPECT_EQ(y[1], 2.0f);
  std::fill(y, y + 3, 0.0f);
  must(c->allgather(x, y, {12}));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(must(c->duplicate())->size(), 1);
}

TEST(CommunicatorTest, WorldChoice) {
  EXPECT_EQ(must(dist::openWorld("off"))->size(), 1);
  EXPECT_NE(errorOf([] {
              return dist::openWorld("tcp");
            }).find("--data-parallel expects auto, mpi or off"),
            std::string::npos);
  ::setenv("MTC_MPI_PLUGIN", "/nonexistent/libmtc-mpi.so", 1);
  std::string e = errorOf([] { return dist::openWorld("mpi"); });
  ::unsetenv("MTC_MPI_PLUGIN");
  EXPECT_NE(e.find("launched under MPI but libmtc-mpi.so / libmpi not found"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("/nonexistent/libmtc-mpi.so"), std::string::npos) << e;
}

TEST(GradientReducerTest, SumsInOrderAndReportsErrors) {
  onRanks(2, [](int r, std::shared_ptr<ThreadComm> world) {
    auto red = must(dist::GradientReducer::create(*world));
    std::vector<float> a(1000, 1.0f + r), b(7, 10.0f * (r + 1));
    red->enqueue({{a.data(), 1000}});
    red->enqueue({{b.data(), 7}});
    must(red->wait());
    if (a[999] != 3.0f || b[0] != 30.0f)
      throw std::runtime_error("wrong sums");
    if (red->bytes() != 4 * 1007)
      throw std::runtime_error("bytes " + std::to_string(red->bytes()));
    // A failing job: wait() returns its error once; later jobs run again.
    red->enqueue([](dist::Communicator &, int64_t &) {
      return Status::error("planted");
    });
    if (red->wait().message() != "planted")
      throw std::runtime_error("the job's error was not returned");
    red->enqueue({{b.data(), 7}});
    must(red->wait());
    if (b[6] != 60.0f)
      throw std::runtime_error("no sum after an error");
  });
}

TEST(CommunicatorTest, OrderedSumAddsInRankOrder) {
  // 1 + 1e8 rounds to 1e8 in float: in rank order the sum is 0 on every
  // rank; any other order (say rank 1's and 2's first) gives 1.
  onRanks(3, [](int r, std::shared_ptr<ThreadComm> comm) {
    const float mine[3] = {1.0f, 1e8f, -1e8f};
    float x[2] = {mine[r], 2.0f * mine[r]};
    must(dist::orderedSum(*comm, x, 2));
    if (x[0] != 0.0f || x[1] != 0.0f)
      throw std::runtime_error("ordered sum " + std::to_string(x[0]));
    double d = mine[r];
    must(dist::orderedSum(*comm, &d, 1));
    if (d != 1.0)
      throw std::runtime_error("ordered double sum " + std::to_string(d));
    // Three elements, one per rank: each receives its element's sum.
    float send[3] = {mine[r], mine[r], mine[r]}, got = -1;
    must(dist::orderedReduceScatter(*comm, send, &got, {1, 1, 1}));
    if (got != 0.0f)
      throw std::runtime_error("ordered reduce-scatter " + std::to_string(got));
  });
}

/// The tiny bundle with two Block instances of an odd-sized weight (15
/// elements: shards of 7 and 8).
bundle::Bundle shardBundle() {
  bundle::tiny::TinyLayer t;
  t.count = 2;
  t.weight = {5, 3};
  return bundle::tiny::tinyBundle(t);
}

/// Rank \p r's gradient of every slot at \p step (distinct per rank).
std::vector<std::vector<float>> rankGrads(const exec::ParamStore &s, int r,
                                          int step) {
  std::vector<std::vector<float>> g;
  for (const exec::ParamSlot &slot : s.slots()) {
    std::vector<float> x(slot.value.size());
    train::initNormal(x.data(), x.size(), 0.0f, 1.0f, 7 + step, 100 + r);
    g.push_back(std::move(x));
  }
  return g;
}

TEST(ShardedOptimizerTest, EqualsOneAdamWOverTheSummedGradients) {
  bundle::Bundle b = shardBundle();
  train::AdamWConfig cfg;
  // The reference: one store, AdamW over g0 + g1.
  auto ref = must(exec::ParamStore::create(b));
  ref->initialize(3);
  train::AdamW adamw(cfg, nullptr);
  std::vector<double> refSumsq;
  for (int step = 1; step <= 2; ++step) {
    auto g0 = rankGrads(*ref, 0, step), g1 = rankGrads(*ref, 1, step);
    std::vector<train::AdamWTensor> ts;
    double sq = 0;
    for (size_t i = 0; i < ref->slots().size(); ++i) {
      exec::ParamSlot &s = ref->slots()[i];
      for (size_t k = 0; k < s.grad.size(); ++k)
        s.grad[k] = 0.0f + g0[i][k] + g1[i][k];
      sq += train::sumOfSquares(s.grad.data(), s.grad.size());
      ts.push_back({s.value.data(), s.m.data(), s.v.data(), s.grad.data(),
                    s.value.size(), s.decay()});
    }
    refSumsq.push_back(sq);
    adamw.step(ts, step, 1e-2f, 0.5f);
  }

  onRanks(2, [&](int r, std::shared_ptr<ThreadComm> comm) {
    exec::HostStateOptions o;
    o.moments = false;
    auto store = must(exec::ParamStore::create(b, o));
    store->initialize(3);
    if (!store->slots()[0].m.empty())
      throw std::runtime_error("the store holds moments");
    driver::ShardedOptimizer opt(r, 2, *store);
    train::AdamW mine(cfg, nullptr);
    std::vector<exec::ParamSlot *> slots;
    for (exec::ParamSlot &s : store->slots())
      slots.push_back(&s);
    for (int step = 1; step <= 2; ++step) {
      auto g = rankGrads(*store, r, step);
      std::vector<const float *> gp;
      for (auto &x : g)
        gp.push_back(x.data());
      int64_t bytes = 0;
      must(opt.scatter(*comm, slots, gp, bytes));
      double sq = opt.sumOfSquares();
      must(comm->allreduceSum(&sq, 1));
      if (std::abs(sq - refSumsq[step - 1]) > 1e-12 * refSumsq[step - 1])
        throw std::runtime_error("norm differs");
      if (step == 2) {
        // A checkpoint's moments read into full views, then kept as shards
        // (what resuming does): the update goes on unchanged.
        must(opt.gatherMoments(*comm, true));
        std::vector<std::vector<float>> m, v;
        for (exec::ParamSlot &s : store->slots()) {
          m.push_back(s.m.toVector());
          v.push_back(s.v.toVector());
        }
        opt.releaseMoments();
        must(opt.gatherMoments(*comm, false));
        for (size_t i = 0; i < store->slots().size(); ++i) {
          std::copy(m[i].begin(), m[i].end(), store->slots()[i].m.begin());
          std::copy(v[i].begin(), v[i].end(), store->slots()[i].v.begin());
        }
        opt.keepShards();
      }
      must(opt.update(*comm, mine, step, 1e-2f, 0.5f, bytes));
      if (bytes != 8 * store->totalParams())
        throw std::runtime_error("bytes " + std::to_string(bytes));
    }
    must(opt.gatherMoments(*comm, true));
    for (size_t i = 0; i < store->slots().size(); ++i) {
      const exec::ParamSlot &s = store->slots()[i], &e = ref->slots()[i];
      for (size_t k = 0; k < s.value.size(); ++k)
        if (s.value[k] != e.value[k] || s.m[k] != e.m[k] || s.v[k] != e.v[k])
          throw std::runtime_error("rank " + std::to_string(r) + ": " + s.name +
                                   "[" + std::to_string(k) +
                                   "] differs from one AdamW");
    }
    opt.releaseMoments();
    // m, v and g of emb's 16 elements and w's 7 (rank 0) or 8 (rank 1),
    // twice.
    if (opt.hostBytes() != 12 * (16 + 2 * (r == 0 ? 7 : 8)))
      throw std::runtime_error("shard bytes " +
                               std::to_string(opt.hostBytes()));
  });
}

TEST(DataParallelTest, SumsInstanceGradientsAndChecksTheRanks) {
  bundle::Bundle b = shardBundle();
  onRanks(2, [&](int r, std::shared_ptr<ThreadComm> comm) {
    auto store = must(exec::ParamStore::create(b));
    auto dp = must(driver::DataParallel::create(comm, b, *store));
    for (exec::ParamSlot &s : store->slots())
      std::fill(s.grad.begin(), s.grad.end(), 1.0f + r);
    dp->beginStep();
    dp->instanceDone("Block", 1);
    must(dp->finishGradients());
    for (const exec::ParamSlot &s : store->slots())
      if (s.grad[0] != 3.0f)
        throw std::runtime_error(s.name + " not summed once");
    if (dp->allreduceBytes() != 4 * store->totalParams())
      throw std::runtime_error("bytes");
    if (must(dp->mean(r == 0 ? 1.0 : 2.0)) != 1.5)
      throw std::runtime_error("mean");

    driver::TrainOptions same, other;
    other.lr = 2e-3;
    must(driver::DataParallel::checkConsistent(*comm, b, same));
    std::string e = errorOf([&] {
      return driver::DataParallel::checkConsistent(*comm, b,
                                                   r == 1 ? other : same);
    });
    if (e.find("rank 1's training options") == std::string::npos)
      throw std::runtime_error("consistency: '" + e + "'");
  });
}

TEST(DataParallelTest, AddsMicroBatchesInOneProcessOrder) {
  // --deterministic-reduce, two micro-batches per rank: rank 0 trained
  // micro-batches 0 and 1, rank 1 micro-batches 2 and 3. One process adds
  // ((((0 + 1e8) + 1) - 1e8) + 1) = 1 in fp32 (1e8 + 1 rounds to 1e8); a sum
  // of the ranks' sums would give (1e8 + 1) + (-1e8 + 1) = 0.
  bundle::Bundle b = shardBundle();
  onRanks(2, [&](int r, std::shared_ptr<ThreadComm> comm) {
    auto store = must(exec::ParamStore::create(b));
    auto dp = must(driver::DataParallel::create(comm, b, *store));
    std::vector<std::vector<std::vector<float>>> earlier(1);
    for (exec::ParamSlot &s : store->slots()) {
      earlier[0].emplace_back(s.grad.size(), r == 0 ? 1e8f : -1e8f);
      std::fill(s.grad.begin(), s.grad.end(), 1.0f);
    }
    dp->beginStep();
    must(dp->sumGradientsInOrder(earlier));
    // Summed already: finishing the step adds nothing.
    must(dp->finishGradients());
    for (const exec::ParamSlot &s : store->slots())
      for (float g : s.grad)
        if (g != 1.0f)
          throw std::runtime_error(s.name + ": " + std::to_string(g));
    if (dp->allreduceBytes() != 8 * store->totalParams())
      throw std::runtime_error("bytes");
    double loss = must(dp->sumInOrder(r == 0 ? std::vector<double>{1e17, 1}
                                             : std::vector<double>{-1e17, 1}));
    if (loss != 1.0)
      throw std::runtime_error("loss " + std::to_string(loss));
  });
}

} // namespace
} // namespace mtc
