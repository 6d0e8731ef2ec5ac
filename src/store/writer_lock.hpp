// One writer per store: the exclusive claim that every process creating, growing, replacing,
// merging into or resuming a store holds from before its first byte to after its last
// (docs/GUARANTEES.md "One writer per store"). It is an flock(2) on a lock file beside the store,
// PATH.lock, so that it survives the store's replacement by rename (growth, --overwrite, merge);
// the kernel drops it when its holder dies, whatever the signal. No HDF5 here.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

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
  /// (host, pid, since when) when another process holds it, StoreError when the lock file cannot
  /// be made. A holder that is stopping (note_stopping), or a run on this host whose launcher
  /// (`rcsweep run -n`) is gone, is waited for up to `stopping_wait_s`, calling `waiting(holder)` once. On a file system without flock the claim is not enforced
  /// (enforced() is false), as HDF5's own file locking ignores such file systems.
  static WriterLock acquire(const std::filesystem::path& given, double stopping_wait_s = 0.0,
                            const std::function<void(const std::string& holder)>& waiting = {});

  /// Say in the lock file that this holder is stopping (a signal, its launcher gone): a writer
  /// that meets the lock then waits for it to let go instead of being refused at once.
  void note_stopping() const noexcept;

  const std::filesystem::path& given() const;  ///< the name as the user wrote it (for messages)
  const std::filesystem::path& path() const;   ///< the file written: resolve_store_path(given)
  bool enforced() const;

  /// A new, empty regular file beside path() that no other process can have: PATH.partial-XXXXXX
  /// made with O_EXCL. The caller removes it (remove_temporary) unless it becomes the store.
  std::filesystem::path make_temporary() const;

 private:
  struct Held;
  std::shared_ptr<const Held> held_;
};

/// Remove `temporary`, a file made by WriterLock::make_temporary, if it is still a regular file.
void remove_temporary(const std::filesystem::path& temporary) noexcept;

/// fsync the directory that holds `file`, so that a rename into it survives a crash of the node.
void fsync_directory(const std::filesystem::path& file) noexcept;

/// Whether two paths name the same existing file (device and inode, symlinks followed).
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

}  // namespace rcsweep::store
