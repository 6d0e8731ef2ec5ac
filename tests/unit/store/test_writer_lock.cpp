// The store's writer lock (store/writer_lock.hpp): one holder at a time, across processes and
// within one and whatever name leads to the store; released when its last copy goes or its holder
// dies; symlinks resolved; temporaries unique, and removed by a later writer only when its lock
// file recorded them; a file at the lock's name that rcsweep did not make is refused, untouched.
#include "store/writer_lock.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>
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

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

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

TEST_F(WriterLockTest, AUsersFilesWithATemporarysNameSurviveEveryWriter) {
  // Files a user made beside the store, whatever their names: nothing recorded them.
  for (const char* name : {"s.h5.partial-abc123", "s.h5.partial-report", "s.h5.partial-toolong1"})
    std::ofstream(dir / name) << "mine";
  fs::create_directory(dir / "s.h5.partial-dir000");
  for (int i = 0; i < 2; ++i) {
    const WriterLock lock = WriterLock::acquire(dir / "s.h5");
    remove_temporary(lock.make_temporary());
  }
  for (const char* name : {"s.h5.partial-abc123", "s.h5.partial-report", "s.h5.partial-toolong1"})
    EXPECT_EQ(read_file(dir / name), "mine") << name;
  EXPECT_TRUE(fs::is_directory(dir / "s.h5.partial-dir000"));
}

TEST_F(WriterLockTest, AKilledHoldersRecordedTemporariesAreRemovedByTheNextWriterOnly) {
  const fs::path store = dir / "s.h5";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // a writer killed while building: it made three temporaries and dies holding them
    const WriterLock lock = WriterLock::acquire(store);
    std::vector<fs::path> made;
    for (int i = 0; i < 3; ++i) made.push_back(lock.make_temporary());
    // The second one is replaced by a user's file of that name, the third by a directory.
    fs::remove(made[1]);
    std::ofstream(made[1]) << "a user's file";
    fs::remove(made[2]);
    fs::create_directory(made[2]);
    std::string names = made[0].string() + "\n" + made[1].string() + "\n" + made[2].string() + "\n";
    (void)!write(ready[1], names.data(), names.size());
    _exit(0);  // no destructor: the lock file and its record stay
  }
  close(ready[1]);
  std::string names;
  char buf[4096];
  for (ssize_t n; (n = read(ready[0], buf, sizeof buf)) > 0;) names.append(buf, static_cast<std::size_t>(n));
  close(ready[0]);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  std::vector<fs::path> made;
  for (std::size_t at = 0, nl; (nl = names.find('\n', at)) != std::string::npos; at = nl + 1)
    made.emplace_back(names.substr(at, nl - at));
  ASSERT_EQ(made.size(), 3u);
  ASSERT_TRUE(fs::exists(made[0]));
  std::ofstream(dir / "s.h5.partial-zzzzzz") << "mine";
  std::ofstream(dir / "t.h5.partial-abc123") << "another store's";
  { const WriterLock lock = WriterLock::acquire(store); }
  EXPECT_FALSE(fs::exists(made[0])) << "the killed writer's temporary";
  EXPECT_EQ(read_file(made[1]), "a user's file");
  EXPECT_TRUE(fs::is_directory(made[2]));
  EXPECT_TRUE(fs::exists(dir / "s.h5.partial-zzzzzz"));
  EXPECT_TRUE(fs::exists(dir / "t.h5.partial-abc123"));
  EXPECT_FALSE(fs::exists(dir / "s.h5.lock")) << "released: removed";
}

TEST_F(WriterLockTest, AForeignFileOrAHardLinkAtTheLockNameIsRefusedAndNeverTouched) {
  const std::string binary("\x89HDF\r\n\x1a\n\0\0\0\0 someone's data", 29);
  write_file(dir / "t.h5.lock", binary);
  try {
    WriterLock::acquire(dir / "t.h5");
    ADD_FAILURE() << "a foreign lock file was taken";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("t.h5.lock is not a writer lock of rcsweep"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("HDF"), std::string::npos) << "its bytes are not shown: " << e.what();
  }
  EXPECT_EQ(read_file(dir / "t.h5.lock"), binary);
  // Also while another program holds an flock on it: never shown as "the holder".
  {
    const int other = open((dir / "t.h5.lock").c_str(), O_RDONLY);
    ASSERT_EQ(flock(other, LOCK_EX), 0);
    try {
      WriterLock::acquire(dir / "t.h5");
      ADD_FAILURE() << "a foreign lock file was taken";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("is not a writer lock of rcsweep"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("HDF"), std::string::npos) << e.what();
    }
    close(other);
  }
  EXPECT_EQ(read_file(dir / "t.h5.lock"), binary);
  // A hard link of a user's file, with a lock file's content even.
  const std::string keep = "host h, pid 1, since 2020-01-01T00:00:00Z\n";
  write_file(dir / "keep.h5", keep);
  fs::create_hard_link(dir / "keep.h5", dir / "t3.h5.lock");
  EXPECT_THROW(WriterLock::acquire(dir / "t3.h5"), StoreError);
  EXPECT_EQ(read_file(dir / "keep.h5"), keep);
  EXPECT_EQ(fs::hard_link_count(dir / "keep.h5"), 2u);
}

