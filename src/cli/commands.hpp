// The subcommands of the rcsweep program, each in one shape: `XArgs`, what its command line gives;
// `add_x_command(app, args)`, the subcommand with its options, help and checks, parsing into args;
// `x_command(args)`, the command, returning the process exit code (0 ok, 1 runtime error, 2
// usage/config error, 3 finished with failed or diverged tasks, 4 stopped early). main.cpp lists
// them in its table of commands (cli::Command, command_line.hpp); each is defined in its own file.
#pragma once
#include <CLI/CLI.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "plan/job_script.hpp"
#include "plan/plan.hpp"
#include "sweep/driver.hpp"

namespace rcsweep::cli {

/// `rcsweep run` (run.cpp).
struct RunArgs {
  std::filesystem::path sweep_file;
  std::vector<std::string> overrides;  ///< KEY=VALUE after the sweep file (config/overrides.hpp)
  sweep::RunOptions options;           ///< options.time_limit_s is set by run_command from time_limit
  std::string shard = "0/1";           ///< --shard i/n (parse_shard)
  std::string mpiexec;                 ///< --mpiexec (with -n; default $RCSWEEP_MPIEXEC, else mpiexec)
  bool quiet = false;                  ///< -q: only what the user must know on stderr (same as --progress none)
  std::string progress;      ///< --progress: text (default), json (events on stdout: cli/run_events.hpp) or none
  std::string time_limit;    ///< --time-limit text (parsed into options.time_limit_s)
  std::string mem_per_rank;  ///< --mem-per-rank (default: physical memory / ranks on the node)
  /// --dump-weights: after the sweep, rank 0 writes /dump (store/dump.hpp) for the done tasks;
  /// refused (exit 2, before any work) when the dump would exceed store::dump_limit_bytes.
  bool dump_weights = false;
  /// -n: the MPI job must have this many ranks (0: any). `rcsweep run -n N` outside an MPI job
  /// starts one itself (cli/launch.hpp); its ranks, started with the same arguments, check the size.
  int ranks = 0;
  /// --gemm-library: auto (BLIS for the product sizes `rcsweep calibrate` measured it faster at on
  /// this machine; OpenBLAS for all without a calibration or BLIS), openblas, or blis (every product).
  std::string gemm_library = "auto";
};
CLI::App* add_run_command(CLI::App& app, RunArgs& args);
/// Run a sweep on the ranks of MPI_COMM_WORLD (run on every rank of a launcher). With -n outside
/// an MPI job, first check what the ranks would refuse, then start them through mpiexec
/// (cli/launch.hpp) with this program's own arguments. Under a launcher (mpiexec) the ranks watch
/// it (sweep::watch_launcher): when it dies or tears the job down they stop at once and end
/// without MPI_Finalize.
int run_command(const RunArgs& args);

/// `rcsweep plan` (plan.cpp).
struct PlanArgs {
  std::filesystem::path sweep_file;
  std::vector<std::string> overrides;  ///< KEY=VALUE after the sweep file (config/overrides.hpp)
  std::string shard = "0/1";           ///< --shard i/n (parse_shard)
  int cores = 0;                       ///< 0: this machine's, or with --emit the scheduler's nodes' (planned_cores)
  std::string mem_per_rank;            ///< --mem-per-rank (default: the node's memory / its ranks)
  std::string mem_per_node;            ///< --mem-per-node (default: physical memory)
  int threads = 0;                     ///< --threads per rank: plan this layout (0: choose, plan/layout.hpp)
  std::string emit;              ///< --emit slurm|pbs: print a job script sized from the plan (plan/job_script.hpp)
  int nodes = 1;                 ///< --nodes of that job (with --cores: cores per node)
  double hours = 24.0;           ///< --hours: the longest walltime a job may ask for
  int shards = 0;                ///< --shards: that many array elements (0: the fewest that fit --hours)
  bool json = false;             ///< --json: the plan as one JSON object (not with --emit)
  plan::SiteOptions site;        ///< --account, --partition, --qos, --directive, --exclusive of that job
  std::filesystem::path setup;   ///< --setup: the script's default RCSWEEP_SETUP (a file it sources)
  std::filesystem::path output;  ///< -o: say what a run into this store would do (resume, grow, refuse)
};
CLI::App* add_plan_command(CLI::App& app, PlanArgs& args);
/// What a sweep would compute, its cost, memory and layout (or with --emit its job script).
int plan_command(const PlanArgs& args);

/// `rcsweep info` (info.cpp).
struct InfoArgs {
  std::filesystem::path store;
  bool json = false;  ///< --json: one JSON object instead of the text
};
CLI::App* add_info_command(CLI::App& app, InfoArgs& args);
/// Print what a store holds. Exit code 2 when it is not a readable rcsweep store of this schema; the
/// store is read in a child process, so a file that crashes the HDF5 library is such an error too.
int info_command(const InfoArgs& args);

/// `rcsweep merge` (merge.cpp).
struct MergeArgs {
  std::filesystem::path output;
  std::vector<std::filesystem::path> shards;
  bool overwrite = false;
};
CLI::App* add_merge_command(CLI::App& app, MergeArgs& args);
/// Join the stores of `run --shard i/n` runs of one sweep into one store: refused (exit 2) unless
/// they are of the same plan and every task is finished in exactly one of them.
int merge_command(const MergeArgs& args);

/// `rcsweep export` (export.cpp).
struct ExportArgs {
  std::vector<std::string> words;  ///< every argument after `export`, left to rcsweep-export
};
CLI::App* add_export_command(CLI::App& app, ExportArgs& args);
/// `rcsweep export ARGS`: exec the Python toolkit's rcsweep-export with ARGS (returns only on error).
int export_command(const ExportArgs& args);
/// Exec one of the Python toolkit's commands with Debian's /usr/bin/python3: `installed` next to
/// this program (an installation), else `script` in ../scripts (a checkout), with `words` as its
/// arguments. Returns only on error (2: the toolkit is not there, 1: it could not be run).
int exec_toolkit(const std::string& installed, const std::string& script, const std::vector<std::string>& words);

/// `rcsweep ls` (ls.cpp).
struct LsArgs {
  std::vector<std::string> words;  ///< every argument after `ls`, left to rcsweep-ls
};
CLI::App* add_ls_command(CLI::App& app, LsArgs& args);
/// `rcsweep ls ARGS`: exec the Python toolkit's rcsweep-ls (rcsweep_tools.catalog) with ARGS.
int ls_command(const LsArgs& args);

/// `rcsweep calibrate` (calibrate.cpp).
struct CalibrateArgs {
  std::filesystem::path output;  ///< -o: where to store the rates (default plan::calibration_path())
};
CLI::App* add_calibrate_command(CLI::App& app, CalibrateArgs& args);
/// `rcsweep calibrate [-o FILE]`: measure this machine's rates (plan::measure_calibration), print
/// them and store them. Exit code 0, or 1 when the file cannot be written.
int calibrate_command(const CalibrateArgs& args);

// Options that commands read themselves (arguments.cpp).

/// Parse a size ("4G", "512M", "2GiB", "1.5g", bytes) into bytes; ConfigError on key `what`.
double parse_bytes(const std::string& text, const std::string& what);

/// Parse "i/n" into a shard (throws ConfigError on key "--shard").
plan::Shard parse_shard(const std::string& text);

}  // namespace rcsweep::cli
