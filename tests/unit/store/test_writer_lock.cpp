// The store's writer lock (store/writer_lock.hpp): one holder at a time, across processes and
// within one; released when its last copy goes or its holder dies; symlinks resolved; temporaries
// unique and removed only when they are regular files.
#include "store/writer_lock.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rcsweep::store {
namespace {

namespace fs = std::filesystem;

class WriterLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("rcsweep_lock_" + std::to_string(getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
};

std::string busy_message(const fs::path& store) {
  try {
    WriterLock::acquire(store);
  } catch (const StoreBusy& e) {
    return e.what();
  }
  return "";
}

TEST_F(WriterLockTest, OneHolderAtATimeAndCopiesShareTheClaim) {
  const fs::path store = dir / "s.h5";
  std::optional<WriterLock> first = WriterLock::acquire(store);
  EXPECT_TRUE(first->enforced());
  EXPECT_TRUE(fs::is_regular_file(dir / "s.h5.lock"));
  const std::string msg = busy_message(store);
  EXPECT_NE(msg.find("s.h5 is being written by another rcsweep (host "), std::string::npos) << msg;
  EXPECT_NE(msg.find(", pid " + std::to_string(getpid()) + ", since "), std::string::npos) << msg;
  std::optional<WriterLock> copy = *first;
  first.reset();  // the copy still holds it
  EXPECT_FALSE(busy_message(store).empty());
  copy.reset();  // the last copy: released, the lock file removed
  EXPECT_FALSE(fs::exists(dir / "s.h5.lock"));
  EXPECT_NO_THROW(WriterLock::acquire(store));
}

TEST_F(WriterLockTest, AnotherProcessIsRefusedUntilTheHolderDies) {
  const fs::path store = dir / "s.h5";
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const WriterLock lock = WriterLock::acquire(store);
    char c = 1;
    (void)!write(ready[1], &c, 1);
    (void)!read(done[0], &c, 1);  // until the parent says so; then die without releasing
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const std::string msg = busy_message(store);
  EXPECT_NE(msg.find(", pid " + std::to_string(child) + ", since "), std::string::npos) << msg;
  ASSERT_EQ(write(done[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // The child ended with its lock file still there (_exit runs no destructor): the kernel dropped
  // the flock, so the file is taken over.
  EXPECT_TRUE(fs::exists(dir / "s.h5.lock"));
  EXPECT_NO_THROW(WriterLock::acquire(store));
  for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
}

/// A child that holds the store's lock until the parent writes to `go`, then calls `then` and
/// exits 0.5 s later without releasing (as a rank that flushes and exits).
pid_t hold_in_child(const fs::path& store, int ready_fd, int go_fd,
                    const std::function<void(const WriterLock&)>& then) {
  const pid_t child = fork();
  if (child != 0) return child;
  const WriterLock lock = WriterLock::acquire(store);
  char c = 1;
  (void)!write(ready_fd, &c, 1);
  (void)!read(go_fd, &c, 1);
  then(lock);
  usleep(500000);
  _exit(0);
}

TEST_F(WriterLockTest, AWriterWaitsForAHolderThatIsStoppingOrWhoseLauncherIsGone) {
  const fs::path store = dir / "s.h5";
  for (const bool stopping : {true, false}) {
    int ready[2], go[2];
    ASSERT_EQ(pipe(ready), 0);
    ASSERT_EQ(pipe(go), 0);
    pid_t launcher = 0;
    if (!stopping) {  // a "launcher" that is dead by the time the holder is met
      launcher = fork();
      if (launcher == 0) _exit(0);
      ASSERT_EQ(waitpid(launcher, nullptr, 0), launcher);
      setenv(launcher_pid_env, std::to_string(launcher).c_str(), 1);
    }
    const pid_t child = hold_in_child(store, ready[1], go[0], [&](const WriterLock& lock) {
      if (stopping) lock.note_stopping();
    });
    unsetenv(launcher_pid_env);
    char c = 0;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    if (stopping) {  // not stopping yet: refused at once, even when waiting is allowed
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_THROW(WriterLock::acquire(store, 5.0), StoreBusy);
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
    }
    ASSERT_EQ(write(go[1], &c, 1), 1);
    usleep(100000);  // the child has noted it is stopping
    std::vector<std::string> told;
    EXPECT_THROW(WriterLock::acquire(store), StoreBusy) << "no wait asked: refused";
    EXPECT_NO_THROW(WriterLock::acquire(store, 5.0, [&](const std::string& h) { told.push_back(h); }));
    ASSERT_EQ(told.size(), 1u);
    EXPECT_NE(told[0].find(", pid " + std::to_string(child) + ", since "), std::string::npos) << told[0];
    if (!stopping) {
      EXPECT_NE(told[0].find(", launcher " + std::to_string(launcher) + "; its launcher is gone"), std::string::npos)
          << told[0];
    }
    waitpid(child, nullptr, 0);
    for (int fd : {ready[0], ready[1], go[0], go[1]}) close(fd);
  }
}

TEST_F(WriterLockTest, SymlinksLeadToOneLockAndLoopsAreRefused) {
  fs::create_directories(dir / "data");
  const fs::path real = dir / "data" / "s.h5";
  std::ofstream(real) << "x";
  fs::create_symlink("data/s.h5", dir / "a.h5");   // relative to the link's folder
  fs::create_symlink(dir / "a.h5", dir / "b.h5");  // a chain
  EXPECT_EQ(resolve_store_path(dir / "b.h5"), real);
  EXPECT_EQ(resolve_store_path(dir / "new.h5"), dir / "new.h5");
  const WriterLock lock = WriterLock::acquire(dir / "b.h5");
  EXPECT_EQ(lock.path(), real);
  EXPECT_EQ(lock.given(), dir / "b.h5");
  EXPECT_TRUE(fs::exists(dir / "data" / "s.h5.lock"));
  EXPECT_FALSE(busy_message(real).empty());
  fs::create_symlink("loop2.h5", dir / "loop1.h5");
  fs::create_symlink("loop1.h5", dir / "loop2.h5");
  EXPECT_THROW(resolve_store_path(dir / "loop1.h5"), StoreError);
  EXPECT_THROW(WriterLock::acquire(dir / "missing" / "s.h5"), StoreError);
}

TEST_F(WriterLockTest, ALockFileThatIsNotARegularFileIsRefusedNotFollowed) {
  ASSERT_EQ(mkfifo((dir / "f.h5.lock").c_str(), 0600), 0);
  EXPECT_THROW(WriterLock::acquire(dir / "f.h5"), StoreError);  // and does not block on the FIFO
  fs::create_symlink(dir / "victim", dir / "l.h5.lock");
  EXPECT_THROW(WriterLock::acquire(dir / "l.h5"), StoreError);
  EXPECT_FALSE(fs::exists(dir / "victim"));
}

TEST_F(WriterLockTest, TemporariesAreUniqueAndOnlyRegularFilesAreRemoved) {
  const WriterLock lock = WriterLock::acquire(dir / "s.h5");
  std::set<fs::path> names;
  for (int i = 0; i < 20; ++i) names.insert(lock.make_temporary());
  EXPECT_EQ(names.size(), 20u);
  for (const auto& p : names) {
    EXPECT_EQ(p.parent_path(), dir);
    EXPECT_TRUE(p.filename().string().starts_with("s.h5.partial-")) << p;
    remove_temporary(p);
    EXPECT_FALSE(fs::exists(p));
  }
  const fs::path fifo = dir / "s.h5.partial-fifo00";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  remove_temporary(fifo);
  EXPECT_TRUE(fs::exists(fs::symlink_status(fifo)));
}

TEST_F(WriterLockTest, TheNextWriterRemovesLeftoverTemporariesOfItsStoreOnly) {
  std::ofstream(dir / "s.h5.partial-abc123") << "left by a killed run";
  std::ofstream(dir / "s.h5.partial-toolong1") << "not a name rcsweep makes";
  std::ofstream(dir / "t.h5.partial-abc123") << "another store's";
  fs::create_directory(dir / "s.h5.partial-dir000");
  { const WriterLock lock = WriterLock::acquire(dir / "s.h5"); }
  EXPECT_FALSE(fs::exists(dir / "s.h5.partial-abc123"));
  EXPECT_TRUE(fs::exists(dir / "s.h5.partial-toolong1"));
  EXPECT_TRUE(fs::exists(dir / "t.h5.partial-abc123"));
  EXPECT_TRUE(fs::is_directory(dir / "s.h5.partial-dir000"));
}

TEST_F(WriterLockTest, SameFileComparesInodesThroughLinks) {
  std::ofstream(dir / "a") << "a";
  std::ofstream(dir / "b") << "b";
  fs::create_symlink(dir / "a", dir / "l");
  fs::create_hard_link(dir / "a", dir / "h");
  EXPECT_TRUE(same_file(dir / "a", dir / "l"));
  EXPECT_TRUE(same_file(dir / "a", dir / "h"));
  EXPECT_FALSE(same_file(dir / "a", dir / "b"));
  EXPECT_FALSE(same_file(dir / "a", dir / "missing"));
}

}  // namespace
}  // namespace rcsweep::store
