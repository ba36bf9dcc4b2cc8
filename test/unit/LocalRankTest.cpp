//===- LocalRankTest.cpp - Which GPU a rank of a node opens ---------------===//
//
// Part of mtc. dist::localRankFromEnvironment and dist::gpuForLocalRank
// (runtime/dist/LocalRank.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/dist/LocalRank.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using namespace mtc;

namespace {

/// Clears the launchers' variables for one test and restores them after.
class LocalRankEnv : public ::testing::Test {
protected:
  static constexpr const char *names[] = {"OMPI_COMM_WORLD_LOCAL_RANK",
                                          "MPI_LOCALRANKID", "SLURM_LOCALID"};
  void SetUp() override {
    for (const char *n : names) {
      const char *v = std::getenv(n);
      saved.push_back(v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(n);
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < saved.size(); ++i)
      if (saved[i])
        setenv(names[i], saved[i]->c_str(), 1);
      else
        unsetenv(names[i]);
  }
  std::vector<std::optional<std::string>> saved;
};

} // namespace

TEST_F(LocalRankEnv, FirstLauncherVariableWins) {
  Expected<int> none = dist::localRankFromEnvironment();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, -1);
  setenv("SLURM_LOCALID", "3", 1);
  EXPECT_EQ(*dist::localRankFromEnvironment(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  EXPECT_EQ(*dist::localRankFromEnvironment(), 1);
}

TEST_F(LocalRankEnv, MalformedValueNamesTheVariable) {
  for (const char *bad : {"", "x", "-1", "2x"}) {
    setenv("MPI_LOCALRANKID", bad, 1);
    Expected<int> r = dist::localRankFromEnvironment();
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.message().find("MPI_LOCALRANKID='"), std::string::npos)
        << r.message();
  }
}

TEST(LocalRank, GpuIsLocalRankModuloTheGpus) {
  EXPECT_EQ(dist::gpuForLocalRank(-1, 8), 0);
  EXPECT_EQ(dist::gpuForLocalRank(0, 8), 0);
  EXPECT_EQ(dist::gpuForLocalRank(5, 8), 5);
  EXPECT_EQ(dist::gpuForLocalRank(9, 8), 1);
  // One GPU (the emulated driver, or CUDA_VISIBLE_DEVICES per rank): all 0.
  EXPECT_EQ(dist::gpuForLocalRank(1, 1), 0);
  EXPECT_EQ(dist::gpuForLocalRank(3, 0), 0);
}
