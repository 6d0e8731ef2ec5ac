// `rcsweep run`: a sweep on the ranks of MPI_COMM_WORLD, what it checks before any work, and what
// it reports at the end.
#include "cli/commands.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/parallel.hpp"
#include "base/platform.hpp"
#include "base/units.hpp"
#include "cli/cli_internal.hpp"
#include "cli/command_line.hpp"
#include "cli/launch.hpp"
#include "cli/run_events.hpp"
#include "linalg/blis.hpp"
#include "linalg/linalg.hpp"
#include "plan/calibration.hpp"
#include "plan/layout.hpp"
#include "plan/memory.hpp"
#include "store/dump.hpp"
#include "store/store.hpp"
#include "store/sweep_input.hpp"
#include "sweep/mpi.hpp"
#include "sweep/stop.hpp"

namespace rcsweep::cli {
namespace {
/// The memory budget of one rank: --mem-per-rank, else this node's physical memory shared by
/// `ranks_on_node` ranks. `source` says which, for messages.
double memory_budget(const std::string& mem_per_rank, int ranks_on_node, std::string& source) {
  if (!mem_per_rank.empty()) {
    source = "--mem-per-rank " + mem_per_rank;
    return parse_bytes(mem_per_rank, "--mem-per-rank");
  }
  source = "this machine's " + human_bytes(physical_memory_bytes()) + " / " + std::to_string(ranks_on_node) + " rank" +
           (ranks_on_node == 1 ? "" : "s") + "; set --mem-per-rank";
  return physical_memory_bytes() / ranks_on_node;
}

/// How long rank 0 waits for a word from a worker before it takes the worker's node for lost
/// (RunOptions::silence_s; RCSWEEP_SILENCE_S overrides, e.g. for clusters that want a failed node
/// found sooner, and tests).
double silence_s() {
  const char* v = std::getenv("RCSWEEP_SILENCE_S");
  const double t = v ? std::strtod(v, nullptr) : 0.0;
  return t > 0.0 ? t : sweep::RunOptions{}.silence_s;
}

/// The ranks of this run before MPI starts: -n, else the launcher's, else 1.
int ranks_before_mpi(const RunArgs& args) {
  if (args.ranks > 0) return args.ranks;
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char* v = std::getenv(name); v && std::atoi(v) > 0) return std::atoi(v);
  return 1;
}

/// What a run's memory depends on besides its plan (plan/memory.hpp).
plan::RankSetup run_setup(const RunArgs& args, const plan::Plan& plan, int ranks) {
  return {args.options.threads, args.options.blas_threads, ranks, blas_load_threads(),
          plan.spec.adaptive.enabled() || !args.options.reuse.empty()};
}

/// Refuse a run whose address space would exceed RLIMIT_AS (`ulimit -v`), before MPI starts and
/// before any BLAS call: OpenBLAS retries a buffer it cannot allocate for ever (its threads started
/// at load do so already), and MPI's start, a fork or the exit then wait for that thread, signals
/// or not. Exits at once (exit code 2, no MPI, no destructors that would wait for it).
void refuse_over_address_limit(const RunArgs& args, const plan::Shard& shard) {
  const auto limit = address_space_limit();
  if (!limit) return;
  std::optional<std::string> problem;
  try {
    const plan::Plan plan = plan::make_plan(store::load_sweep_with_input(args.sweep_file, args.overrides), shard);
    const plan::RankMemory m = plan::rank_memory(plan, run_setup(args, plan, ranks_before_mpi(args)));
    problem = plan::address_space_problem(m, plan::largest_bundle_text(plan, m), *limit);
  } catch (const std::exception&) {  // a bad sweep file is reported once MPI runs: the program alone here
    const plan::Plan none;
    const plan::RankMemory m = plan::rank_memory(none, run_setup(args, none, ranks_before_mpi(args)));
    problem = plan::address_space_problem(m, "rcsweep run", *limit);
  }
  if (!problem) return;
  if (sweep::launcher_rank() == 0) std::fprintf(stderr, "error: ulimit -v: %s\n", problem->c_str());
  std::fflush(nullptr);
  std::_Exit(2);
}

/// Warn (rank 0) when a node runs more threads than it has processors (`ranks_on_node` ranks x
/// `threads`: plan::oversubscription, with the numbers of the first such node), unless `rcsweep
/// run -n` said so before it started the ranks; OpenMP's idle threads then spin for turns they
/// cannot get unless OMP_WAIT_POLICY=PASSIVE lets them sleep. Otherwise when some rank may run on
/// fewer cores than its threads: Open MPI binds a rank to one core by default, and its threads
/// would then share it. Thread binding of its own (OMP_PLACES, OMP_PROC_BIND) is seen through
/// (parallel::available_processors). A collective.
void warn_if_threads_share_cores(int threads, int rank, int ranks_on_node) {
  const int cores = mpi::allreduce_min(parallel::available_processors(threads), MPI_COMM_WORLD);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const std::string mine = online > 0 ? plan::oversubscription(ranks_on_node, threads,
                                                               static_cast<int>(std::min<long>(online, 1 << 30)))
                                      : std::string();
  std::string over;
  for (const auto& text : mpi::gather(mine, 0, MPI_COMM_WORLD))
    if (over.empty()) over = text;
  if (rank != 0) return;
  if (!over.empty()) {
    if (launched_by_run_n()) return;  // said by the launcher, with what it did about it
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    const bool passive = policy && (std::string_view(policy) == "PASSIVE" || std::string_view(policy) == "passive");
    std::fprintf(stderr, "warning: %s%s; results are the same on any layout, only slower: fewer ranks or threads%s\n",
                 over.c_str(),
                 threads > 1 && !passive ? "; idle OpenMP threads spin for turns they cannot get unless "
                                           "OMP_WAIT_POLICY=PASSIVE (rcsweep run -n sets it)"
                                         : "",
                 ranks_on_node > 1 ? " per node" : "");
  } else if (cores < threads) {
    std::fprintf(stderr,
                 "warning: a rank may use only %d core%s but runs %d threads (--threads): they share %s. Give "
                 "each rank %d cores (mpiexec --map-by slot:PE=%d, srun --cpus-per-task=%d) or unbind it "
                 "(mpiexec --bind-to none); docs/CLUSTER.md\n",
                 cores, cores == 1 ? "" : "s", threads, cores == 1 ? "it" : "them", threads, threads, threads);
  }
}

/// Which products BLIS multiplies on this rank (--gemm-library): every rank of a node decides
/// alike, from the node's calibration (`calibration`), so results do not depend on the ranks x
/// threads layout.
linalg::BlisRange gemm_library_range(const std::string& choice, const std::optional<plan::Calibration>& calibration) {
  if (choice == "openblas") return {};
  if (choice == "blis") {
    if (!linalg::blis::available())
      throw ConfigError(
          {{"--gemm-library", std::string("blis, but BLIS is not available (install libblis-dev and build again)")}});
    return linalg::blis_everywhere;
  }
  return linalg::blis::available() && calibration ? plan::blis_range(*calibration) : linalg::BlisRange{};
}

/// The option checks that need the MPI job: --blas-threads with --threads, -n against its size.
void check_run_options(const RunArgs& args, int size) {
  if (args.options.threads > 1 && args.options.blas_threads > 1)
    throw ConfigError({{"--blas-threads", std::to_string(args.options.blas_threads) + " with " +
                                              std::to_string(args.options.threads) +
                                              " OpenMP threads per rank (--threads, else OMP_NUM_THREADS): "
                                              "BLAS threads inside OpenMP threads would oversubscribe the "
                                              "cores; use --threads alone (results independent of the layout)"}});
  if (args.ranks > 0 && args.ranks != size)
    throw ConfigError({{"--ranks", "-n " + std::to_string(args.ranks) + " but the MPI job has " + std::to_string(size) +
                                       " ranks (-n starts the run without mpiexec)"}});
}

/// The plan against a rank's budget (memory_budget) for `size` ranks, `on_node` of them on this
/// node: ConfigError when it does not fit. `needs_bytes` is set to the plan's estimate of a
/// rank's memory.
void check_rank_memory(const RunArgs& args, const plan::Plan& plan, int size, int on_node, double& needs_bytes) {
  std::string source;
  const plan::RankSetup setup = run_setup(args, plan, size);
  needs_bytes = plan::rank_memory(plan, setup).resident();
  plan::check_memory(plan, setup, memory_budget(args.mem_per_rank, on_node, source), source, std::nullopt);
}

/// Every rank checks the same plan against its node's budget: all refuse together. Returns the
/// ranks on this node; `needs_bytes` is set to the plan's estimate of a rank's memory.
int check_node_memory(const RunArgs& args, const plan::Plan& plan, int size, double& needs_bytes) {
  MPI_Comm node;
  mpi::check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  const int on_node = mpi::comm_size(node);
  MPI_Comm_free(&node);
  check_rank_memory(args, plan, size, on_node, needs_bytes);
  return on_node;
}

/// A store to resume is first read in a child process: a file that crashes HDF5 is refused like
/// any damaged store instead of taking the job down. So are the stores of --reuse. Returns the
/// message of the first that crashes, "" when none does.
std::string crashed_store(const sweep::RunOptions& opt) {
  std::vector<std::filesystem::path> to_read = opt.reuse;
  if (!opt.overwrite && std::filesystem::is_regular_file(opt.output)) to_read.insert(to_read.begin(), opt.output);
  for (const auto& path : to_read) {
    std::string crash;
    in_child(
        [&] {
          try {  // only a crash matters here: errors are reported by the real open below
            store::read_info(path);
          } catch (const std::exception&) {
          }
          return 0;
        },
        crash);
    if (!crash.empty()) return crashed_message(path, crash);
  }
  return "";
}

/// crashed_store at rank 0: StoreRefused on every rank when a store crashes its reader.
void check_stores_readable(const sweep::RunOptions& opt, int rank) {
  const std::string crash = mpi::bcast(rank == 0 ? crashed_store(opt) : std::string(), 0, MPI_COMM_WORLD);
  if (!crash.empty()) throw sweep::StoreRefused(crash);
}

/// --dump-weights: this shard's tasks, ascending; nullopt (rank 0 says why) when a point is an
/// encoder (no tape: its weights are the checkpoint's, or drawn again from the seed) or their dump
/// would exceed store::dump_limit_bytes. Every rank sees the same plan: all refuse together, before
/// any work.
std::optional<std::vector<std::uint64_t>> dump_tasks_allowed(const plan::Plan& plan, int rank) {
  const auto model_block = std::find_if(plan.models.begin(), plan.models.end(),
                                        [](const config::ModelParams& m) { return m.block != config::Block::stack; });
  if (model_block != plan.models.end()) {
    const bool encoder = model_block->block == config::Block::encoder;
    if (rank == 0)
      std::fprintf(stderr,
                   "error: --dump-weights: point %zu has block = \"%s\", which has no weights dump (its "
                   "weights are the checkpoint's, or drawn again from the seed: %s); leave "
                   "--dump-weights out, or dump a sweep of stack points only\n",
                   static_cast<std::size_t>(model_block - plan.models.begin()), encoder ? "encoder" : "mamba2",
                   encoder ? "docs/ENCODERS.md" : "docs/MAMBA2.md");
    return std::nullopt;
  }
  std::vector<std::uint64_t> dump_tasks;
  for (const auto& b : plan.bundles) dump_tasks.insert(dump_tasks.end(), b.tasks.begin(), b.tasks.end());
  std::sort(dump_tasks.begin(), dump_tasks.end());
  const auto bytes = store::dump_bytes(plan, dump_tasks);
  if (bytes > store::dump_limit_bytes) {
    if (rank == 0)
      std::fprintf(stderr,
                   "error: --dump-weights: the dump of %zu tasks would take about %s, more than the limit of "
                   "%s; dump a smaller sweep (fewer tasks, or smaller T, d, heads or depth)\n",
                   dump_tasks.size(), human_bytes(static_cast<double>(bytes)).c_str(),
                   human_bytes(static_cast<double>(store::dump_limit_bytes)).c_str());
    return std::nullopt;
  }
  return dump_tasks;
}

/// Rank 0 reports the run's events (sweep/events.hpp) as text on stderr and, --progress json, as
/// JSON lines on stdout (progress then only there); progress at most every second on a terminal,
/// every 10 s otherwise (RCSWEEP_PROGRESS_INTERVAL, seconds, overrides). The streams (none on other
/// ranks) never wait for their readers; closing them (at the latest when they are destroyed) gives
/// the events still waiting a bounded time to be written.
std::unique_ptr<RunEvents> report_events(const RunArgs& args, int rank, sweep::RunOptions& opt) {
  if (rank != 0) return nullptr;
  const bool json = args.progress == "json", tty = isatty(STDERR_FILENO) != 0;
  auto events = std::make_unique<RunEvents>(TextStyle{args.quiet, tty, !json}, json, STDOUT_FILENO, STDERR_FILENO);
  opt.events = events->sink();
  opt.progress_interval_s = tty && !json ? 1.0 : 10.0;
  if (const char* v = std::getenv("RCSWEEP_PROGRESS_INTERVAL")) {
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end != v && x > 0.0) opt.progress_interval_s = x;
  }
  return events;
}