TEST_F(WriterLockTest, AnEmptyLockFileIsWaitedForBrieflyThenRefused) {
  write_file(dir / "e.h5.lock", "");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(WriterLock::acquire(dir / "e.h5"), StoreError);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_TRUE(fs::exists(dir / "e.h5.lock"));
  EXPECT_EQ(fs::file_size(dir / "e.h5.lock"), 0u);
  // One that gets a holder's line meanwhile (a writer between making and writing it) is taken over.
  write_file(dir / "w.h5.lock", "");
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    write_file(dir / "w.h5.lock", "host h, pid 1, since 2020-01-01T00:00:00Z\n");
  });
  EXPECT_NO_THROW(WriterLock::acquire(dir / "w.h5"));
  writer.join();
}

TEST_F(WriterLockTest, AnOlderVersionsLockFileIsRecognisedAndTheHolderShownSanitised) {
  write_file(dir / "o.h5.lock", "host h, pid 1, since 2020-01-01T00:00:00Z\n");
  { EXPECT_NO_THROW(WriterLock::acquire(dir / "o.h5")); }  // a killed holder's: taken over
  write_file(dir / "o.h5.lock", "host evil\x1b]0;owned\x07\xff, pid 42, since 2020-01-01T00:00:00Z\n");
  const int other = open((dir / "o.h5.lock").c_str(), O_RDONLY);
  ASSERT_EQ(flock(other, LOCK_EX), 0);  // held by a live writer of an older version
  const std::string msg = busy_message(dir / "o.h5");
  EXPECT_NE(msg.find("o.h5 is being written by another rcsweep (host evil\\x1B]0;owned\\x07\\xFF, pid 42"),
            std::string::npos)
      << msg;
  for (const char c : msg) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << msg;
  close(other);
}

TEST_F(WriterLockTest, AStoreIsOneStoreWhateverNameLeadsToIt) {
  const fs::path store = dir / "s.h5";
  write_file(store, "a store");
  fs::create_hard_link(store, dir / "h.h5");
  std::optional<WriterLock> lock = WriterLock::acquire(store);
  const std::string msg = busy_message(dir / "h.h5");  // another lock file, the same inode
  EXPECT_NE(msg.find("h.h5 is being written by another rcsweep"), std::string::npos) << msg;
  // Its lock file removed by a "stale lock" clean-up: the store's own lock still refuses.
  fs::remove(dir / "s.h5.lock");
  EXPECT_NE(busy_message(store).find("is being written by another rcsweep"), std::string::npos);
  // The store replaced by a temporary (growth, --overwrite, merge): the new file is covered too.
  const fs::path temporary = lock->make_temporary();
  write_file(temporary, "a new store");
  fs::rename(temporary, store);
  fs::remove(dir / "h.h5");
  fs::create_hard_link(store, dir / "h.h5");
  EXPECT_NE(busy_message(dir / "h.h5").find("is being written by another rcsweep"), std::string::npos);
  lock.reset();
  EXPECT_NO_THROW(WriterLock::acquire(dir / "h.h5"));
  EXPECT_NO_THROW(WriterLock::acquire(store));
}

TEST_F(WriterLockTest, TheInodeLockOfAReplacedStoreIsLetGoSoItsSpaceIsFreed) {
  const fs::path store = dir / "s.h5";
  write_file(store, "the old store");
  struct stat old {};
  ASSERT_EQ(stat(store.c_str(), &old), 0);
  const WriterLock lock = WriterLock::acquire(store);
  const fs::path temporary = lock.make_temporary();
  write_file(temporary, "the new store");
  fs::rename(temporary, store);  // as Store::publish replaces it
  const auto open_on_old = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
      struct stat st {};
      if (stat(e.path().c_str(), &st) == 0 && st.st_dev == old.st_dev && st.st_ino == old.st_ino) ++n;
    }
    return n;
  };
  EXPECT_EQ(open_on_old(), 1) << "held until the replacement is noted";
  lock.release_unlinked();
  EXPECT_EQ(open_on_old(), 0);
  fs::create_hard_link(store, dir / "h.h5");
  EXPECT_FALSE(busy_message(dir / "h.h5").empty()) << "the new store is still covered";
}

