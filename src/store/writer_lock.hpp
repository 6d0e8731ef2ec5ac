// One writer per store: the exclusive claim that every process creating, growing, replacing,
// merging into or resuming a store holds from before its first byte to after its last
// (docs/GUARANTEES.md "One writer per store" and "What rcsweep creates and removes beside a
// store"). Two kernel locks make it, both dropped by the kernel when their holder dies, whatever
// the signal:
//   - an flock(2) on a lock file beside the store, PATH.lock, which survives the store's
//     replacement by rename (growth, --overwrite, merge) and names its holder for refusals;
//   - an OFD write lock (fcntl(2) F_OFD_SETLK) on one byte far past the end of the store file
//     itself and of every temporary that may become it, so that a store is one store whatever
//     name leads to it (hard links, bind mounts, symlinks). HDF5 locks files with flock(2) on the
//     whole file, which does not conflict with it on local file systems; where flock is emulated
//     with POSIX locks (NFS) this lock is left out and HDF5's own lock covers the file.
// The lock file is rcsweep's only when its first line says so (or it holds the one line of older
// versions, "host H, pid P, since T") and it has one link: anything else at its name is refused and
// never truncated, written or removed. It records each temporary the holder makes (name, device,
// inode): the next writer removes a killed holder's temporaries from that record alone, never by
// a name pattern. No HDF5 here.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace rcsweep::store {

/// The environment variable in which `rcsweep run -n` passes its pid to its ranks (cli/launch.cpp).
inline constexpr const char* launcher_pid_env = "RCSWEEP_LAUNCHER_PID";

/// Another process holds the store's writer lock.
class StoreBusy : public StoreError {
 public:
  using StoreError::StoreError;
};

/// The file a store name stands for: every symlink of the last component followed (a store
/// written through a link replaces the link's target and keeps the link). Throws StoreError on a
/// loop or a name the system refuses.
std::filesystem::path resolve_store_path(const std::filesystem::path& given);

/// A held writer lock. Copies share one claim, released (and the lock file removed) when the last
/// copy goes: a Store made for writing keeps a copy, so the claim outlives every write.
class WriterLock {
 public:
  /// Claim the store at `given` (which need not exist yet). Throws StoreBusy naming the holder
  /// (host, pid, since when; sanitised) when another process holds it, also through another name
  /// of the same file; StoreError when the lock file cannot be made, or when something that is not
  /// a writer lock of rcsweep (a foreign file, a hard link, a file that stays empty, a FIFO, a
  /// symlink) is at the lock file's name: that is left untouched. A holder that is stopping
  /// (note_stopping), or a run on this host whose launcher (`rcsweep run -n`) is gone, is waited
  /// for up to `stopping_wait_s` seconds, calling `waiting(holder)` once. A killed holder's
  /// temporaries recorded in its lock file are removed. In a directory where the lock file cannot
  /// be made (no write access) an existing store is claimed by its own inode lock alone. On a file
  /// system without flock the claim is not enforced (enforced() is false), as HDF5's own file
  /// locking ignores such file systems.
  static WriterLock acquire(const std::filesystem::path& given, double stopping_wait_s = 0.0,
                            const std::function<void(const std::string& holder)>& waiting = {});

  /// Say in the lock file that this holder is stopping (a signal, its launcher gone): a writer
  /// that meets the lock then waits for it to let go instead of being refused at once.
  void note_stopping() const noexcept;

  const std::filesystem::path& given() const;  ///< the name as the user wrote it (for messages)
  const std::filesystem::path& path() const;   ///< the file written: resolve_store_path(given)
  /// The lock file (empty when the directory admits none and the store's inode lock is the claim).
  const std::filesystem::path& lock_path() const;
  bool enforced() const;

  /// Let go of the inode locks of files that no longer have a name (the store a temporary replaced
  /// by rename, a temporary removed), so that their space is freed now rather than when the claim
  /// ends. To be called once a temporary replaced the store (Store::publish); make_temporary calls it.
  void release_unlinked() const noexcept;

  /// A new, empty regular file beside path() that no other process can have: PATH.partial-XXXXXX
  /// made with O_EXCL (the store's name shortened when the suffix would exceed the directory's
  /// NAME_MAX), recorded in the lock file and inode-locked like the store, which it may become.
  /// The caller removes it (remove_temporary) unless it becomes the store. Throws StoreError
  /// ("needs write access to directory D") when it cannot be made.
  std::filesystem::path make_temporary() const;

  struct Held;  ///< the claim's state (writer_lock.cpp)

 private:
  std::shared_ptr<const Held> held_;
};

/// Remove `temporary`, a file made by WriterLock::make_temporary, if it is still a regular file.
void remove_temporary(const std::filesystem::path& temporary) noexcept;

/// fsync the directory that holds `file`, so that a rename into it survives a crash of the node.
void fsync_directory(const std::filesystem::path& file) noexcept;

/// Whether two paths name the same existing file (device and inode, symlinks followed).
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

/// Whether HDF5's own file locking is switched off for this process (HDF5_USE_FILE_LOCKING=FALSE
/// or 0, as many sites set it): then, where enforced() is false, nothing keeps two writers apart.
bool hdf5_file_locking_off();

/// The lock file's format and names (writer_lock.cpp), exposed for its tests.
namespace lock_file {

/// The first line of every lock file this version of rcsweep writes.
inline constexpr const char* first_line = "rcsweep writer lock, format 1";

/// A temporary recorded in a lock file: its name in the store's directory, device and inode.
struct Temporary {
  std::string name;
  unsigned long long dev = 0, ino = 0;
};

/// What a lock file of rcsweep says: its holder's line and the temporaries it made.
struct Content {
  std::string holder;  ///< "host H, pid P, since T[, launcher L][, stopping]"
  std::vector<Temporary> temporaries;
};

/// The bytes of a lock file holding `c` (first_line, the holder, one line per temporary, "end").
std::string format(const Content& c);

/// The content of a lock file of rcsweep (this format, or the one line of older versions), or
/// nothing when `bytes` are not one (empty, foreign, cut short). Bytes after the "end" line are
/// ignored (the tail of a longer content a takeover overwrote).
std::optional<Content> parse(std::string_view bytes);

/// `text` fit for a terminal: control characters, backslashes and bytes that are not UTF-8 escaped
/// as \xNN, at most `max_bytes` of it kept (then "...").
std::string sanitise(std::string_view text, std::size_t max_bytes = 200);

/// The lock file's name for a store named `store_name` in a directory whose names have at most
/// `name_max` bytes: STORE.lock, or when that is too long the store's name shortened (at a UTF-8
/// character) + "~" + 16 hex digits of a hash of the whole name + ".lock".
std::string lock_name(const std::string& store_name, std::size_t name_max);

/// The prefix of the store's temporaries (before "XXXXXX"): STORE.partial-, the store's name
/// shortened (at a UTF-8 character) so that the temporary's name has at most `name_max` bytes.
std::string temporary_prefix(const std::string& store_name, std::size_t name_max);

}  // namespace lock_file

}  // namespace rcsweep::store
