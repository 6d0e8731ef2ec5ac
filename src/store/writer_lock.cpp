#include "store/writer_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string_view>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <system_error>

namespace rcsweep::store {
namespace {

constexpr int max_symlinks = 40;                           // as the kernel's path walk (MAXSYMLINKS)
constexpr int max_claim_attempts = 100;                    // the lock file replaced between open and flock, each time
constexpr std::string_view stopping_mark = ", stopping";   // the holder's line once it stops
constexpr std::string_view launcher_mark = ", launcher ";  // then the pid of `rcsweep run -n`

std::string errno_text(int err) { return std::strerror(err); }

std::string this_holder() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  char when[32] = {};
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::string text = std::string("host ") + host + ", pid " + std::to_string(getpid()) + ", since " + when;
  // Under `rcsweep run -n` (cli/launch.hpp): the launcher's pid, so that a writer that meets the
  // lock after the launcher was killed knows these ranks are about to let go.
  if (const char* launcher = std::getenv(launcher_pid_env); launcher && *launcher)
    text += std::string(launcher_mark) + launcher;
  return text;
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
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const auto at = holder.find(launcher_mark);
  if (at == std::string::npos || !holder.starts_with(std::string("host ") + host + ", ")) return false;
  const long pid = std::strtol(holder.c_str() + at + launcher_mark.size(), nullptr, 10);
  return pid > 0 && !running(static_cast<pid_t>(pid));
}

/// What the holder wrote into the lock file (empty while it is still writing it).
std::string read_holder(int fd) {
  char buf[512] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

/// flock(2) is not available on this file system (some Lustre and NFS mounts).
bool locking_unsupported(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL; }

/// Remove what a killed writer left of its temporaries: PATH.partial-XXXXXX, regular files only.
void remove_leftover_temporaries(const std::filesystem::path& path) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const std::string prefix = path.filename().string() + ".partial-";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() == prefix.size() + 6 && name.starts_with(prefix)) remove_temporary(it->path());
  }
}

}  // namespace

struct WriterLock::Held {
  std::filesystem::path given, path, lock_path;
  std::string holder;  // this process's line in the lock file
  int fd = -1;
  bool enforced = true;
  dev_t dev = 0;
  ino_t ino = 0;

  Held() = default;
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  ~Held() {
    if (fd < 0) return;
    // Remove the lock file while still holding it, and only if it is still ours: a process that
    // opened it meanwhile finds it gone once it gets the lock, and makes a new one.
    struct stat st {};
    if (enforced && ::stat(lock_path.c_str(), &st) == 0 && st.st_dev == dev && st.st_ino == ino)
      ::unlink(lock_path.c_str());
    ::close(fd);
  }
};

std::filesystem::path resolve_store_path(const std::filesystem::path& given) {
  std::filesystem::path p = given;
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return p;  // a new store (or a link to one not made yet)
      throw StoreError(given.string() + ": " + errno_text(errno));
    }
    if (!S_ISLNK(st.st_mode)) return p;
    if (hops == max_symlinks) throw StoreError(given.string() + ": " + errno_text(ELOOP));
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::read_symlink(p, ec);
    if (ec) throw StoreError(given.string() + ": " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
}

WriterLock WriterLock::acquire(const std::filesystem::path& given, double stopping_wait_s,
                               const std::function<void(const std::string&)>& waiting) {
  auto held = std::make_shared<Held>();
  held->given = given;
  held->path = resolve_store_path(given);
  held->lock_path = held->path.string() + ".lock";
  const std::string g = given.string(), lock = held->lock_path.string();
  const std::filesystem::path dir = held->path.parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    throw StoreError("cannot create " + g + ": directory " + dir.string() + " does not exist");
  const auto wait_until = std::chrono::steady_clock::now() + std::chrono::duration<double>(stopping_wait_s);
  bool told = false;
  for (int attempt = 0;; ++attempt) {
    // O_NONBLOCK: a FIFO under the lock's name must not block the open.
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0)
      throw StoreError("cannot make the writer lock " + lock + " of " + g + ": " + errno_text(errno) +
                       (errno == ELOOP ? " (it is a symbolic link)" : ""));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw StoreError("the writer lock " + lock + " of " + g + " is not a regular file; remove it");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        std::string holder = read_holder(fd);
        ::close(fd);
        if ((holder.ends_with(stopping_mark) || orphaned(holder)) && std::chrono::steady_clock::now() < wait_until) {
          if (!told && waiting)
            waiting(holder.ends_with(stopping_mark) ? holder.substr(0, holder.size() - stopping_mark.size())
                                                    : holder + "; its launcher is gone");
          told = true;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          attempt = -1;  // a stopping holder is not a lock file that keeps changing
          continue;
        }
        if (holder.empty()) holder = "a process that is starting";
        throw StoreBusy(g + " is being written by another rcsweep (" + holder +
                        "); wait for it to finish or stop it, or write another store");
      }
      if (!locking_unsupported(err)) {
        ::close(fd);
        throw StoreError("cannot lock " + lock + " of " + g + ": " + errno_text(err));
      }
      held->enforced = false;  // nothing to compare: the claim is not enforced anyway
    } else {
      // Ours only if the name still leads to the file locked: its holder may have removed it
      // between our open and our flock.
      struct stat now {};
      if (::stat(lock.c_str(), &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
        ::close(fd);
        if (attempt + 1 == max_claim_attempts) throw StoreBusy(g + ": its writer lock " + lock + " keeps changing");
        continue;
      }
    }
    held->fd = fd;
    held->dev = st.st_dev;
    held->ino = st.st_ino;
    break;
  }
  held->holder = this_holder();
  const std::string text = held->holder + "\n";
  if (::ftruncate(held->fd, 0) != 0 || ::pwrite(held->fd, text.data(), text.size(), 0) < 0) {
    // A holder's name is a courtesy for the refused; the lock itself is held.
  }
  if (held->enforced) remove_leftover_temporaries(held->path);
  WriterLock out;
  out.held_ = std::move(held);
  return out;
}

void WriterLock::note_stopping() const noexcept {
  const std::string text = held_->holder + std::string(stopping_mark) + "\n";
  if (::pwrite(held_->fd, text.data(), text.size(), 0) < 0) {
    // Then a writer that meets the lock is refused at once, as from a holder that goes on.
  }
}

const std::filesystem::path& WriterLock::given() const { return held_->given; }
const std::filesystem::path& WriterLock::path() const { return held_->path; }
bool WriterLock::enforced() const { return held_->enforced; }

std::filesystem::path WriterLock::make_temporary() const {
  std::string name = held_->path.string() + ".partial-XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) throw StoreError("cannot create " + held_->given.string() + ": " + errno_text(errno));
  ::close(fd);
  return name;
}

void remove_temporary(const std::filesystem::path& temporary) noexcept {
  struct stat st {};
  if (::lstat(temporary.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(temporary.c_str());
}

void fsync_directory(const std::filesystem::path& file) noexcept {
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace rcsweep::store
