#include "store/writer_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <string_view>
#include <system_error>
#include <thread>

namespace rcsweep::store {
namespace {

namespace fs = std::filesystem;

constexpr int max_symlinks = 40;                           // as the kernel's path walk (MAXSYMLINKS)
constexpr int max_claim_attempts = 100;                    // the lock file replaced between open and flock, each time
constexpr std::string_view stopping_mark = ", stopping";   // the holder's line once it stops
constexpr std::string_view launcher_mark = ", launcher ";  // then the pid of `rcsweep run -n`
constexpr double unreadable_wait_s = 1.0;        // how long a lock file may stay empty or cut short (being written)
constexpr std::size_t max_lock_bytes = 1 << 16;  // a lock file longer than this is not one rcsweep wrote
constexpr off_t inode_lock_at = off_t{1} << 62;  // the byte of the store file that its OFD lock covers
constexpr std::string_view end_line = "end";

std::string errno_text(int err) { return std::strerror(err); }

std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

std::string this_holder() {
  char when[32] = {};
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::string host = host_name();
  for (char& c : host)
    if (c == ',' || c == '\n') c = '_';  // the holder's line stays one parseable line
  std::string text = "host " + host + ", pid " + std::to_string(getpid()) + ", since " + when;
  // Under `rcsweep run -n` (cli/launch.hpp): the launcher's pid, so that a writer that meets the
  // lock after the launcher was killed knows these ranks are about to let go.
  if (const char* launcher = std::getenv(launcher_pid_env); launcher && all_digits(launcher))
    text += std::string(launcher_mark) + launcher;
  return text;
}

/// Whether `line` is a holder's line: "host H, pid P, since T[, launcher L][, stopping]".
bool holder_line(std::string_view line) {
  if (!line.starts_with("host ") || line.find('\n') != std::string_view::npos) return false;
  const auto pid = line.find(", pid ");
  if (pid == std::string_view::npos || pid == 5) return false;
  std::string_view rest = line.substr(pid + 6);
  const auto since = rest.find(", since ");
  if (since == std::string_view::npos || !all_digits(rest.substr(0, since))) return false;
  rest = rest.substr(since + 8);
  const auto stamp = rest.find_first_not_of("0123456789-:TZ");
  if (stamp == 0) return false;
  rest = stamp == std::string_view::npos ? std::string_view() : rest.substr(stamp);
  if (rest.starts_with(launcher_mark)) {
    rest = rest.substr(launcher_mark.size());
    const auto digits = rest.find_first_not_of("0123456789");
    if (digits == 0) return false;
    rest = digits == std::string_view::npos ? std::string_view() : rest.substr(digits);
  }
  if (rest.starts_with(stopping_mark)) rest = rest.substr(stopping_mark.size());
  return rest.empty();
}

/// Whether process `pid` exists and is not a zombie (killed, not yet reaped by its parent).
bool running(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // no /proc: kill(2) said it exists
  const auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

/// Whether `holder` (a lock file's line) is a run on this host whose launcher is dead: its ranks
/// stop at once and let go of the store within about a second (docs/GUARANTEES.md "The launcher").
bool orphaned(const std::string& holder) {
  const auto at = holder.find(launcher_mark);
  if (at == std::string::npos || !holder.starts_with("host " + host_name() + ", ")) return false;
  const long pid = std::strtol(holder.c_str() + at + launcher_mark.size(), nullptr, 10);
  return pid > 0 && !running(static_cast<pid_t>(pid));
}

/// The lock file's bytes (at most max_lock_bytes + 1 of them).
std::string read_all(int fd) {
  std::string bytes(max_lock_bytes + 1, '\0');
  std::size_t n = 0;
  while (n < bytes.size()) {
    const ssize_t got = ::pread(fd, bytes.data() + n, bytes.size() - n, static_cast<off_t>(n));
    if (got <= 0) break;
    n += static_cast<std::size_t>(got);
  }
  bytes.resize(n);
  return bytes;
}

/// Write `text` over the lock file from its start, then cut what a longer content left after it
/// (parse ignores it meanwhile: it stops at the "end" line).
void write_content(int fd, const std::string& text) noexcept {
  if (::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()))
    (void)!::ftruncate(fd, static_cast<off_t>(text.size()));
}

/// flock(2) is not available on this file system (some Lustre and NFS mounts).
bool locking_unsupported(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL; }

/// The directory refuses new names: no write access, a read-only mount.
bool no_write_access(int err) { return err == EACCES || err == EPERM || err == EROFS; }

std::size_t name_max_of(const fs::path& dir) {
  const long n = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  return n > 0 ? static_cast<std::size_t>(n) : NAME_MAX;
}

/// `name` cut to at most `n` bytes, not inside a UTF-8 character.
std::string utf8_prefix(const std::string& name, std::size_t n) {
  if (name.size() <= n) return name;
  while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80) --n;
  return name.substr(0, n);
}

/// The OFD write lock on one byte of an open file: 0 when taken, else errno (EAGAIN: held).
int ofd_lock(int fd, short type, int cmd = F_OFD_SETLK) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = inode_lock_at;
  fl.l_len = 1;
  if (::fcntl(fd, cmd, &fl) != 0) return errno == EACCES ? EAGAIN : errno;
  if (cmd == F_OFD_GETLK && fl.l_type != F_UNLCK) return EAGAIN;
  return 0;
}