TEST_F(WriterLockTest, StoreNamesUpToNameMaxWork) {
  for (const std::size_t n : {240u, 241u, 250u, 251u, 255u}) {
    const std::string name = std::string(n - 3, 'x') + ".h5";
    const WriterLock lock = WriterLock::acquire(dir / name);
    EXPECT_LE(lock.lock_path().filename().string().size(), 255u);
    const fs::path t = lock.make_temporary();
    EXPECT_LE(t.filename().string().size(), 255u);
    EXPECT_TRUE(fs::is_regular_file(t)) << n;
    EXPECT_FALSE(busy_message(dir / name).empty()) << n;
    remove_temporary(t);
  }
  // Two long names that share their first bytes have two lock files.
  const std::string stem(250, 'y');
  const WriterLock a = WriterLock::acquire(dir / (stem + "a.h5"));
  EXPECT_NO_THROW(WriterLock::acquire(dir / (stem + "b.h5")));
  EXPECT_NE(lock_file::lock_name(stem + "a.h5", 255), lock_file::lock_name(stem + "b.h5", 255));
  // Never cut inside a UTF-8 character.
  const std::string accents = std::string(249, 'z') + "\xC3\xA9\xC3\xA9\xC3\xA9";
  EXPECT_EQ(lock_file::temporary_prefix(accents, 255), std::string(240, 'z') + ".partial-");
}

TEST_F(WriterLockTest, InADirectoryTheUserCannotWriteAStoreIsResumedByItsOwnLock) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  fs::create_directories(dir / "ro");
  const fs::path store = dir / "ro" / "s.h5";
  write_file(store, "a store");
  fs::permissions(store, fs::perms::all);  // writable by everyone, its directory by root alone
  fs::permissions(dir / "ro", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(10);
    int code = 0;
    try {
      const WriterLock lock = WriterLock::acquire(store);
      if (!lock.lock_path().empty() || !lock.enforced()) code = 11;
      try {
        lock.make_temporary();
        code = 12;
      } catch (const StoreError& e) {
        if (std::string(e.what()).find("needs write access to directory " + (dir / "ro").string()) ==
            std::string::npos) {
          std::fprintf(stderr, "%s\n", e.what());
          code = 13;
        }
      }
      // A second writer, with a lock file or without, is refused by the store's own lock.
      const pid_t other = fork();
      if (other == 0) {
        try {
          WriterLock::acquire(store);
        } catch (const StoreBusy&) {
          _exit(0);
        }
        _exit(1);
      }
      int st = 0;
      waitpid(other, &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) code = 14;
    } catch (const std::exception&) {
      code = 15;
    }
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setuid, 11: no fallback, 12: a temporary was made, 13: the message, "
                                       "14: a second writer was let in, 15: refused";
  EXPECT_EQ(read_file(store), "a store");
  EXPECT_FALSE(fs::exists(dir / "ro" / "s.h5.lock"));
}

TEST_F(WriterLockTest, TheLockFileFormatRoundTripsAndRejectsWhatItDidNotWrite) {
  lock_file::Content c{"host h, pid 7, since 2020-01-01T00:00:00Z, launcher 9",
                       {{"s.h5.partial-abc123", 2049, 77}, {"a b%\n\xff.partial-x", 1, 2}}};
  const std::string text = lock_file::format(c);
  EXPECT_TRUE(text.starts_with(std::string(lock_file::first_line) + "\n"));
  const auto back = lock_file::parse(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->holder, c.holder);
  ASSERT_EQ(back->temporaries.size(), 2u);
  EXPECT_EQ(back->temporaries[1].name, c.temporaries[1].name);
  EXPECT_EQ(back->temporaries[0].ino, 77u);
  EXPECT_TRUE(lock_file::parse(text + "tail of a longer content"));
  EXPECT_FALSE(lock_file::parse(text.substr(0, text.size() - 4))) << "cut short";
  EXPECT_FALSE(lock_file::parse(""));
  EXPECT_FALSE(lock_file::parse("host h, pid x, since 2020-01-01T00:00:00Z"));
  EXPECT_FALSE(lock_file::parse("\x89HDF\r\n"));
  EXPECT_TRUE(lock_file::parse("host h, pid 1, since 2020-01-01T00:00:00Z, stopping\n"));
  EXPECT_EQ(lock_file::sanitise("a\x1b[2Jb\\\xc3\xa9\xff"), "a\\x1B[2Jb\\x5C\xc3\xa9\\xFF");
  EXPECT_EQ(lock_file::sanitise(std::string(1000, 'a'), 10), std::string(10, 'a') + "...");
}

TEST(Hdf5FileLocking, IsOffOnlyWhenTheEnvironmentSaysFalse) {
  const char* was = std::getenv("HDF5_USE_FILE_LOCKING");
  const std::string saved = was ? was : "";
  for (const char* v : {"FALSE", "0"}) {
    setenv("HDF5_USE_FILE_LOCKING", v, 1);
    EXPECT_TRUE(hdf5_file_locking_off()) << v;
  }
  for (const char* v : {"TRUE", "BEST_EFFORT", "1", "false"}) {  // HDF5 reads "false" as on
    setenv("HDF5_USE_FILE_LOCKING", v, 1);
    EXPECT_FALSE(hdf5_file_locking_off()) << v;
  }
  unsetenv("HDF5_USE_FILE_LOCKING");
  EXPECT_FALSE(hdf5_file_locking_off());
  if (was) setenv("HDF5_USE_FILE_LOCKING", saved.c_str(), 1);
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
