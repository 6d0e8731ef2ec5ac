// The permissions of a store's file (docs/GUARANTEES.md "File modes and owners"): a new store gets
// the mode any new file of the user gets (the umask, or the directory's default ACL), a store that
// replaces another (--overwrite, growth, merge --overwrite) takes the old one's mode, group and,
// where permitted, owner. And whether another program holds HDF5's file lock on a store (h5py in a
// notebook), which a replacement must not pass over. POSIX only; no HDF5 here.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <string>

#include "base/error.hpp"

namespace rcsweep::store {

/// The process's file mode creation mask, read without changing it (/proc/self/status "Umask:");
/// where /proc does not say, umask(2) set and restored at once.
mode_t current_umask();

/// The permission bits open(2) gives a new file asked for with mode 0666 in directory `dir`: the
/// directory's default ACL where it has one (its owner, mask or group, and other entries), else
/// 0666 & ~umask.
mode_t new_file_mode(const std::filesystem::path& dir);

/// Give the file open at `fd`, which rcsweep just created in directory `dir` (with a narrower
/// mode), the mode new_file_mode(dir). Its group stays as the kernel chose it (a setgid
/// directory's group). Throws StoreError naming `name` when the file system refuses for another
/// reason than not keeping modes at all.
void give_new_file_mode(int fd, const std::filesystem::path& dir, const std::string& name);

/// Give the file open at `fd` the permission bits (0777), access ACL, group and owner of the file
/// at `old_path` it is about to replace (`old`: its lstat): the owner where permitted (root), the
/// group where permitted (root, or an owner who is a member of it); a group that cannot be given
/// gets no permission bits nor ACL (they were meant for another group). Throws StoreError naming
/// `name` as above.
void keep_mode_and_owner(int fd, const std::filesystem::path& old_path, const struct stat& old,
                         const std::string& name);

/// Whether another process holds HDF5's file lock on the regular file `path`: a non-blocking
/// flock(LOCK_EX) on a descriptor of its own, released at once. false when it cannot tell (no
/// such file, no read access, a file system without flock). Call it only when this process does
/// not have `path` open through HDF5 itself: two descriptors' locks conflict within one process.
bool hdf5_lock_held_elsewhere(const std::filesystem::path& path);

/// Throw StoreError (open_elsewhere_message) when another process holds HDF5's file lock on the
/// store at `target` (hdf5_lock_held_elsewhere; `name`: the store as the user named it). For a
/// caller with no HDF5 file open on it (`rcsweep run -n` before mpiexec starts; Store::build and
/// publish check that first).
void refuse_open_elsewhere(const std::filesystem::path& target, const std::string& name);

/// Throw StoreError ("NAME is not writable for you (mode 0444): ...") when a regular file at
/// `target` exists that this process may not write: a replacement (--overwrite, growth, merge
/// --overwrite) keeps the old store's mode, so a read-only store is not replaced (a grown one
/// could not be resumed). Root may write any file.
void refuse_unwritable_replacement(const std::filesystem::path& target, const std::string& name);

/// The refusal when another program has the store `store` (the name the user gave) open with
/// HDF5's file lock: what holds it and what to do.
std::string open_elsewhere_message(const std::string& store);

}  // namespace rcsweep::store