bool held_elsewhere(int err) { return err == EAGAIN; }

std::string other_name_busy(const std::string& given) {
  return given +
         " is being written by another rcsweep under another name of the same file (a hard link, a bind mount or a "
         "symbolic link); wait for it to finish or stop it, or write another store";
}

/// Remove the temporaries that a killed holder recorded in its lock file (owned by `owner`): only
/// a regular file at the recorded name with the recorded device and inode and the lock file's
/// owner, never anything else.
void remove_recorded(const fs::path& dir, const lock_file::Content& c, uid_t owner) {
  for (const auto& t : c.temporaries) {
    if (t.name.empty() || t.name.find('/') != std::string::npos || t.name == "." || t.name == "..") continue;
    const fs::path p = dir / t.name;
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == static_cast<dev_t>(t.dev) &&
        st.st_ino == static_cast<ino_t>(t.ino) && st.st_uid == owner)
      ::unlink(p.c_str());
  }
}

}  // namespace

struct WriterLock::Held {
  fs::path given, path, dir, lock_path;
  std::string holder;    // this process's line in the lock file
  int fd = -1;           // the lock file (flock held), or -1
  bool writable = true;  // the lock file was opened for writing (its content is ours)
  bool enforced = true;
  bool inode_locks = true;  // OFD locks on the store's inodes are independent of HDF5's flock here
  dev_t dev = 0;
  ino_t ino = 0;
  mutable std::mutex mutex;  // content and inode_fds: note_stopping may come from another thread
  mutable lock_file::Content content;
  mutable bool stopping = false;
  mutable std::vector<int> inode_fds;  // OFD-locked: the store and every temporary made

  Held() = default;
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  ~Held() {
    for (const int f : inode_fds) ::close(f);
    if (fd < 0) return;
    // Remove the lock file while still holding it, and only if it is still ours: a process that
    // opened it meanwhile finds it gone once it gets the lock, and makes a new one.
    struct stat st {};
    if (enforced && writable && !lock_path.empty() && ::stat(lock_path.c_str(), &st) == 0 && st.st_dev == dev &&
        st.st_ino == ino)
      ::unlink(lock_path.c_str());
    ::close(fd);
  }

  void write_lock_file() const {
    if (fd < 0 || !writable) return;
    lock_file::Content c = content;
    if (stopping) c.holder += stopping_mark;
    write_content(fd, lock_file::format(c));
  }
};

