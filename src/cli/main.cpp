// rcsweep: parallel sweeps of rank collapse in randomly initialised attention / SSM stacks.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>

#include "base/allocator.hpp"
#include "base/error.hpp"
#include "base/parallel.hpp"
#include "base/platform.hpp"
#include "cli/calibrate.hpp"
#include "cli/commands.hpp"
#include "cli/launch.hpp"
#include "config/params.hpp"
#include "config/sweep_spec.hpp"
#include "linalg/linalg.hpp"
#include "store/dump.hpp"
#include "sweep/stop.hpp"
#include "rcsweep/version.hpp"

namespace {
int run_main(int argc, char** argv) {
  using namespace rcsweep;
  keep_freed_memory();
  CLI::App app{"rcsweep: sweeps of rank collapse in randomly initialised attention and state-space stacks.\n"
               "A sweep file (TOML, see docs/CONFIG.md) names the model and the swept axes; every grid point x\n"
               "replicate is a task that runs the random stack to the largest depth and records spectral metrics\n"
               "of every layer in one HDF5 store (see docs/SCHEMA.md).",
               "rcsweep"};
  // The BLAS kernel too: results are bitwise reproducible on one kernel (docs/GUARANTEES.md).
  app.set_version_flag("--version", std::string(version) + " (" + git_commit + ")\nBLAS kernel " +
                                        linalg::blas_kernel() + " on " + cpu_model());
  app.require_subcommand(1);
  // Every error starts with "error:" (docs/ERRORS.md); subcommands inherit this.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });

  // The sweep file of run and plan: an existing regular file of at most 16 MiB (config::sweep_file_problem).
  const CLI::Validator sweep_file_check(
      [](std::string& path) {
        const std::string problem = config::sweep_file_problem(path);
        return problem.empty() ? problem : "cannot read sweep file '" + config::printable(path) + "': " + problem;
      },
      "FILE");

  // Command-line overrides of the sweep file: the positional arguments after it.
  const std::string overrides_help =
      "settings of the sweep file as KEY=VALUE (docs/CONFIG.md \"Overrides on the command line\")";
  const std::string overrides_footer =
      "Overrides: KEY=VALUE arguments after the sweep file change it before it is checked, e.g.\n"
      "  rcsweep %s sweep.toml model.T=256 axes.lambda=[0,0.5,1] sweep.replicates=20 zip[0].d=[64,128]\n"
      "KEY is a dotted key path (sweep.seed, model.mixer, axes.d, output.spectra, zip[0].T or zip.0.T for\n"
      "the first [[zip]] table); VALUE is a TOML value, and a bare word is a string (model.mixer=markov,\n"
      "axes.gap_fix=[none,perp]). model.P and axes.P replace P wherever the file gives it under [model]\n"
      "or [axes], so axes.lambda=[0,1] sweeps a lambda the file fixes. Later overrides win. A bad one\n"
      "exits with code 2 before any work. The store records them (rcsweep info); resuming it needs the\n"
      "same sweep after overrides (the plan hash is checked).";
  const auto footer_for = [&](const char* cmd) {
    std::string text = overrides_footer;
    text.replace(text.find("%s"), 2, cmd);
    return text;
  };

  cli::RunArgs run;
  std::string run_shard = "0/1";
  auto* run_cmd = app.add_subcommand("run",
                                     "Run a sweep into an HDF5 store (resumes an existing store of the same sweep).");
  run_cmd->footer(
      "Run with one MPI rank per core, e.g.\n"
      "  rcsweep run -n 4 sweep.toml -o out.h5            (starts mpiexec -n 4 itself)\n"
      "  mpiexec -n 4 rcsweep run sweep.toml -o out.h5\n"
      "or as a single process. Killing the run at any time keeps every finished task; running the same\n"
      "command again computes only what is missing. A store made from an earlier version of the sweep\n"
      "file (more replicates, axis values or zip entries now) grows in place, keeping every finished task.\n"
      "SIGTERM, SIGINT (Ctrl-C), SIGUSR1/2 (and SIGHUP with -n) stop it cleanly: no new tasks, running\n"
      "ones kept if they finish within --grace, store flushed, exit code 4 (a second SIGINT/SIGTERM stops\n"
      "at once). Under a plain mpiexec send SIGUSR1, which it forwards to every rank: Open MPI's mpiexec\n"
      "answers SIGINT and SIGTERM with SIGTERM to the ranks and SIGKILL odls_base_sigkill_timeout (1 s)\n"
      "later, so they stop at once, and exits 1. Ranks whose mpiexec dies (kill -9) stop at once.\n"
      "Exit codes: 0 every task ran to an outcome: done, diverged (X non-finite) or vanished (X exactly\n"
      "zero, a complete collapse), each recorded in /tasks; 1 runtime error; 2 usage/config error or store\n"
      "refused; 3 finished, but some tasks failed (an error, recorded with its message; --retry-failed\n"
      "reruns them), or with --fail-on-diverged some diverged or vanished; 4 stopped early by a signal or\n"
      "the time limit (resumable: run the same command again).\n" +
      footer_for("run"));
  run_cmd->add_option("sweep", run.sweep_file, "sweep file (TOML)")->required()->check(sweep_file_check);
  run_cmd->add_option("overrides", run.overrides, overrides_help);
  auto* ranks_opt = run_cmd
                        ->add_option(
                            "-n,--ranks", run.ranks,
                            "run on N MPI ranks: starts `mpiexec -n N` itself, so that Ctrl-C and SIGTERM stop the\n"
                            "run cleanly with exit code 4 (under mpiexec: the job must have N ranks)")
                        ->check(CLI::Range(1, 1 << 20));
  std::string run_mpiexec;
  run_cmd
      ->add_option("--mpiexec", run_mpiexec,
                   "with -n: the mpiexec command with its options, split at spaces, e.g.\n"
                   "\"mpiexec --oversubscribe --allow-run-as-root\" (default: $RCSWEEP_MPIEXEC, else mpiexec)")
      ->needs(ranks_opt);
  run_cmd->add_option("-o,--output", run.options.output, "output store (HDF5); default: <sweep name>.h5");
  auto* resume_flag = run_cmd->add_flag("--resume", run.options.require_existing,
                                        "require an existing store and continue it (the default when it exists)");
  run_cmd->add_flag("--overwrite", run.options.overwrite, "replace an existing store")->excludes(resume_flag);
  run_cmd->add_option(
      "--shard", run_shard,
      "run only tasks with id % n == i (array jobs; adaptive replicates: points with point % n == i), as i/n");
  run.options.threads = parallel::threads_from_environment();
  run_cmd
      ->add_option("--threads", run.options.threads,
                   "OpenMP threads per rank (default: OMP_NUM_THREADS, else 1). Results are bitwise the same\n"
                   "for every ranks x threads layout; threads pay off for big tasks (T or d in the\n"
                   "thousands) and bundles too big for one rank per core (docs/CLUSTER.md)")
      ->check(CLI::Range(1, 4096));
  run_cmd
      ->add_option("--blas-threads", run.options.blas_threads,
                   "BLAS threads per OpenMP thread (default 1). Above 1 results depend on the layout and\n"
                   "--threads must be 1: use --threads instead")
      ->check(CLI::Range(1, 256));
  run_cmd->add_flag("-q,--quiet", run.quiet, "no progress on stderr");
  run_cmd->add_option("--mem-per-rank", run.mem_per_rank,
                      "memory budget of one rank (e.g. 4G, 512M); a sweep whose largest bundle would not fit is\n"
                      "refused before any work (exit 2). Default: physical memory / ranks on the node");
  run_cmd->add_flag("--retry-failed", run.options.retry_failed,
                    "run failed, diverged and vanished tasks of the store again");
  run_cmd->add_flag("--fail-on-diverged", run.options.fail_on_diverged,
                    "exit 3 when some task diverged or vanished (by default they are outcomes: exit 0)");
  run_cmd
      ->add_option("--reuse", run.options.reuse,
                   "copy the finished results of this older store (repeatable) into the tasks they fit instead\n"
                   "of computing them: tasks with the same parameters, replicate, seed, largest depth and\n"
                   "[output] (docs/CONFIG.md \"Growing a sweep\"); e.g. more replicates or axis values into a new -o")
      ->check(CLI::ExistingFile);
  run_cmd
      ->add_option("--grace", run.options.grace_s,
                   "seconds that running tasks get to finish after a stop signal (default 30)")
      ->check(CLI::Range(0.0, 1e6));
  run_cmd->add_option(
      "--time-limit", run.time_limit,
      "stop cleanly before this wall time (e.g. 90s, 90m, 2h, 1h30m, or as Slurm's --time: 90 = 90 min,\n"
      "1:30 = 1 min 30 s, 1:30:00, 2-12 = 2 days 12 h): no unit of work is started\n"
      "whose estimated time would overrun it (at this machine's rates once `rcsweep calibrate` has run);\n"
      "SLURM_JOB_END_TIME and PBS_WALLTIME are also honoured");
  run_cmd->add_flag("--dump-weights", run.dump_weights,
                    "after the sweep, write every done task's X_l and weights into /dump of the store, for\n"
                    "scripts/rcsweep_recompute.py (small sweeps only: refused with exit code 2, before any\n"
                    "work, when the dump would exceed " +
                        std::to_string(store::dump_limit_bytes >> 20) + " MiB)");

  cli::PlanArgs plan;
  std::string plan_shard = "0/1";
  auto* plan_cmd = app.add_subcommand("plan",
                                      "Show what a sweep would compute, its cost and memory; computes nothing.");
  plan_cmd->add_option("sweep", plan.sweep_file, "sweep file (TOML)")->required()->check(sweep_file_check);
  plan_cmd->add_option("overrides", plan.overrides, overrides_help);
  plan_cmd->footer(footer_for("plan"));
  plan_cmd->add_option("--shard", plan_shard, "plan only shard i/n");
  plan_cmd->add_option("-o,--output", plan.output,
                       "a store to run into: say what `run -o` would do with it (start, resume with N tasks\n"
                       "left, grow it to this sweep copying N finished tasks, or refuse it and why)");
  plan_cmd
      ->add_option("--cores", plan.cores,
                   "cores to plan for: of this machine, or with --emit of one compute node (default: this\n"
                   "machine's; with --emit the scheduler's nodes', from sinfo or pbsnodes -a, else refused)")
      ->check(CLI::Range(1, 1 << 20));
  plan_cmd->add_option("--mem-per-rank", plan.mem_per_rank,
                       "memory budget of one rank (e.g. 4G), whatever the layout; refused (exit 2) if the largest\n"
                       "bundle does not fit. Default: --mem-per-node / ranks per node");
  plan_cmd->add_option("--mem-per-node", plan.mem_per_node,
                       "memory of one node (e.g. 256G), shared by its ranks: the layout gives a rank whose largest\n"
                       "bundle does not fit its share threads instead of cores (default: this machine's memory)");
  plan_cmd
      ->add_option("--threads", plan.threads,
                   "OpenMP threads per rank: plan this layout (cores / N ranks per node) instead of choosing\n"
                   "one (default: one rank per core, or threads for big tasks, few tasks or little memory)")
      ->check(CLI::Range(1, 4096));
  plan_cmd->add_option("--emit", plan.emit,
                       "print a job script for slurm or pbs (jobs/slurm, jobs/pbs) sized from the cost model: ranks,\n"
                       "walltime with margin, memory per rank, and an array of --shard jobs when the sweep does\n"
                       "not fit --hours (docs/CLUSTER.md); what it was sized for goes to stderr");
  plan_cmd->add_option("--nodes", plan.nodes, "with --emit: nodes per job (default 1); --cores is then cores per node");
  plan_cmd->add_option("--hours", plan.hours, "with --emit: the longest walltime a job may ask for (default 24)");
  plan_cmd
      ->add_option("--account", plan.site.account, "with --emit: the account charged (#SBATCH --account=A, #PBS -A A)")
      ->option_text("A");
  plan_cmd
      ->add_option("--partition", plan.site.partition,
                   "with --emit: the partition (#SBATCH --partition=P) or PBS queue (#PBS -q P)")
      ->option_text("P");
  plan_cmd
      ->add_option("--qos", plan.site.qos,
                   "with --emit slurm: the quality of service (#SBATCH --qos=Q); PBS has none, refused (exit 2)")
      ->option_text("Q");
  plan_cmd
      ->add_option("--directive", plan.site.directives,
                   "with --emit: one more scheduler line, as given after \"#SBATCH \" or \"#PBS \" (repeatable,\n"
                   "in order; e.g. --directive=--constraint=zen4 --directive='-l place=scatter'); values\n"
                   "with a line break or a leading '#' are refused (exit 2)")
      ->allow_extra_args(false);
  plan_cmd->add_flag("--exclusive", plan.site.exclusive,
                     "with --emit: whole nodes for the job (#SBATCH --exclusive, #PBS -l place=excl); without\n"
                     "it the job asks only for its ranks' cores and memory");
  plan_cmd
      ->add_option("--launcher", plan.site.launcher,
                   "with --emit slurm: the script's default LAUNCHER, mpiexec (the default) or srun")
      ->option_text("L");
  plan_cmd
      ->add_option("--mpi", plan.site.mpi,
                   "with --emit: the script's default MPI_FLAVOUR, openmpi, mpich or intel: mpiexec's binding\n"
                   "and environment flags (default auto: the MPI `mpiexec --version` names, when the job runs)")
      ->option_text("FLAVOUR");
  plan_cmd
      ->add_option("--srun-mpi", plan.site.srun_mpi,
                   "with --emit slurm: the script's default SRUN_MPI, srun's --mpi plugin (pmix, pmi2, ...) or\n"
                   "default for none (default auto: pmix, else pmi2, of `srun --mpi=list`, when the job runs)")
      ->option_text("PLUGIN");
  plan_cmd
      ->add_option("--setup", plan.setup,
                   "with --emit: a file the script sources before anything runs (module load, environment),\n"
                   "its default RCSWEEP_SETUP (absolute path); must exist (exit 2 otherwise)")
      ->option_text("FILE");

  std::filesystem::path info_store;
  auto* info_cmd = app.add_subcommand("info", "Show what a store holds: provenance, progress, datasets.");
  info_cmd->add_option("store", info_store, "rcsweep HDF5 store")->required();
  bool info_json = false;
  info_cmd->add_flag("--json", info_json,
                     "print one JSON object (provenance, task counts, platforms, overrides, datasets, config)");

  cli::MergeArgs merge;
  auto* merge_cmd = app.add_subcommand(
      "merge", "Join the stores of an array job (run --shard i/n) into one store, equal to a single run's.");
  merge_cmd->add_option("output", merge.output, "merged store to create (HDF5)")->required();
  merge_cmd->add_option("shards", merge.shards, "the shard stores, in any order")->required()->check(CLI::ExistingFile);
  merge_cmd->add_flag("--overwrite", merge.overwrite, "replace an existing output store");
  merge_cmd->footer("The shards must come from the same sweep file (plan hash) and together finish every task exactly\n"
                    "once; otherwise nothing is written and the exit code is 2. /dump groups are not merged.");

  std::vector<std::string> export_args;
  auto* export_cmd = app.add_subcommand(
      "export", "Write a store as csv (one row per task and layer), netcdf or parquet (the Python toolkit).");
  export_cmd->prefix_command();  // every argument goes to rcsweep-export
  export_cmd->footer("rcsweep export STORE [-o FILE] [--format csv|parquet|netcdf]\n"
                     "Runs the toolkit's rcsweep-export (next to this program when installed, scripts/ in a checkout)\n"
                     "with Debian's /usr/bin/python3; `rcsweep export STORE --help` shows its options.");

  std::filesystem::path calibration_out;
  auto* calibrate_cmd = app.add_subcommand(
      "calibrate", "Measure this machine's rates (about 3 s) for the time estimates of `rcsweep plan`.");
  calibrate_cmd->add_option(
      "-o,--output", calibration_out,
      "where to store them (default: $RCSWEEP_CALIBRATION, else ~/.cache/rcsweep/calibration.toml)");
  calibrate_cmd->footer(
      "Measures dgemm at n = 16..1024, the per-layer metrics, dgesdd, random normals and entrywise passes\n"
      "on one core with one BLAS thread; `rcsweep plan` prices a sweep's work with them. Run it on an\n"
      "otherwise idle machine; it is reused until the CPU or BLAS changes.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A mistyped command: name the closest one instead of "A subcommand is required".
    if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) {
      std::vector<std::string> names;
      for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        names.push_back(sub->get_name());
      const std::string guess(config::nearest(argv[1], {names.begin(), names.end()}));
      std::fprintf(stderr, "error: unknown command '%s'%s; the commands are", argv[1],
                   guess.empty() ? "" : ("; did you mean '" + guess + "'?").c_str());
      for (const auto& n : names) std::fprintf(stderr, " %s", n.c_str());
      std::fprintf(stderr, " (rcsweep --help)\n");
      return 2;
    }
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (*run_cmd) {
      run.shard = cli::parse_shard(run_shard);
      if (!run.time_limit.empty()) run.options.time_limit_s = sweep::parse_duration(run.time_limit, "--time-limit");
      run.options.progress = !run.quiet;
      if (run.ranks > 0 && !sweep::started_by_launcher()) {  // -n outside an MPI job: start one
        cli::check_run(run);  // a sweep that cannot run is refused here, before any rank starts
        const char* env = std::getenv("RCSWEEP_MPIEXEC");
        return cli::launch_run(run.ranks, run.options.threads,
                               !run_mpiexec.empty() ? run_mpiexec
                               : env && *env        ? env
                                                    : "mpiexec",
                               argc, argv);
      }
      return cli::run_command(run);
    }
    // plan, info, merge and calibrate use no MPI: under a launcher only rank 0 runs them (one
    // output, one merged store, one calibration that no other rank disturbs).
    if (sweep::launcher_rank() != 0) return 0;
    if (*plan_cmd) {
      plan.shard = cli::parse_shard(plan_shard);
      return cli::plan_command(plan);
    }
    if (*merge_cmd) return cli::merge_command(merge);
    if (*export_cmd) return cli::export_command(export_cmd->remaining());
    if (*calibrate_cmd) return cli::calibrate_command(calibration_out);
    return cli::info_command(info_store, info_json);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n",
                 is_out_of_memory(e) ? out_of_memory_message("running the command", e, 0.0).c_str() : e.what());
    return 1;
  }
}
}  // namespace

int main(int argc, char** argv) {
  const int code = run_main(argc, argv);
  // Under an address-space limit (ulimit -v) a BLAS thread OpenBLAS started at load may be retrying,
  // for ever, a buffer the limit refuses; OpenBLAS's destructor would wait for it at exit. Every
  // file is closed by now: end without destructors.
  if (rcsweep::address_space_limit()) {
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}
