//===- FilesTest.cpp - Unit tests of lib/Support/Files and the lock -------===//
//
// Part of mtc. Outputs against inputs (same file through another spelling, a
// symlink, a hard link), regular-file checks that never block, outputs onto
// special files (written through, never replaced), and the checkpoint
// directory lock (runtime/checkpoint/Checkpoint.h).
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Files.h"
#include "runtime/checkpoint/Checkpoint.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <thread>
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

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool isLink(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// A special file is written through, never renamed over: a link to
// /dev/null stays a link to the character device, a FIFO stays a FIFO and
// its reader gets the bytes, /dev/fd/N writes to the descriptor.
TEST(Files, OutputsOntoSpecialFilesAreWrittenThrough) {
  std::string d = tempDir();
  ASSERT_EQ(::symlink("/dev/null", (d + "/null").c_str()), 0);
  Expected<OutputTarget> t = resolveOutput(d + "/null");
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->kind, OutputTarget::Kind::Stream);
  EXPECT_EQ(t->path, "/dev/null");
  ASSERT_TRUE(writeFileAtomically(d + "/null", "bytes").ok());
  EXPECT_TRUE(isLink(d + "/null"));
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_NE(::access("/dev/null.tmp", F_OK), 0);

  // A FIFO with a reader.
  ASSERT_EQ(::mkfifo((d + "/fifo").c_str(), 0644), 0);
  std::string got;
  std::thread reader([&] { got = slurp(d + "/fifo"); });
  Status written = Status::error("not yet");
  for (int tries = 0; tries < 500 && !written.ok(); ++tries) {
    written = writeFileAtomically(d + "/fifo", "through the pipe");
    if (!written.ok())
      ::usleep(10000); // the reader has not opened its end yet
  }
  reader.join();
  EXPECT_TRUE(written.ok()) << written.message();
  EXPECT_EQ(got, "through the pipe");
  ASSERT_EQ(::lstat((d + "/fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  // ... and without one: an error at once, not a wait.
  Status none = writeFileAtomically(d + "/fifo", "x");
  EXPECT_EQ(none.message(), d + "/fifo: cannot open: a FIFO no process reads");

  // An inherited descriptor, by /dev/fd/N and /proc/self/fd/N.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_TRUE(
      writeFileAtomically("/dev/fd/" + std::to_string(fds[1]), "one ").ok());
  ASSERT_TRUE(
      writeFileAtomically("/proc/self/fd/" + std::to_string(fds[1]), "two")
          .ok());
  ::close(fds[1]);
  char buf[64] = {0};
  ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  EXPECT_EQ(std::string(buf, n > 0 ? size_t(n) : 0), "one two");
  int ro = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(ro, 0);
  EXPECT_EQ(writeFileAtomically("/dev/fd/" + std::to_string(ro), "x").message(),
            "/dev/fd/" + std::to_string(ro) + ": descriptor " +
                std::to_string(ro) + " is not open for writing");
  ::close(ro);
}

// A link to a regular file keeps linking to it: the file it names is
// replaced. A directory, a missing directory and a trailing slash are
// errors naming the path.
TEST(Files, OutputsThroughLinksAndBadPaths) {
  std::string d = tempDir();
  touch(d + "/real", "old");
  ASSERT_EQ(::symlink("real", (d + "/link").c_str()), 0);
  ASSERT_TRUE(writeFileAtomically(d + "/link", "new").ok());
  EXPECT_TRUE(isLink(d + "/link"));
  EXPECT_EQ(slurp(d + "/real"), "new");
  EXPECT_NE(::access((d + "/real.tmp").c_str(), F_OK), 0);
  EXPECT_EQ(writeFileAtomically(d, "x").message(),
            d + ": is a directory; give a file name");
  EXPECT_EQ(writeFileAtomically(d + "/real/", "x").message(),
            d + "/real/: names a directory; give a file name");
  EXPECT_EQ(checkOutputPath("--trace", d + "/none/t.json").message(),
            "--trace: " + d + "/none/t.json: cannot create: directory '" + d +
                "/none': No such file or directory");
  EXPECT_TRUE(checkOutputPath("--trace", d + "/t.json").ok());
  EXPECT_TRUE(checkOutputPath("-o", "/dev/null").ok());
  EXPECT_TRUE(checkOutputPath("-o", "-").ok());
  // Two outputs may share /dev/null.
  EXPECT_TRUE(
      checkOutputs({{"--metrics", "/dev/null"}, {"--trace", "/dev/null"}}, {})
          .ok());
  ASSERT_EQ(::symlink("loop", (d + "/loop").c_str()), 0);
  EXPECT_EQ(writeFileAtomically(d + "/loop", "x").message(),
            d + "/loop: too many levels of symbolic links");
}

// Streams (metrics): a FIFO nobody reads is an error, not a wait; a file is
// appended to on request.
TEST(Files, OutputStreams) {
  std::string d = tempDir();
  ASSERT_EQ(::mkfifo((d + "/fifo").c_str(), 0644), 0);
  EXPECT_EQ(openOutputStream(d + "/fifo", false).message(),
            d + "/fifo: cannot open: a FIFO no process reads");
  touch(d + "/log", "a");
  Expected<int> fd = openOutputStream(d + "/log", true);
  ASSERT_TRUE(fd.ok()) << fd.message();
  ASSERT_EQ(::write(*fd, "b", 1), 1);
  ::close(*fd);
  EXPECT_EQ(slurp(d + "/log"), "ab");
  fd = openOutputStream(d + "/log", false);
  ASSERT_TRUE(fd.ok()) << fd.message();
  ::close(*fd);
  EXPECT_EQ(slurp(d + "/log"), "");
}

// Every spelling of one directory takes one lock; the current directory and
// those above it are refused (a checkpoint replaces its whole directory).
TEST(CheckpointLock, SpellingsAndTheCurrentDirectory) {
  std::string d = tempDir();
  Expected<driver::CheckpointLock> held =
      driver::CheckpointLock::acquire(d + "/ck");
  ASSERT_TRUE(held.ok()) << held.message();
  for (const std::string &other : {d + "/ck/.", d + "/./ck/", d + "/x/../ck"}) {
    Expected<driver::CheckpointLock> again =
        driver::CheckpointLock::acquire(other);
    ASSERT_FALSE(again.ok()) << other;
    EXPECT_NE(again.message().find("is being written by another mtc train"),
              std::string::npos)
        << again.message();
  }
  char here[4096];
  ASSERT_NE(::getcwd(here, sizeof here), nullptr);
  ::mkdir((d + "/sub").c_str(), 0755);
  ASSERT_EQ(::chdir((d + "/sub").c_str()), 0);
  for (const std::string &bad :
       {std::string("."), std::string("./"), std::string(".."), d + "/sub", d,
        std::string("/")}) {
    Expected<driver::CheckpointLock> l = driver::CheckpointLock::acquire(bad);
    EXPECT_FALSE(l.ok()) << bad;
    if (!l.ok()) {
      EXPECT_NE(l.message().find("is the current directory or one above it"),
                std::string::npos)
          << l.message();
    }
  }
  Expected<driver::CheckpointLock> inside =
      driver::CheckpointLock::acquire("ck");
  EXPECT_TRUE(inside.ok()) << inside.message();
  ASSERT_EQ(::chdir(here), 0);
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
