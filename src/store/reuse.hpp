// Results a store already has, reused by a sweep that grew: finished tasks of an older store
// whose results a task of the new plan would reproduce bitwise (plan/reuse.hpp decides which) are
// copied instead of computed. Used two ways: `run --reuse OLD.h5` fills the pending tasks of the
// output store from OLD; running a changed sweep file against its old store grows that store in
// place when no finished result would be lost.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "store/store.hpp"

namespace rcsweep::store {

struct ReuseReport {
  std::string from_name, from_hash;      ///< the old store's sweep name and plan hash
  std::vector<std::string> differences;  ///< old sweep -> new sweep, "key: old -> new" (plan/reuse.hpp)
  std::vector<std::string> blockers;     ///< differences that leave nothing reusable
  std::uint64_t finished = 0;            ///< done, diverged or vanished tasks of the old store
  std::uint64_t not_in_sweep = 0;        ///< ... that are no task of the new sweep
  std::uint64_t recomputed = 0;          ///< ... tasks of it, computed again (plan::TaskMatch::rerouted)
  std::uint64_t other_shards = 0;        ///< ... tasks of it outside this run's --shard (not copied)
  std::uint64_t copied = 0;              ///< ... copied into pending tasks of the new store
  /// compare_with_store: how many tasks of this run's shard a growth computes: the tasks not
  /// copied, of which with adaptive replicates those the rule asks for (replayed on the copied
  /// results: `least` is what it needs for sure, `most` adds every replicate up to max of the
  /// points it has not closed). Equal without adaptive replicates.
  std::uint64_t to_compute_least = 0, to_compute_most = 0;
};

/// Copy into `into` (a store of `plan`) every finished (done, diverged or vanished) result of the store at
/// `from` whose task is a task of `plan` and still pending in `into`. Copies nothing when the
/// sweeps differ in something that changes every task (report.blockers). The copied rows are
/// bitwise those of `from` (wall time, rank and platform included), and the store's `reused`
/// attribute records where they came from. Throws StoreError when `from` cannot be read.
ReuseReport reuse_results(const std::filesystem::path& from, Store& into, const plan::Plan& plan);

/// What `path` (a store of another sweep) and `plan` have in common, without writing anything.
ReuseReport compare_with_store(const std::filesystem::path& path, const plan::Plan& plan);

/// Replace the store at lock.path() (made from another sweep: plan hash differs) by a store of
/// `plan` holding every finished result of the old one: built beside it under a temporary name
/// and renamed over it when complete and on disk (a kill meanwhile leaves the old store as it
/// was; a symlink to the store keeps pointing to it). Refused (StoreError that lists the
/// differences) when a finished result of the old store would be lost: something that changes
/// every task differs, or some finished tasks are not tasks of `plan`.
ReuseReport grow_in_place(const WriterLock& lock, const plan::Plan& plan, const Provenance& prov);

/// The report as lines for the user: the differences (at most `max_lines`), then what is reused.
std::string describe(const ReuseReport& report, std::size_t max_lines = 12);

}  // namespace rcsweep::store