/// --dump-weights after the sweep: rank 0 records and writes the tapes into the closed store; the
/// others wait for it without busy-polling (and end with `exit_code` if the launcher goes).
void write_dump_weights(const sweep::EventSink& events, const std::filesystem::path& output, const plan::Plan& plan,
                        const std::vector<std::uint64_t>& tasks, int rank, int size, int exit_code) {
  if (rank == 0) {
    const auto d = store::write_dump(output, plan, tasks);
    events(sweep::event::WeightsDumped{d.written, d.bytes, d.skipped});
  }
  if (size > 1) {
    MPI_Request request;
    mpi::check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
    for (int done = 0;;) {
      mpi::check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) break;
      if (sweep::launcher_gone()) std::_Exit(exit_code);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

/// The sweep on this rank, from the plan to the exit code; `needs_bytes` is set as soon as the plan
/// estimates a rank's memory (for an out-of-memory message).
int run_on_rank(const RunArgs& args, const plan::Shard& shard, int rank, int size, double& needs_bytes) {
  check_run_options(args, size);
  // This machine's measured rates: the library of each product, and (rank 0) the bundles' time
  // estimates for the time limit.
  const auto calibration = plan::load_calibration(plan::calibration_path());
  linalg::set_blis_range(gemm_library_range(args.gemm_library, calibration));
  plan::Plan plan = plan::make_plan(store::load_sweep_with_input(args.sweep_file, args.overrides), shard);
  const int on_node = check_node_memory(args, plan, size, needs_bytes);
  warn_if_threads_share_cores(args.options.threads, rank, on_node);
  sweep::RunOptions opt = args.options;
  opt.silence_s = silence_s();
  if (opt.output.empty()) opt.output = plan.spec.name + ".h5";
  check_store_path(opt.output);
  if (rank == 0) opt.calibration = calibration;
  check_stores_readable(opt, rank);
  std::vector<std::uint64_t> dump_tasks;  // this shard's tasks, ascending
  if (args.dump_weights) {
    auto tasks = dump_tasks_allowed(plan, rank);
    if (!tasks) return 2;
    dump_tasks = std::move(*tasks);
  }
  const auto events = report_events(args, rank, opt);
  const auto s = sweep::run_sweep(plan, opt, MPI_COMM_WORLD);
  // The launcher is gone (MPI_Finalize would fail) or killing the job (MPI_Finalize would block
  // until the SIGKILL): the store is closed, end here (the events get less time: the SIGKILL comes).
  if (sweep::exit_without_finalize()) {
    if (events) events->close(std::chrono::milliseconds(500));
    std::fflush(nullptr);
    std::_Exit(s.exit_code());
  }
  if (args.dump_weights) write_dump_weights(opt.events, opt.output, plan, dump_tasks, rank, size, s.exit_code());
  return exit_code_for_launcher(s.exit_code());
}

/// A refusal before any work (exit code 2) as the run says it: a ConfigError of an option
/// ("error: --threads: ..."), of the sweep file ("error: invalid sweep file F:" and its issues), a
/// refused store ("error: ...").
void say_refused(const RunArgs& args, const std::exception& e) {
  const auto* config = dynamic_cast<const ConfigError*>(&e);
  const bool option = !config || (!config->issues().empty() && config->issues().front().key.starts_with("--"));
  if (option)
    std::fprintf(stderr, "error: %s\n", e.what());
  else
    std::fprintf(stderr, "error: invalid sweep file %s%s:\n%s\n", args.sweep_file.c_str(),
                 args.overrides.empty() ? "" : " with its command-line overrides", e.what());
}

/// Whether the ranks `rcsweep run -n` starts with `mpiexec` all run on this machine, so that its
/// memory is theirs: MPIEXEC names no hosts and no scheduler gave the job several nodes.
bool ranks_on_this_machine(const std::string& mpiexec) {
  std::istringstream words(mpiexec);
  for (std::string w; words >> w;)
    if (w.find("host") != std::string::npos || w.find("machinefile") != std::string::npos || w == "-H" || w == "-f" ||
        w == "-npernode" || w == "--npernode")
      return false;
  for (const char* name : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"})
    if (const char* v = std::getenv(name); v && std::atoi(v) > 1) return false;
  if (const char* nodefile = std::getenv("PBS_NODEFILE"); nodefile && *nodefile) {
    std::ifstream in(nodefile);
    std::string first;
    for (std::string host; std::getline(in, host);)
      if (!host.empty() && (first.empty() ? (first = host, false) : host != first)) return false;
  }
  return true;
}

/// Prints the events the checks before the ranks report (a store whose holder is stopping is
/// waited for) as the run prints them.
sweep::EventSink preflight_events(const RunArgs& args) {
  const bool json = args.progress == "json";
  const TextStyle style{args.quiet, isatty(STDERR_FILENO) != 0, !json};
  return [style, json](const sweep::Event& e) {
    std::fputs(event_text(e, style).c_str(), stderr);
    std::fflush(stderr);
    if (json) {
      std::fputs(event_json(e).c_str(), stdout);
      std::fflush(stdout);
    }
  };
}

/// What `run -n` checks before it starts `mpiexec` (its command, for where the ranks run): every
/// refusal the ranks would make before any work that this process can decide alone (the options,
/// the sweep file with its overrides, ulimit -v, the memory budget when the ranks are all on this
/// machine or --mem-per-rank is given, --dump-weights, the store and its writer lock, the --reuse
/// stores: sweep::check_store), said as a single process says it. Returns 0, or the exit code (2)
/// after saying why, so that no rank starts for a run that cannot start.
int check_run(const RunArgs& args, const plan::Shard& shard, const std::string& mpiexec) {
  refuse_over_address_limit(args, shard);  // exits 2 itself
  try {
    check_run_options(args, args.ranks);
    const plan::Plan plan = plan::make_plan(store::load_sweep_with_input(args.sweep_file, args.overrides), shard);
    // The default budget is this machine's memory shared by its ranks: known only when all are here.
    if (!args.mem_per_rank.empty() || ranks_on_this_machine(mpiexec)) {
      double needs_bytes = 0.0;
      check_rank_memory(args, plan, args.ranks, args.ranks, needs_bytes);
    }
    sweep::RunOptions opt = args.options;
    if (opt.output.empty()) opt.output = plan.spec.name + ".h5";
    check_store_path(opt.output);
    if (const std::string crash = crashed_store(opt); !crash.empty()) throw sweep::StoreRefused(crash);
    if (args.dump_weights && !dump_tasks_allowed(plan, 0)) return 2;
    opt.events = preflight_events(args);
    sweep::check_store(plan, opt);
    return 0;
  } catch (const ConfigError& e) {
    say_refused(args, e);
    return 2;
  } catch (const sweep::StoreRefused& e) {
    say_refused(args, e);
    return 2;
  }
}

/// The run on this rank of MPI_COMM_WORLD (run_command's work once the options are read).
int run_ranks(const RunArgs& args, const plan::Shard& shard) {
  // Before MPI_Init: a singleton MPI_Init looks like a launched rank, and a stop signal that comes
  // while MPI starts (mpiexec forwards SIGUSR1 at once) must not kill the rank.
  if (sweep::watch_launcher() && sweep::launcher_gone()) std::_Exit(4);  // started as its launcher died
  sweep::install_stop_handlers();
  refuse_over_address_limit(args, shard);
  mpi::Session session(nullptr, nullptr);
  const int rank = mpi::comm_rank(MPI_COMM_WORLD), size = mpi::comm_size(MPI_COMM_WORLD);
  double needs_bytes = 0.0;  // the plan's estimate of a rank's memory, for an out-of-memory message
  try {
    return run_on_rank(args, shard, rank, size, needs_bytes);
  } catch (const ConfigError& e) {  // every rank read the same file: report once
    if (rank == 0) say_refused(args, e);
    return 2;
  } catch (const sweep::StoreRefused& e) {  // thrown on every rank
    if (rank == 0) say_refused(args, e);
    return 2;
  } catch (const std::exception& e) {
    if (is_out_of_memory(e))
      std::fprintf(stderr, "[rank %d/%d] error: %s\n", rank, size,
                   out_of_memory_message("running the sweep", e, needs_bytes).c_str());
    else
      std::fprintf(stderr, "[rank %d/%d] error: %s\n", rank, size, e.what());
    std::fflush(stderr);
    if (sweep::exit_without_finalize()) std::_Exit(1);  // no launcher to abort the job through
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
}  // namespace

CLI::App* add_run_command(CLI::App& app, RunArgs& args) {
  auto* cmd = app.add_subcommand("run",
                                 "Run a sweep into an HDF5 store (resumes an existing store of the same sweep).");
  cmd->footer("Run with one MPI rank per core, e.g.\n"
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
              overrides_footer("run"));
  cmd->add_option("sweep", args.sweep_file, "sweep file (TOML)")->required()->check(sweep_file_check());
  cmd->add_option("overrides", args.overrides, overrides_help());
  auto* ranks_opt = cmd->add_option(
                           "-n,--ranks", args.ranks,
                           "run on N MPI ranks: starts `mpiexec -n N` itself, so that Ctrl-C and SIGTERM stop the\n"
                           "run cleanly with exit code 4 (under mpiexec: the job must have N ranks)")
                        ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--mpiexec", args.mpiexec,
                  "with -n: the mpiexec command with its options, split at spaces, e.g.\n"
                  "\"mpiexec --oversubscribe --allow-run-as-root\" (default: $RCSWEEP_MPIEXEC, else mpiexec)")
      ->needs(ranks_opt);
  cmd->add_option("-o,--output", args.options.output, "output store (HDF5); default: <sweep name>.h5");
  auto* resume_flag = cmd->add_flag("--resume", args.options.require_existing,
                                    "require an existing store and continue it (the default when it exists)");
  cmd->add_flag("--overwrite", args.options.overwrite, "replace an existing store")->excludes(resume_flag);
  cmd->add_option(
      "--shard", args.shard,
      "run only tasks with id % n == i (array jobs; adaptive replicates: points with point % n == i), as i/n");
  args.options.threads = parallel::threads_from_environment();
  cmd->add_option("--threads", args.options.threads,
                  "OpenMP threads per rank (default: OMP_NUM_THREADS, else 1). Results are bitwise the same\n"
                  "for every ranks x threads layout; threads pay off for big tasks (T or d in the\n"
                  "thousands) and bundles too big for one rank per core (docs/CLUSTER.md)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--blas-threads", args.options.blas_threads,
                  "BLAS threads per OpenMP thread (default 1). Above 1 results depend on the layout and\n"
                  "--threads must be 1: use --threads instead")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--gemm-library", args.gemm_library,
                  "which library multiplies the matrix products: auto (default: BLIS for the sizes `rcsweep\n"
                  "calibrate` measured it faster on this machine, OpenBLAS for the rest and for all without a\n"
                  "calibration), openblas, or blis (every product). Recorded per task with the BLAS kernel")
      ->check(CLI::IsMember({"auto", "openblas", "blis"}));
  auto* quiet = cmd->add_flag("-q,--quiet", args.quiet,
                              "no progress, notes or summary on stderr (stops and errors are still said)");
  cmd->add_option("--progress", args.progress,
                  "how the run reports what happens: text (default: lines on stderr), json (one JSON object\n"
                  "per event on stdout, for programs: docs/EVENTS.md) or none (as -q)")
      ->check(CLI::IsMember({"text", "json", "none"}))
      ->excludes(quiet);
  cmd->add_option("--mem-per-rank", args.mem_per_rank,
                  "memory budget of one rank (e.g. 4G, 512M); a sweep whose largest bundle would not fit is\n"
                  "refused before any work (exit 2). Default: physical memory / ranks on the node");
  cmd->add_flag("--retry-failed", args.options.retry_failed,
                "run failed, diverged and vanished tasks of the store again");
  cmd->add_flag("--fail-on-diverged", args.options.fail_on_diverged,
                "exit 3 when some task diverged or vanished (by default they are outcomes: exit 0)");
  cmd->add_option("--reuse", args.options.reuse,
                  "copy the finished results of this older store (repeatable) into the tasks they fit instead\n"
                  "of computing them: tasks with the same parameters, replicate, seed, largest depth and\n"
                  "[output] (docs/CONFIG.md \"Growing a sweep\"); e.g. more replicates or axis values into a new -o")
      ->check(CLI::ExistingFile);
  cmd->add_option("--grace", args.options.grace_s,
                  "seconds that running tasks get to finish after a stop signal (default 30)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--time-limit", args.time_limit,
                  "stop cleanly before this wall time (e.g. 90s, 90m, 2h, 1h30m, or as Slurm's --time: 90 = 90 min,\n"
                  "1:30 = 1 min 30 s, 1:30:00, 2-12 = 2 days 12 h): no unit of work is started\n"
                  "whose estimated time would overrun it (at this machine's rates once `rcsweep calibrate` has run);\n"
                  "SLURM_JOB_END_TIME and PBS_WALLTIME are also honoured");
  cmd->add_flag("--dump-weights", args.dump_weights,
                "after the sweep, write every done task's X_l and weights into /dump of the store, for\n"
                "scripts/rcsweep_recompute.py (small sweeps only: refused with exit code 2, before any\n"
                "work, when the dump would exceed " +
                    std::to_string(store::dump_limit_bytes >> 20) + " MiB)");
  return cmd;
}

int run_command(const RunArgs& given) {
  RunArgs args = given;  // with its texts read: the time limit, --progress none as -q
  const plan::Shard shard = parse_shard(args.shard);
  if (!args.time_limit.empty()) args.options.time_limit_s = sweep::parse_duration(args.time_limit, "--time-limit");
  if (args.progress == "none") args.quiet = true;
  if (args.ranks > 0 && !sweep::started_by_launcher()) {  // -n outside an MPI job: start one
    const char* env = std::getenv("RCSWEEP_MPIEXEC");
    const std::string mpiexec = !args.mpiexec.empty() ? args.mpiexec : env && *env ? env : "mpiexec";
    // What the ranks would refuse before any work is refused here, before any rank starts.
    if (const int refused = check_run(args, shard, mpiexec)) return refused;
    return launch_run(args.ranks, args.options.threads, mpiexec);
  }
  return run_ranks(args, shard);
}

}  // namespace rcsweep::cli