namespace {

/// Whether an OFD lock and flock(2) are independent on the lock file's file system: with the
/// lock file's flock held on `fd`, an OFD lock on another open file description of it must be
/// granted. Where flock is emulated with POSIX locks (NFS) it is not, and neither would HDF5's
/// flock of a store file be beside the store's OFD lock: then no inode locks are taken.
bool ofd_beside_flock(const fs::path& lock_path) {
  const int other = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (other < 0) return false;
  const bool ok = ofd_lock(other, F_RDLCK) == 0;
  ::close(other);
  return ok;
}

/// The store's own inode lock (a store that exists and is a regular file): an OFD write lock held
/// through `held.inode_fds`. Throws StoreBusy when another writer holds it under another name.
/// Returns whether the store is now covered by it.
bool lock_store_inode(WriterLock::Held& held) {
  struct stat st {};
  if (::lstat(held.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  bool read_only = false;
  int f = ::open(held.path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (f < 0 && no_write_access(errno)) {
    read_only = true;  // --overwrite of a store the user may not write: look, do not lock
    f = ::open(held.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  }
  if (f < 0) return false;
  struct stat now {};
  if (::fstat(f, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
    ::close(f);
    return false;  // replaced meanwhile: not the store this claim is about (check_output decides)
  }
  const int err = read_only ? ofd_lock(f, F_WRLCK, F_OFD_GETLK) : ofd_lock(f, F_WRLCK);
  if (held_elsewhere(err)) {
    ::close(f);
    throw StoreBusy(other_name_busy(held.given.string()));
  }
  if (err != 0 || read_only) {
    ::close(f);
    return false;
  }
  held.inode_fds.push_back(f);
  return true;
}

/// Without a lock file, whether the store's OFD lock (held on held.inode_fds.back()) lets HDF5's
/// flock through: a flock of another open file description must be granted, or else be refused
/// for another reason than our own lock (another program holding HDF5's lock).
bool store_lock_beside_flock(WriterLock::Held& held) {
  const int probe = ::open(held.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (probe < 0) return true;
  bool ok = ::flock(probe, LOCK_SH | LOCK_NB) == 0;
  if (!ok) {  // emulated (our own OFD lock refuses it), or another program's HDF5 lock?
    const int ours = held.inode_fds.back();
    ofd_lock(ours, F_UNLCK);
    const bool alone = ::flock(probe, LOCK_SH | LOCK_NB) == 0;
    ok = !alone;
    if (ok && ofd_lock(ours, F_WRLCK) != 0) ok = false;
  }
  ::close(probe);  // drops the probe's flock
  return ok;
}

enum class Made { held, exists, no_access };

/// Make the lock file with `text` in place before it has its name (O_TMPFILE, then linkat), or
/// where that is not supported by O_EXCL, then flock and write. On Made::held `fd` holds it.
Made create_lock_file(WriterLock::Held& held, const std::string& text, int& fd, int& lock_errno) {
  const std::string lock = held.lock_path.string();
  lock_errno = 0;
  int t = ::open(held.dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
  if (t >= 0) {
    bool linked = false;
    if (::pwrite(t, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size())) {
      if (::flock(t, LOCK_EX | LOCK_NB) != 0) lock_errno = errno;
      const std::string proc = "/proc/self/fd/" + std::to_string(t);
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, lock.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        linked = true;
      } else if (errno == EEXIST) {
        ::close(t);
        return Made::exists;
      }
    }
    if (linked) {
      fd = t;
      return Made::held;
    }
    ::close(t);  // no /proc, or linkat refused: make it by name
    lock_errno = 0;
  } else if (no_write_access(errno)) {
    return Made::no_access;
  }
  fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return Made::exists;
    if (no_write_access(errno)) return Made::no_access;
    throw StoreError("cannot make the writer lock " + lock + " of " + held.given.string() + ": " + errno_text(errno));
  }
  // Empty until written: a writer that flocks it meanwhile sees it empty, lets go and waits.
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(unreadable_wait_s);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      lock_errno = errno;
      break;
    }
    if (std::chrono::steady_clock::now() > until) {
      ::close(fd);
      return Made::exists;  // then it is treated as any lock file met
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  write_content(fd, text);
  return Made::held;
}

std::string not_ours(const std::string& lock, const std::string& why) {
  return lock + " is not a writer lock of rcsweep (" + why + "); rcsweep does not touch it: move it away";
}

}  // namespace

fs::path resolve_store_path(const fs::path& given) {
  fs::path p = given;
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return p;  // a new store (or a link to one not made yet)
      throw StoreError(given.string() + ": " + errno_text(errno));
    }
    if (!S_ISLNK(st.st_mode)) return p;
    if (hops == max_symlinks) throw StoreError(given.string() + ": " + errno_text(ELOOP));
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) throw StoreError(given.string() + ": " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
}

WriterLock WriterLock::acquire(const fs::path& given, double stopping_wait_s,
                               const std::function<void(const std::string&)>& waiting) {
  auto held = std::make_shared<Held>();
  held->given = given;
  held->path = resolve_store_path(given);
  const fs::path parent = held->path.parent_path();
  held->dir = parent.empty() ? fs::path(".") : parent;
  const std::string store_name = held->path.filename().string();
  held->lock_path = parent / lock_file::lock_name(store_name, name_max_of(held->dir));
  const std::string g = given.string(), lock = held->lock_path.string();
  std::error_code ec;
  if (!parent.empty() && !fs::is_directory(parent, ec))
    throw StoreError("cannot create " + g + ": directory " + parent.string() + " does not exist");
  held->holder = this_holder();
  held->content.holder = held->holder;
  const std::string text = lock_file::format(held->content);

  const auto clock = [] { return std::chrono::steady_clock::now(); };
  const auto wait_until = clock() + std::chrono::duration<double>(stopping_wait_s);
  std::optional<std::chrono::steady_clock::time_point> unreadable_since;  // the lock file empty or cut short
  const auto unreadable_for_long = [&] {
    if (!unreadable_since) unreadable_since = clock();
    return clock() - *unreadable_since > std::chrono::duration<double>(unreadable_wait_s);
  };
  bool told = false, fallback = false;
  for (int attempt = 0;; ++attempt) {
    if (attempt == max_claim_attempts) throw StoreBusy(g + ": its writer lock " + lock + " keeps changing");
    // O_NONBLOCK: a FIFO under the lock's name must not block the open.
    bool writable = true;
    int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0 && no_write_access(errno)) {  // another user's lock file: it can still be locked and read
      writable = false;
      fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    }
    if (fd < 0 && errno == ENOENT) {
      int lock_errno = 0;
      const Made made = create_lock_file(*held, text, fd, lock_errno);
      if (made == Made::exists) continue;
      if (made == Made::no_access) {
        struct stat st {};
        if (::lstat(held->path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
          fallback = true;  // an existing store in a directory the user cannot write: its inode lock alone
          held->lock_path.clear();
          break;
        }
        throw StoreError("cannot make the writer lock " + lock + " of " + g + ": " + errno_text(EACCES) +
                         " (it needs write access to directory " + held->dir.string() + ")");
      }
      struct stat st {};
      ::fstat(fd, &st);
      held->fd = fd;
      held->dev = st.st_dev;
      held->ino = st.st_ino;
      held->enforced = lock_errno == 0;
      if (lock_errno != 0 && !locking_unsupported(lock_errno)) {
        ::close(fd);
        held->fd = -1;
        throw StoreError("cannot lock " + lock + " of " + g + ": " + errno_text(lock_errno));
      }
      break;
    }
    if (fd < 0)
      throw StoreError("cannot make the writer lock " + lock + " of " + g + ": " + errno_text(errno) +
                       (errno == ELOOP ? " (it is a symbolic link)" : ""));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw StoreError("the writer lock " + lock + " of " + g + " is not a regular file; remove it");
    }
    if (st.st_nlink != 1) {
      ::close(fd);
      throw StoreError(not_ours(lock, "it has " + std::to_string(st.st_nlink) + " names: a hard link"));
    }
    bool locked = true;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err != EWOULDBLOCK && !locking_unsupported(err)) {
        ::close(fd);
        throw StoreError("cannot lock " + lock + " of " + g + ": " + errno_text(err));
      }
      if (err == EWOULDBLOCK) {
        const std::string bytes = read_all(fd);
        ::close(fd);
        const auto content = lock_file::parse(bytes);
        if (!content) {  // being written (a holder between making and writing it), or not ours
          if (!unreadable_for_long()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            attempt = -1;
            continue;
          }
          throw StoreError(not_ours(lock, bytes.empty() ? "it stays empty, locked by another program"
                                                        : "its content is not rcsweep's, locked by another program"));
        }
        std::string holder = content->holder;
        if ((holder.ends_with(stopping_mark) || orphaned(holder)) && clock() < wait_until) {
          if (!told && waiting)
            waiting(lock_file::sanitise(holder.ends_with(stopping_mark)
                                            ? holder.substr(0, holder.size() - stopping_mark.size())
                                            : holder + "; its launcher is gone"));
          told = true;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          attempt = -1;  // a stopping holder is not a lock file that keeps changing
          continue;
        }
        throw StoreBusy(g + " is being written by another rcsweep (" + lock_file::sanitise(holder) +
                        "); wait for it to finish or stop it, or write another store");
      }
      locked = false;  // no flock on this file system: nothing to compare, the claim is not enforced
      held->enforced = false;
    } else {
      // Ours only if the name still leads to the file locked: its holder may have removed it
      // between our open and our flock.
      struct stat now {};
      if (::stat(lock.c_str(), &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
        ::close(fd);
        continue;
      }
    }
    const std::string bytes = read_all(fd);
    const auto content = lock_file::parse(bytes);
    if (!content) {
      ::close(fd);
      if (bytes.empty() && !unreadable_for_long()) {  // a writer between making it and writing it
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        attempt = -1;
        continue;
      }
      throw StoreError(not_ours(lock, bytes.empty() ? "it stays empty" : "a file it did not make"));
    }
    // A killed holder's lock file: take it over, and remove the temporaries it recorded.
    if (locked) remove_recorded(held->dir, *content, st.st_uid);
    if (!writable && locked) {
      // Another user's lock file: make our own instead when the directory lets us, while holding it.
      if (::unlink(lock.c_str()) == 0) {
        ::close(fd);
        continue;
      }
    }
    held->fd = fd;
    held->writable = writable;
    held->dev = st.st_dev;
    held->ino = st.st_ino;
    held->write_lock_file();
    break;
  }
  if (fallback) {
    held->enforced = lock_store_inode(*held) && store_lock_beside_flock(*held);
  } else {
    held->inode_locks = held->enforced && ofd_beside_flock(held->lock_path);
    if (held->inode_locks) lock_store_inode(*held);
  }
  WriterLock out;
  out.held_ = std::move(held);
  return out;
}

void WriterLock::note_stopping() const noexcept {
  std::lock_guard<std::mutex> guard(held_->mutex);
  held_->stopping = true;
  held_->write_lock_file();
}

void WriterLock::release_unlinked() const noexcept {
  std::lock_guard<std::mutex> guard(held_->mutex);
  auto& fds = held_->inode_fds;
  for (auto it = fds.begin(); it != fds.end();) {
    struct stat st {};
    if (::fstat(*it, &st) == 0 && st.st_nlink == 0) {  // no name leads to it: nobody can claim it
      ::close(*it);
      it = fds.erase(it);
    } else {
      ++it;
    }
  }
}

const fs::path& WriterLock::given() const { return held_->given; }
const fs::path& WriterLock::path() const { return held_->path; }
const fs::path& WriterLock::lock_path() const { return held_->lock_path; }
bool WriterLock::enforced() const { return held_->enforced; }

fs::path WriterLock::make_temporary() const {
  release_unlinked();
  const Held& h = *held_;
  const std::string prefix = lock_file::temporary_prefix(h.path.filename().string(), name_max_of(h.dir));
  std::string name = (h.path.parent_path() / prefix).string() + "XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string g = h.given.string();
    if (no_write_access(err))
      throw StoreError(g + " needs write access to directory " + h.dir.string() + " (" + errno_text(err) +
                       "): a new store, a growth, --overwrite and merge write a new file beside it");
    throw StoreError("cannot create " + g + ": " + errno_text(err));
  }
  struct stat st {};
  ::fstat(fd, &st);
  std::lock_guard<std::mutex> guard(h.mutex);
  h.content.temporaries.push_back({fs::path(name).filename().string(), static_cast<unsigned long long>(st.st_dev),
                                   static_cast<unsigned long long>(st.st_ino)});
  h.write_lock_file();
  // The temporary may become the store (rename): lock its inode as the store's.
  if (h.inode_locks && ofd_lock(fd, F_WRLCK) == 0)
    h.inode_fds.push_back(fd);
  else
    ::close(fd);
  return name;
}

void remove_temporary(const fs::path& temporary) noexcept {
  struct stat st {};
  if (::lstat(temporary.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(temporary.c_str());
}

void fsync_directory(const fs::path& file) noexcept {
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

bool same_file(const fs::path& a, const fs::path& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool hdf5_file_locking_off() {
  const char* v = std::getenv("HDF5_USE_FILE_LOCKING");
  // As HDF5 1.10 reads it (H5F__parse_file_lock_env_var): "FALSE" or "0", case-sensitive.
  return v && (std::string_view(v) == "FALSE" || std::string_view(v) == "0");
}

namespace lock_file {
namespace {

/// A name byte kept as it is in a lock file's line (printable, no space, no '%').
bool plain(unsigned char c) { return c > 0x20 && c < 0x7f && c != '%'; }

std::string encode_name(const std::string& name) {
  std::string out;
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (plain(c)) {
      out += ch;
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

std::optional<std::string> decode_name(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      if (!plain(static_cast<unsigned char>(s[i]))) return std::nullopt;
      out += s[i];
      continue;
    }
    if (i + 3 > s.size()) return std::nullopt;
    unsigned v = 0;
    for (std::size_t k = 1; k <= 2; ++k) {
      const char h = s[i + k];
      v *= 16;
      if (h >= '0' && h <= '9')
        v += static_cast<unsigned>(h - '0');
      else if (h >= 'A' && h <= 'F')
        v += static_cast<unsigned>(h - 'A' + 10);
      else
        return std::nullopt;
    }
    out += static_cast<char>(v);
    i += 2;
  }
  return out;
}

std::optional<unsigned long long> number(std::string_view s) {
  if (!all_digits(s) || s.size() > 20) return std::nullopt;
  return std::strtoull(std::string(s).c_str(), nullptr, 10);
}

/// The length of the valid UTF-8 character at the start of `s`, 0 if none.
std::size_t utf8_char(std::string_view s) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  std::size_t n = 0;
  unsigned min = 0, cp = 0;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2, min = 0x80, cp = c & 0x1Fu;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, min = 0x800, cp = c & 0x0Fu;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, min = 0x10000, cp = c & 0x07u;
  else
    return 0;
  if (s.size() < n) return 0;
  for (std::size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

std::string format(const Content& c) {
  std::string out = std::string(first_line) + "\n" + c.holder + "\n";
  for (const auto& t : c.temporaries)
    out += "temporary " + std::to_string(t.dev) + " " + std::to_string(t.ino) + " " + encode_name(t.name) + "\n";
  return out + std::string(end_line) + "\n";
}

std::optional<Content> parse(std::string_view bytes) {
  if (bytes.size() > max_lock_bytes) return std::nullopt;
  Content c;
  if (!bytes.starts_with(std::string(first_line) + "\n")) {
    // The one line of older versions.
    std::string_view line = bytes;
    while (!line.empty() && (line.back() == '\n' || line.back() == '\0')) line.remove_suffix(1);
    if (!holder_line(line)) return std::nullopt;
    c.holder = std::string(line);
    return c;
  }
  std::string_view rest = bytes.substr(std::strlen(first_line) + 1);
  bool first = true;
  while (true) {
    const auto nl = rest.find('\n');
    if (nl == std::string_view::npos) return std::nullopt;  // cut short: no "end" line
    const std::string_view line = rest.substr(0, nl);
    rest = rest.substr(nl + 1);
    if (first) {
      if (!holder_line(line)) return std::nullopt;
      c.holder = std::string(line);
      first = false;
      continue;
    }
    if (line == end_line) return c;
    if (!line.starts_with("temporary ")) return std::nullopt;
    std::string_view f = line.substr(10);
    const auto s1 = f.find(' ');
    if (s1 == std::string_view::npos) return std::nullopt;
    const auto s2 = f.find(' ', s1 + 1);
    if (s2 == std::string_view::npos) return std::nullopt;
    const auto dev = number(f.substr(0, s1)), ino = number(f.substr(s1 + 1, s2 - s1 - 1));
    const auto name = decode_name(f.substr(s2 + 1));
    if (!dev || !ino || !name || name->empty()) return std::nullopt;
    c.temporaries.push_back({*name, *dev, *ino});
  }
}

std::string sanitise(std::string_view text, std::size_t max_bytes) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (out.size() >= max_bytes) return out + "...";
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += text[i++];
    } else if (const std::size_t n = c >= 0x80 ? utf8_char(text.substr(i)) : 0; n > 0) {
      out += text.substr(i, n);
      i += n;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
      ++i;
    }
  }
  return out;
}

std::string lock_name(const std::string& store_name, std::size_t name_max) {
  const std::string suffix = ".lock";
  if (store_name.size() + suffix.size() <= name_max || name_max < 64) return store_name + suffix;
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (const char c : store_name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  char hex[24];
  std::snprintf(hex, sizeof hex, "~%016" PRIx64, h);
  return utf8_prefix(store_name, name_max - suffix.size() - 17) + hex + suffix;
}

std::string temporary_prefix(const std::string& store_name, std::size_t name_max) {
  const std::string suffix = ".partial-";
  if (name_max < 64) return store_name + suffix;  // no file system names so few bytes: as asked
  return utf8_prefix(store_name, name_max - suffix.size() - 6) + suffix;
}

}  // namespace lock_file
}  // namespace rcsweep::store
