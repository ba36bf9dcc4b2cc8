//===- FilesTest.cpp - Unit tests of lib/Support/Files and the lock -------===//
//
// Part of mtc. Outputs against inputs (same file through another spelling, a
// symlink, a hard link), regular-file checks that never block, and the
// checkpoint directory lock (runtime/driver/Checkpoint.h).
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Files.h"
#include "runtime/driver/Checkpoint.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace mtc;

namespace {

/// A fresh directory (mkdtemp: a name left by an earlier run whose process
/// had the same pid would make symlink/link fail).
std::string tempDir() {
  std::string base = ::testing::TempDir();
  while (base.size() > 1 && base.back() == '/')
    base.pop_back();
  std::string d = base + "/mtc-files-XXXXXX";
  if (!::mkdtemp(d.data()))
    ADD_FAILURE() << "mkdtemp " << d << " failed";
  return d;
}

void touch(const std::string &path, const std::string &text = "x") {
  std::ofstream(path) << text;
}

TEST(Files, SameFileThroughOtherNames) {
  std::string d = tempDir();
  touch(d + "/a");
  touch(d + "/b");
  ASSERT_EQ(::symlink("a", (d + "/sym").c_str()), 0);
  ASSERT_EQ(::link((d + "/a").c_str(), (d + "/hard").c_str()), 0);
  EXPECT_TRUE(sameFile(d + "/a", d + "/./a"));
  EXPECT_TRUE(sameFile(d + "/a", d + "/sym"));
  EXPECT_TRUE(sameFile(d + "/a", d + "/hard"));
  EXPECT_FALSE(sameFile(d + "/a", d + "/b"));
  EXPECT_FALSE(sameFile(d + "/a", d + "/missing"));
  EXPECT_FALSE(sameFile("", d + "/a"));
}

TEST(Files, CheckOutputs) {
  std::string d = tempDir();
  touch(d + "/data.txt");
  ASSERT_EQ(::symlink("data.txt", (d + "/link").c_str()), 0);
  Status st =
      checkOutputs({{"--metrics", d + "/link"}}, {{"--data", d + "/data.txt"}});
  EXPECT_EQ(st.message(), "--metrics '" + d + "/link' is the same file as " +
                              "--data '" + d +
                              "/data.txt'; an output never overwrites an "
                              "input: give another path");
  EXPECT_TRUE(checkOutputs({{"--metrics", d + "/new.jsonl"}},
                           {{"--data", d + "/data.txt"}})
                  .ok());
  // Two outputs at one path collide even before either exists.
  st = checkOutputs({{"--metrics", d + "/m"}, {"--trace", d + "/./m"}}, {});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("give them different paths"), std::string::npos);
  EXPECT_TRUE(checkOutputs({{"--metrics", ""}, {"--trace", ""}}, {}).ok());
}

TEST(Files, RegularFilesOnly) {
  std::string d = tempDir();
  touch(d + "/f", "hello");
  EXPECT_TRUE(checkRegularFile(d + "/f").ok());
  Expected<std::string> text = readRegularFile(d + "/f");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "hello");
  ASSERT_EQ(::mkfifo((d + "/fifo").c_str(), 0644), 0);
  // A FIFO without a writer: refused at once, never opened for a blocking
  // read.
  EXPECT_EQ(checkRegularFile(d + "/fifo").message(),
            d + "/fifo: is a FIFO, not a regular file");
  EXPECT_EQ(readRegularFile(d + "/fifo").message(),
            d + "/fifo: is a FIFO, not a regular file");
  EXPECT_EQ(readRegularFile(d).message(), d + ": is a directory, not a file");
  EXPECT_NE(readRegularFile(d + "/none").message().find("cannot open"),
            std::string::npos);
}

TEST(CheckpointLock, OneHolderAndSymlinksFollowed) {
  std::string d = tempDir();
  Expected<driver::CheckpointLock> first =
      driver::CheckpointLock::acquire(d + "/ck/");
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_EQ(first->dir(), d + "/ck");
  std::ifstream lockFile(d + "/ck.lock");
  std::string pid;
  lockFile >> pid;
  EXPECT_EQ(pid, std::to_string(::getpid()));
  // flock locks belong to the open file description: a second acquire in
  // this process is refused like another process's.
  Expected<driver::CheckpointLock> second =
      driver::CheckpointLock::acquire(d + "/ck");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(
      second.message().find("is being written by another mtc train (pid " +
                            std::to_string(::getpid())),
      std::string::npos)
      << second.message();
  { driver::CheckpointLock released = std::move(*first); }
  EXPECT_NE(::access((d + "/ck.lock").c_str(), F_OK), 0);
  // A symlink is followed: the lock and the checkpoint are the target's.
  ::mkdir((d + "/real").c_str(), 0755);
  ASSERT_EQ(::symlink("real", (d + "/via").c_str()), 0);
  Expected<driver::CheckpointLock> via =
      driver::CheckpointLock::acquire(d + "/via");
  ASSERT_TRUE(via.ok()) << via.message();
  EXPECT_EQ(via->dir(), d + "/real");
  EXPECT_EQ(::access((d + "/real.lock").c_str(), F_OK), 0);
  // A parent that is a file cannot hold a checkpoint.
  touch(d + "/file");
  Expected<driver::CheckpointLock> bad =
      driver::CheckpointLock::acquire(d + "/file/ck");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("cannot create directory"), std::string::npos)
      << bad.message();
}

} // namespace
