// The permissions of a store's file (store/file_mode.hpp): the mode a new file gets, compared with
// what open(2) gives one in the same directory; a replacement's mode, group and owner; the probe
// for another process's HDF5 (flock) lock.
#include "store/file_mode.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace rcsweep::store {
namespace {

namespace fs = std::filesystem;

class FileModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("rcsweep_mode_" + std::to_string(getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
    saved_mask = ::umask(022);
  }
  void TearDown() override {
    ::umask(saved_mask);
    fs::remove_all(dir);
  }
  fs::path dir;
  mode_t saved_mask = 022;
};

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

/// The mode open(2) gives a new file asked for with 0666 in `dir`.
mode_t open_gives(const fs::path& dir) {
  const fs::path p = dir / "by_open";
  const int fd = ::open(p.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
  EXPECT_GE(fd, 0);
  ::close(fd);
  const mode_t m = mode_of(p);
  fs::remove(p);
  return m;
}

/// A file made the way the store's temporary is: private.
int private_file(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0) << p;
  return fd;
}

TEST_F(FileModeTest, TheUmaskIsReadWithoutChangingIt) {
  for (const mode_t mask : {mode_t{022}, mode_t{027}, mode_t{077}, mode_t{002}, mode_t{0}}) {
    ::umask(mask);
    EXPECT_EQ(current_umask(), mask);
    EXPECT_EQ(::umask(mask), mask);  // still in force
  }
}

TEST_F(FileModeTest, ANewFileGetsWhatOpenGivesUnderEveryUmask) {
  for (const mode_t mask : {mode_t{022}, mode_t{027}, mode_t{077}, mode_t{002}}) {
    ::umask(mask);
    const mode_t want = open_gives(dir);
    EXPECT_EQ(new_file_mode(dir), want);
    const fs::path p = dir / ("f" + std::to_string(mask));
    const int fd = private_file(p);
    give_new_file_mode(fd, dir, p.string());
    ::close(fd);
    EXPECT_EQ(mode_of(p), want) << std::oct << mask;
  }
}

/// A POSIX ACL in its extended-attribute form: version 2, then (tag, permission, id) entries.
std::string acl(const std::vector<std::array<std::uint32_t, 3>>& entries) {
  std::string out;
  const auto put = [&](std::uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(2, 4);
  for (const auto& [tag, perm, id] : entries) {
    put(tag, 2);
    put(perm, 2);
    put(id, 4);
  }
  return out;
}

TEST_F(FileModeTest, ADirectoryDefaultAclGivesWhatOpenGives) {
  constexpr std::uint32_t none = 0xffffffff;
  // user::rw- group::r-- group:4243:rw- mask::rw- other::---, then without a mask entry.
  for (const auto& entries :
       {std::vector<std::array<std::uint32_t, 3>>{
            {0x01, 6, none}, {0x04, 4, none}, {0x08, 6, 4243}, {0x10, 6, none}, {0x20, 0, none}},
        std::vector<std::array<std::uint32_t, 3>>{{0x01, 6, none}, {0x04, 4, none}, {0x20, 4, none}}}) {
    const std::string value = acl(entries);
    if (::setxattr(dir.c_str(), "system.posix_acl_default", value.data(), value.size(), 0) != 0)
      GTEST_SKIP() << "no POSIX ACLs here";
    ::umask(077);  // ignored under a default ACL, by the kernel and by new_file_mode
    const mode_t want = open_gives(dir);
    EXPECT_EQ(new_file_mode(dir), want) << std::oct << want;
    EXPECT_NE(want, 0600u);
  }
}

TEST_F(FileModeTest, AReplacementGetsTheOldFilesModeGroupAndOwner) {
  const fs::path old = dir / "old.h5", repl = dir / "new.h5";
  ::close(private_file(old));
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown(old.c_str(), 4242, 100), 0);
  }
  ASSERT_EQ(::chmod(old.c_str(), 0654), 0);
  struct stat st {};
  ASSERT_EQ(::lstat(old.c_str(), &st), 0);
  const int fd = private_file(repl);
  keep_mode_and_owner(fd, old, st, repl.string());
  ::close(fd);
  struct stat now {};
  ASSERT_EQ(::stat(repl.c_str(), &now), 0);
  EXPECT_EQ(now.st_mode & 07777, 0654u);
  if (root) {
    EXPECT_EQ(now.st_uid, 4242u);
    EXPECT_EQ(now.st_gid, 100u);
  }
}

TEST_F(FileModeTest, AnotherProcesssLockIsSeenAndReleased) {
  const fs::path p = dir / "held.h5";
  ::close(private_file(p));
  EXPECT_FALSE(hdf5_lock_held_elsewhere(p));
  EXPECT_FALSE(hdf5_lock_held_elsewhere(dir / "missing.h5"));
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // a reader such as h5py: a shared lock held until it closes the file
    const int fd = ::open(p.c_str(), O_RDONLY);
    const bool locked = fd >= 0 && ::flock(fd, LOCK_SH) == 0;
    char c = locked ? '1' : '0';
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    if (::read(done[0], &c, 1) < 0) ::_exit(2);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, '1');
  EXPECT_TRUE(hdf5_lock_held_elsewhere(p));
  EXPECT_TRUE(hdf5_lock_held_elsewhere(p));  // the probe took nothing away
  ASSERT_EQ(::write(done[1], "x", 1), 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_FALSE(hdf5_lock_held_elsewhere(p));
  // The probe releases its own lock: a reader can lock the file at once.
  const int fd = ::open(p.c_str(), O_RDONLY);
  EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ::close(fd);
  for (int f : {ready[0], ready[1], done[0], done[1]}) ::close(f);
}

TEST_F(FileModeTest, AStoreItsUserMayNotWriteIsNotReplaced) {
  const fs::path p = dir / "ro.h5";
  ::close(private_file(p));
  EXPECT_NO_THROW(refuse_unwritable_replacement(p, "ro.h5"));
  EXPECT_NO_THROW(refuse_unwritable_replacement(dir / "missing.h5", "missing.h5"));
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(p.c_str(), 0444), 0);
  } else {  // root writes anything: the refusal is seen by user nobody, in a child
    ASSERT_EQ(::chown(p.c_str(), 65534, 65534), 0);
    ASSERT_EQ(::chmod(p.c_str(), 0444), 0);
    EXPECT_NO_THROW(refuse_unwritable_replacement(p, "ro.h5"));
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
      try {
        refuse_unwritable_replacement(p, "ro.h5");
      } catch (const StoreError& e) {
        ::_exit(std::string(e.what()).rfind("ro.h5 is not writable for you (mode 0444): ", 0) == 0 ? 0 : 1);
      }
      ::_exit(2);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    return;
  }
  try {
    refuse_unwritable_replacement(p, "ro.h5");
    ADD_FAILURE() << "not refused";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("ro.h5 is not writable for you (mode 0444): ", 0), 0u) << e.what();
  }
}

TEST_F(FileModeTest, TheRefusalNamesTheStoreAndWhatToDo) {
  const std::string msg = open_elsewhere_message("runs/a b.h5");
  EXPECT_EQ(msg.rfind("runs/a b.h5 is open in another program that holds HDF5's file lock on it", 0), 0u) << msg;
  EXPECT_NE(msg.find("h5py.File(\"runs/a b.h5\", \"r\", locking=False)"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rcsweep::store
