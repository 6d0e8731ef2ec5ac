// `rcsweep merge`: the stores of the shards of one sweep joined into one store.
#include "cli/commands.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <system_error>
#include <vector>

#include "base/error.hpp"
#include "cli/cli_internal.hpp"
#include "rcsweep/version.hpp"
#include "store/store.hpp"
#include "store/sweep_input.hpp"
#include "sweep/provenance.hpp"
#include "sweep/stop.hpp"

namespace rcsweep::cli {
namespace {
int merge_stores(const MergeArgs& args) {
  // The output's one writer from here on; it is built beside the output and put in place only
  // when complete, so a failure or a kill leaves whatever was there as it was.
  const store::WriterLock lock = store::WriterLock::acquire(args.output);
  std::error_code ec;
  if (!args.overwrite && std::filesystem::exists(std::filesystem::symlink_status(lock.path(), ec)))
    throw StoreError(args.output.string() + " exists; pass --overwrite to replace it");
  store::check_output(lock, args.overwrite);
  for (const auto& path : args.shards)
    if (store::same_file(path, lock.path()) || store::resolve_store_path(path) == lock.path())
      throw StoreError(path.string() + " is both a shard and the output; merge into a new file");
  // The plan, from the first shard's canonical sweep text; every shard must carry the same hash.
  std::vector<store::StoreInfo> infos;
  for (const auto& path : args.shards) {
    std::string crash;
    if (!in_child([&] { return store::read_info(path), 0; }, crash)) throw StoreError(crashed_message(path, crash));
    infos.push_back(store::read_info(path));
  }
  for (std::size_t i = 1; i < infos.size(); ++i)
    if (infos[i].plan_hash != infos[0].plan_hash)
      throw StoreError(args.shards[i].string() + " is from another sweep (plan hash " + infos[i].plan_hash + ", not " +
                       infos[0].plan_hash + " of " + args.shards[0].string() + ")");
  config::SweepSpec spec = store::stored_sweep(infos[0].config, args.shards[0].string() + ":/config");
  spec.overrides = infos[0].overrides;  // recorded, already in the config
  const plan::Plan plan = plan::make_plan(std::move(spec));
  if (plan.hash != infos[0].plan_hash)
    throw StoreError(args.shards[0].string() +
                     ": its config does not reproduce its plan hash (made by another rcsweep?)");

  // Every task finished (done, failed, diverged or vanished) in exactly one shard.
  std::vector<int> owner(plan.tasks.size(), -1);
  std::vector<std::vector<std::uint64_t>> mine(args.shards.size());
  for (std::size_t i = 0; i < args.shards.size(); ++i) {
    const auto status = store::Store::open_read(args.shards[i], plan).task_status();
    for (std::uint64_t t = 0; t < status.size(); ++t) {
      if (status[t] == store::TaskStatus::pending) continue;
      if (owner[t] >= 0)
        throw StoreError("task " + std::to_string(t) + " is finished in both " +
                         args.shards[static_cast<std::size_t>(owner[t])].string() + " and " + args.shards[i].string() +
                         ": a shard given twice, or shards of different --shard counts");
      owner[t] = static_cast<int>(i);
      mine[i].push_back(t);
    }
  }
  const auto missing = static_cast<std::uint64_t>(std::count(owner.begin(), owner.end(), -1));
  if (missing > 0) {
    const auto first = static_cast<std::uint64_t>(std::find(owner.begin(), owner.end(), -1) - owner.begin());
    throw StoreError(std::to_string(missing) + " of " + std::to_string(plan.tasks.size()) +
                     " tasks are finished in no shard (e.g. task " + std::to_string(first) +
                     "): a shard is missing or not finished (resume it first)");
  }

  const store::Provenance prov{version, git_commit,         sweep::utc_now(), sweep::hostname(),    infos[0].blas,
                               "",      infos[0].mpi_ranks, infos[0].threads, infos[0].blas_threads};
  store::Store out = store::Store::build(lock, plan, prov);
  for (std::size_t i = 0; i < args.shards.size(); ++i)
    out.write(store::Store::open_read(args.shards[i], plan).read_results(mine[i]));
  out.mark_finished(sweep::utc_now());
  out.sync();
  out.publish(args.overwrite);
  std::fprintf(stderr, "[rcsweep] merged %zu shards into %s: %zu tasks\n", args.shards.size(), args.output.c_str(),
               plan.tasks.size());
  return 0;
}
}  // namespace

int merge_command(const MergeArgs& args) {
  try {
    return merge_stores(args);
  } catch (const StoreError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}

CLI::App* add_merge_command(CLI::App& app, MergeArgs& args) {
  auto* cmd = app.add_subcommand(
      "merge", "Join the stores of an array job (run --shard i/n) into one store, equal to a single run's.");
  cmd->add_option("output", args.output, "merged store to create (HDF5)")->required();
  cmd->add_option("shards", args.shards, "the shard stores, in any order")->required()->check(CLI::ExistingFile);
  cmd->add_flag("--overwrite", args.overwrite, "replace an existing output store");
  cmd->footer("The shards must come from the same sweep file (plan hash) and together finish every task exactly\n"
              "once; otherwise nothing is written and the exit code is 2. /dump groups are not merged.");
  return cmd;
}

}  // namespace rcsweep::cli
