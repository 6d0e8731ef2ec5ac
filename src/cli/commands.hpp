// The subcommands of the rcsweep program. Each returns the process exit code
// (0 ok, 1 runtime error, 2 usage/config error, 3 finished with failed or diverged tasks).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "plan/job_script.hpp"
#include "plan/plan.hpp"
#include "sweep/driver.hpp"

namespace rcsweep::cli {

struct RunArgs {
  std::filesystem::path sweep_file;
  std::vector<std::string> overrides;  ///< KEY=VALUE after the sweep file (config/overrides.hpp)
  sweep::RunOptions options;
  plan::Shard shard;
  bool quiet = false;        ///< -q: only what the user must know on stderr (same as --progress none)
  std::string progress;      ///< --progress: text (default), json (events on stdout: cli/run_events.hpp) or none
  std::string time_limit;    ///< --time-limit text (parsed into options.time_limit_s)
  std::string mem_per_rank;  ///< --mem-per-rank (default: physical memory / ranks on the node)
  /// --dump-weights: after the sweep, rank 0 writes /dump (store/dump.hpp) for the done tasks;
  /// refused (exit 2, before any work) when the dump would exceed store::dump_limit_bytes.
  bool dump_weights = false;
  /// -n: the MPI job must have this many ranks (0: any). `rcsweep run -n N` outside an MPI job
  /// starts one itself (cli/launch.hpp); its ranks, started with the same arguments, check the size.
  int ranks = 0;
};
/// Run a sweep on the ranks of MPI_COMM_WORLD. Under a launcher (mpiexec) the ranks watch it
/// (sweep::watch_launcher): when it dies or tears the job down they stop at once and end without
/// MPI_Finalize.
int run_command(const RunArgs& args);

/// What `run -n` checks before it starts `mpiexec` (its command, for where the ranks run): every
/// refusal the ranks would make before any work that this process can decide alone (the options,
/// the sweep file with its overrides, ulimit -v, the memory budget when the ranks are all on this
/// machine or --mem-per-rank is given, --dump-weights, the store and its writer lock, the --reuse
/// stores: sweep::check_store), said as a single process says it. Returns 0, or the exit code (2)
/// after saying why, so that no rank starts for a run that cannot start.
int check_run(const RunArgs& args, const std::string& mpiexec);

struct PlanArgs {
  std::filesystem::path sweep_file;
  std::vector<std::string> overrides;  ///< KEY=VALUE after the sweep file (config/overrides.hpp)
  plan::Shard shard;
  int cores = 0;                 ///< 0: this machine's, or with --emit the scheduler's nodes' (planned_cores)
  std::string mem_per_rank;      ///< --mem-per-rank (default: the node's memory / its ranks)
  std::string mem_per_node;      ///< --mem-per-node (default: physical memory)
  int threads = 0;               ///< --threads per rank: plan this layout (0: choose, plan/layout.hpp)
  std::string emit;              ///< --emit slurm|pbs: print a job script sized from the plan (plan/job_script.hpp)
  int nodes = 1;                 ///< --nodes of that job (with --cores: cores per node)
  double hours = 24.0;           ///< --hours: the longest walltime a job may ask for
  plan::SiteOptions site;        ///< --account, --partition, --qos, --directive, --exclusive of that job
  std::filesystem::path setup;   ///< --setup: the script's default RCSWEEP_SETUP (a file it sources)
  std::filesystem::path output;  ///< -o: say what a run into this store would do (resume, grow, refuse)
};
int plan_command(const PlanArgs& args);

/// `rcsweep export ARGS`: exec the Python toolkit's rcsweep-export with ARGS (returns only on error).
int export_command(const std::vector<std::string>& args);


/// Print what a store holds. Exit code 2 when it is not a readable rcsweep store of this schema; the
/// store is read in a child process, so a file that crashes the HDF5 library is such an error too.
/// With `json`, one JSON object instead of the text (info --json).
int info_command(const std::filesystem::path& store, bool json = false);

struct MergeArgs {
  std::filesystem::path output;
  std::vector<std::filesystem::path> shards;
  bool overwrite = false;
};
/// Join the stores of `run --shard i/n` runs of one sweep into one store: refused (exit 2) unless
/// they are of the same plan and every task is finished in exactly one of them.
int merge_command(const MergeArgs& args);

/// Parse a size ("4G", "512M", "2GiB", "1.5g", bytes) into bytes; ConfigError on key `what`.
double parse_bytes(const std::string& text, const std::string& what);

/// Parse "i/n" into a shard (throws ConfigError on key "--shard").
plan::Shard parse_shard(const std::string& text);

}  // namespace rcsweep::cli
