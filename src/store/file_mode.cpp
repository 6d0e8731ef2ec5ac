#include "store/file_mode.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>

namespace rcsweep::store {
namespace {

constexpr const char* acl_access = "system.posix_acl_access";
constexpr const char* acl_default = "system.posix_acl_default";

/// A file system that keeps no modes or owners (vfat, some CIFS and FUSE mounts) refuses with one
/// of these; then there is nothing to keep.
bool keeps_no_modes(int err) { return err == EPERM || err == ENOTSUP || err == EOPNOTSUPP || err == ENOSYS; }

/// An extended attribute of `path` (a symlink not followed); nullopt when it has none.
std::optional<std::string> xattr(const std::filesystem::path& path, const char* key) {
  for (int attempt = 0; attempt < 3; ++attempt) {  // the attribute may grow between the two calls
    const ssize_t n = ::lgetxattr(path.c_str(), key, nullptr, 0);
    if (n <= 0) return std::nullopt;
    std::string value(static_cast<std::size_t>(n), '\0');
    const ssize_t got = ::lgetxattr(path.c_str(), key, value.data(), value.size());
    if (got >= 0) return value.substr(0, static_cast<std::size_t>(got));
    if (errno != ERANGE) return std::nullopt;
  }
  return std::nullopt;
}

/// The permission bits a POSIX ACL in its extended-attribute form (a little-endian version 2,
/// then entries of tag, permission, id) gives a new file asked for with mode 0666: owner, mask
/// (or the owning group without one) and other entries. nullopt when it is not such an ACL.
std::optional<mode_t> mode_of_default_acl(const std::string& acl) {
  const auto u16 = [&](std::size_t at) {
    return static_cast<unsigned>(static_cast<unsigned char>(acl[at])) |
           static_cast<unsigned>(static_cast<unsigned char>(acl[at + 1])) << 8;
  };
  if (acl.size() < 4 || (acl.size() - 4) % 8 != 0 || u16(0) != 2 || u16(2) != 0) return std::nullopt;
  constexpr unsigned user_obj = 0x01, group_obj = 0x04, mask_tag = 0x10, other_tag = 0x20;  // <linux/posix_acl.h>
  std::optional<unsigned> user, group, mask, other;
  for (std::size_t at = 4; at < acl.size(); at += 8) {
    const unsigned perm = u16(at + 2) & 07;
    switch (u16(at)) {
      case user_obj: user = perm; break;
      case group_obj: group = perm; break;
      case mask_tag: mask = perm; break;
      case other_tag: other = perm; break;
      default: break;  // named users and groups: inside the mask
    }
  }
  if (!user || !group || !other) return std::nullopt;
  return static_cast<mode_t>((*user << 6 | (mask ? *mask : *group) << 3 | *other) & 0666);
}

void check_fchmod(int fd, mode_t mode, const std::string& name) {
  if (::fchmod(fd, mode) != 0 && !keeps_no_modes(errno))
    throw StoreError("cannot set the mode of " + name + ": " + std::strerror(errno));
}

}  // namespace

mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Umask:", 0) == 0) {
      char* end = nullptr;
      const unsigned long mask = std::strtoul(line.c_str() + 6, &end, 8);
      if (end != line.c_str() + 6 && mask <= 0777) return static_cast<mode_t>(mask);
    }
  // Linux before 4.7, or no /proc: a moment with umask 077, during which a file created by
  // another thread is made narrower, never wider.
  const mode_t mask = ::umask(077);
  ::umask(mask);
  return mask;
}

mode_t new_file_mode(const std::filesystem::path& dir) {
  const std::filesystem::path d = dir.empty() ? std::filesystem::path(".") : dir;
  if (const auto acl = xattr(d, acl_default))
    if (const auto mode = mode_of_default_acl(*acl)) return *mode;
  return 0666 & ~current_umask();
}

void give_new_file_mode(int fd, const std::filesystem::path& dir, const std::string& name) {
  check_fchmod(fd, new_file_mode(dir), name);
}

void keep_mode_and_owner(int fd, const std::filesystem::path& old_path, const struct stat& old,
                         const std::string& name) {
  struct stat now {};
  if (::fstat(fd, &now) != 0) throw StoreError("cannot look at " + name + ": " + std::strerror(errno));
  // Only root may give a file away; chown first, as it clears set-id bits.
  if (now.st_uid != old.st_uid && ::fchown(fd, old.st_uid, static_cast<gid_t>(-1)) != 0 && !keeps_no_modes(errno))
    throw StoreError("cannot set the owner of " + name + ": " + std::strerror(errno));
  const bool group_kept = now.st_gid == old.st_gid || ::fchown(fd, static_cast<uid_t>(-1), old.st_gid) == 0;
  check_fchmod(fd, group_kept ? old.st_mode & 0777 : old.st_mode & 0707, name);
  // Named users and groups of an extended ACL, whose entries (by uid and gid) carry over as they
  // are; not when the owning group changed, whose entry they include.
  if (!group_kept) return;
  if (const auto acl = xattr(old_path, acl_access))
    if (::fsetxattr(fd, acl_access, acl->data(), acl->size(), 0) != 0 && !keeps_no_modes(errno))
      throw StoreError("cannot set the access ACL of " + name + ": " + std::strerror(errno));
}

bool hdf5_lock_held_elsewhere(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool held = false;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    // HDF5 (1.10 and later) locks the whole file with flock: shared for a reader, exclusive for a
    // writer, held until the file is closed. EWOULDBLOCK is someone's lock; anything else (no
    // flock here) says nothing.
    int rc;
    while ((rc = ::flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
    }
    held = rc != 0 && errno == EWOULDBLOCK;
  }
  ::close(fd);  // releases the probe's lock, if it got one
  return held;
}

void refuse_open_elsewhere(const std::filesystem::path& target, const std::string& name) {
  if (hdf5_lock_held_elsewhere(target)) throw StoreError(open_elsewhere_message(name));
}

void refuse_unwritable_replacement(const std::filesystem::path& target, const std::string& name) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  if (::faccessat(AT_FDCWD, target.c_str(), W_OK, AT_EACCESS) == 0 || errno != EACCES) return;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  throw StoreError(name + " is not writable for you (mode " + mode +
                   "): a store is replaced (--overwrite, a growth, merge --overwrite) only by a user who may write "
                   "it; make it writable or write another store");
}

std::string open_elsewhere_message(const std::string& store) {
  return store +
         " is open in another program that holds HDF5's file lock on it (h5py in a notebook, h5dump, "
         "HDFView...): close it there, or open it with h5py.File(\"" +
         store + "\", \"r\", locking=False), and run again";
}

}  // namespace rcsweep::store
