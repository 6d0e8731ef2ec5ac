#include "cli/commands.hpp"

#include "cli/calibrate.hpp"
#include "cli/launch.hpp"
#include "metrics/metrics.hpp"
#include "plan/adaptive.hpp"
#include "plan/cost_model.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/units.hpp"
#include "base/parallel.hpp"
#include "base/platform.hpp"
#include "config/overrides.hpp"
#include "config/sweep_spec.hpp"
#include "linalg/linalg.hpp"
#include "plan/job_script.hpp"
#include "plan/layout.hpp"
#include "plan/memory.hpp"
#include "plan/threads.hpp"
#include "store/dump.hpp"
#include "store/matrix_file.hpp"
#include "rcsweep/version.hpp"
#include "store/reuse.hpp"
#include "store/store.hpp"
#include "sweep/mpi.hpp"
#include "sweep/stop.hpp"

namespace rcsweep::cli {
namespace {

double physical_memory_bytes() {
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

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

/// How long reading a store may take in in_child (RCSWEEP_STORE_READ_TIMEOUT overrides, for tests).
unsigned read_timeout_s() {
  const char* v = std::getenv("RCSWEEP_STORE_READ_TIMEOUT");
  const long t = v ? std::strtol(v, nullptr, 10) : 0;
  return t > 0 ? static_cast<unsigned>(t) : 120u;
}

/// How long rank 0 waits for a word from a worker before it takes the worker's node for lost
/// (RunOptions::silence_s; RCSWEEP_SILENCE_S overrides, e.g. for clusters that want a failed node
/// found sooner, and tests).
double silence_s() {
  const char* v = std::getenv("RCSWEEP_SILENCE_S");
  const double t = v ? std::strtod(v, nullptr) : 0.0;
  return t > 0.0 ? t : sweep::RunOptions{}.silence_s;
}

/// Run `read` (returning an exit code) in a child process, so that a crash of the HDF5 library on
/// a damaged file cannot take this process down: HDF5 1.10 reads some damaged files out of bounds
/// instead of failing (a corrupted global heap, where variable-length string attributes live,
/// makes H5Aread copy past its buffer: SIGSEGV), or loops forever (read_timeout_s). Returns the
/// child's exit code, or nullopt with `crash` saying what happened when the child was killed.
std::optional<int> in_child(const std::function<int()>& read, std::string& crash) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = ::fork();
  if (child < 0) return read();  // no process to spare: read it here
  if (child == 0) {
    // the plain default action: no crash report from a handler inherited from MPI
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
    alarm(read_timeout_s());  // a damaged file can also make HDF5 loop forever
    int rc = 1;
    try {
      rc = read();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(rc);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0)
    if (errno != EINTR) throw Error(std::string("waitpid: ") + std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
    crash = "reading it did not finish within " + std::to_string(read_timeout_s()) + " s";
  else
    crash = std::string("reading it crashed the HDF5 library: ") +
            (WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "unknown status");
  return std::nullopt;
}

std::string crashed_message(const std::filesystem::path& path, const std::string& crash) {
  return path.string() + ": damaged HDF5 file (" + crash + ")";
}

std::string join_values(const std::vector<config::ParamValue>& values, std::size_t max_shown = 8) {
  std::string out;
  for (std::size_t i = 0; i < values.size() && i < max_shown; ++i) out += (i ? ", " : "") + config::to_text(values[i]);
  if (values.size() > max_shown) out += ", ...";
  return out;
}

/// input = "file": read model.input_path (relative to the sweep file's folder) into the spec, and
/// check its shape against T and d at every grid point that uses it. Problems are ConfigErrors on
/// model.input_path (exit 2, before any work).
void load_input_file(config::SweepSpec& spec, const std::filesystem::path& sweep_file) {
  if (spec.input_path.empty()) return;  // parse_sweep requires it whenever input can be "file"
  std::filesystem::path path = spec.input_path;
  if (path.is_relative()) path = sweep_file.parent_path() / path;
  Matrix X;
  try {
    X = store::read_matrix(path, spec.input_dataset);
  } catch (const StoreError& e) {
    throw ConfigError(std::vector<ConfigIssue>{{"model.input_path", std::string(e.what())}});
  }
  const auto T = static_cast<std::int64_t>(X.rows()), d = static_cast<std::int64_t>(X.cols());
  std::size_t bad = 0, first = 0;
  std::int64_t want_T = 0, want_d = 0;
  for (std::size_t p = 0; p < spec.n_points(); ++p) {
    const auto values = spec.point(p);
    if (std::get<std::string>(config::param_value(values, "input")) != "file") continue;
    const auto t = std::get<std::int64_t>(config::param_value(values, "T"));
    const auto w = std::get<std::int64_t>(config::param_value(values, "d"));
    if (t == T && w == d) continue;
    if (bad++ == 0) {
      first = p;
      want_T = t;
      want_d = w;
    }
  }
  if (bad)
    throw ConfigError(
        {{"model.input_path",
          "dataset '" + spec.input_dataset + "' of '" + path.string() + "' is " + std::to_string(T) + " x " +
              std::to_string(d) + " (rows x columns) but must be T x d = " + std::to_string(want_T) + " x " +
              std::to_string(want_d) +
              (spec.n_points() > 1 ? " (at " + std::to_string(bad) + " of " + std::to_string(spec.n_points()) +
                                         " grid points, e.g. point " + std::to_string(first) + ")"
                                   : std::string())}});
  spec.set_input_file(std::move(X));
}

/// load_sweep with the command-line overrides, then the input file if the sweep has one.
config::SweepSpec load_spec(const std::filesystem::path& sweep_file, const std::vector<std::string>& overrides) {
  config::SweepSpec spec = config::load_sweep(sweep_file, overrides);
  load_input_file(spec, sweep_file);
  return spec;
}

/// A store path that cannot even be looked at (a symbolic link loop, a name too long, a part that
/// is not a directory) is refused on --output (exit 2) before any work; a missing file is a new store.
void check_store_path(const std::filesystem::path& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec && st.type() != std::filesystem::file_type::not_found)
    throw ConfigError({{"--output", config::printable(path.string()) + ": " + ec.message()}});
}

}  // namespace

double parse_bytes(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    return ConfigError({{what, "expected a size like 4G, 512M, 2GiB or a number of bytes, got '" + text + "'"}});
  };
  std::size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();  // GiB = G
  double scale = 1.0;
  if (unit.size() == 1) {
    const std::string units = "KMGT";
    const auto k = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    if (k == std::string::npos) throw bad();
    scale = std::pow(1024.0, static_cast<double>(k + 1));
  } else if (!unit.empty()) {
    throw bad();
  }
  if (!(value > 0.0) || text[0] == '+' || !std::isfinite(value * scale)) throw bad();
  return value * scale;
}

plan::Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  try {
    if (slash != std::string::npos) {
      std::size_t a = 0, b = 0;
      const int i = std::stoi(text.substr(0, slash), &a);
      const int n = std::stoi(text.substr(slash + 1), &b);
      if (a == slash && b == text.size() - slash - 1 && n >= 1 && i >= 0 && i < n) return {i, n};
    }
  } catch (const std::exception&) {
  }
  throw ConfigError({{"--shard", "expected i/n with 0 <= i < n, got '" + text + "'"}});
}

namespace {
/// Threads OpenBLAS started when it was loaded (its thread count before any call sets it).
int blas_load_threads() {
  const int n = linalg::set_blas_threads(1);
  linalg::set_blas_threads(n);
  return n;
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
void refuse_over_address_limit(const RunArgs& args) {
  const auto limit = address_space_limit();
  if (!limit) return;
  std::optional<std::string> problem;
  try {
    const plan::Plan plan = plan::make_plan(load_spec(args.sweep_file, args.overrides), args.shard);
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
}  // namespace

/// Warn (rank 0) when some rank may run on fewer cores than its threads (a collective): Open MPI
/// binds a rank to one core by default, and its threads would then share it. Thread binding of its
/// own (OMP_PLACES, OMP_PROC_BIND) is seen through (parallel::available_processors).
/// Also when a node runs more threads than it has processors (`ranks_on_node` ranks): OpenMP's
/// threads then spin for turns they cannot get unless OMP_WAIT_POLICY=PASSIVE lets them sleep.
void warn_if_threads_share_cores(int threads, int rank, int ranks_on_node) {
  const int cores = mpi::allreduce_min(parallel::available_processors(threads), MPI_COMM_WORLD);
  if (rank == 0 && cores < threads)
    std::fprintf(stderr,
                 "warning: a rank may use only %d core%s but runs %d threads (--threads): they share %s. Give "
                 "each rank %d cores (mpiexec --map-by slot:PE=%d, srun --cpus-per-task=%d) or unbind it "
                 "(mpiexec --bind-to none); docs/CLUSTER.md\n",
                 cores, cores == 1 ? "" : "s", threads, cores == 1 ? "it" : "them", threads, threads, threads);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const bool passive = policy && (std::string_view(policy) == "PASSIVE" || std::string_view(policy) == "passive");
  const int oversubscribed = mpi::allreduce_max(
      threads > 1 && online > 0 && static_cast<long>(ranks_on_node) * threads > online && !passive, MPI_COMM_WORLD);
  if (rank == 0 && oversubscribed)
    std::fprintf(stderr,
                 "warning: %d ranks x %d threads on a node of %ld processors: idle OpenMP threads spin for "
                 "turns they cannot get; set OMP_WAIT_POLICY=PASSIVE (rcsweep run -n does) or run fewer ranks "
                 "or threads\n",
                 ranks_on_node, threads, online);
}

void check_run(const RunArgs& args) { plan::make_plan(load_spec(args.sweep_file, args.overrides), args.shard); }

int run_command(const RunArgs& args) {
  // Before MPI_Init: a singleton MPI_Init looks like a launched rank, and a stop signal that comes
  // while MPI starts (mpiexec forwards SIGUSR1 at once) must not kill the rank.
  if (sweep::watch_launcher() && sweep::launcher_gone()) std::_Exit(4);  // started as its launcher died
  sweep::install_stop_handlers();
  refuse_over_address_limit(args);
  mpi::Session session(nullptr, nullptr);
  const int rank = mpi::comm_rank(MPI_COMM_WORLD), size = mpi::comm_size(MPI_COMM_WORLD);
  double needs_bytes = 0.0;  // the plan's estimate of a rank's memory, for an out-of-memory message
  try {
    if (args.options.threads > 1 && args.options.blas_threads > 1)
      throw ConfigError({{"--blas-threads", std::to_string(args.options.blas_threads) + " with " +
                                                std::to_string(args.options.threads) +
                                                " OpenMP threads per rank (--threads, else OMP_NUM_THREADS): "
                                                "BLAS threads inside OpenMP threads would oversubscribe the "
                                                "cores; use --threads alone (results independent of the layout)"}});
    if (args.ranks > 0 && args.ranks != size)
      throw ConfigError({{"--ranks", "-n " + std::to_string(args.ranks) + " but the MPI job has " +
                                         std::to_string(size) + " ranks (-n starts the run without mpiexec)"}});
    plan::Plan plan = plan::make_plan(load_spec(args.sweep_file, args.overrides), args.shard);
    int on_node = 1;
    {  // every rank checks the same plan against its node's budget: all refuse together
      MPI_Comm node;
      mpi::check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
                 "MPI_Comm_split_type");
      on_node = mpi::comm_size(node);
      MPI_Comm_free(&node);
      std::string source;
      const plan::RankSetup setup = run_setup(args, plan, size);
      needs_bytes = plan::rank_memory(plan, setup).resident();
      plan::check_memory(plan, setup, memory_budget(args.mem_per_rank, on_node, source), source, std::nullopt);
    }
    warn_if_threads_share_cores(args.options.threads, rank, on_node);
    sweep::RunOptions opt = args.options;
    opt.silence_s = silence_s();
    if (opt.output.empty()) opt.output = plan.spec.name + ".h5";
    check_store_path(opt.output);
    // Bundle time estimates for the time limit at this machine's measured rates, when stored.
    if (rank == 0) opt.calibration = load_calibration(calibration_path());
    // A store to resume is first read in a child process (rank 0): a file that crashes HDF5 is
    // refused like any damaged store instead of taking the job down.
    // So are the stores of --reuse.
    std::vector<std::filesystem::path> to_read = opt.reuse;
    if (!opt.overwrite && std::filesystem::is_regular_file(opt.output)) to_read.insert(to_read.begin(), opt.output);
    for (const auto& path : to_read) {
      std::string crash;
      if (rank == 0)
        in_child(
            [&] {
              try {  // only a crash matters here: errors are reported by the real open below
                store::read_info(path);
              } catch (const std::exception&) {
              }
              return 0;
            },
            crash);
      crash = mpi::bcast(crash, 0, MPI_COMM_WORLD);
      if (!crash.empty()) throw sweep::StoreRefused(crashed_message(path, crash));
    }
    std::vector<std::uint64_t> dump_tasks;  // this shard's tasks, ascending
    if (args.dump_weights) {                // every rank sees the same plan: all refuse together, before any work
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
        return 2;
      }
    }
    const auto s = sweep::run_sweep(plan, opt, MPI_COMM_WORLD);
    if (rank == 0 && !args.quiet) {
      std::fprintf(stderr, "[rcsweep] %s after %s: %llu done, %llu diverged, %llu vanished, %llu failed this run",
                   s.exit_code() == 4 ? "stopped" : "finished", human_seconds(s.wall_s).c_str(),
                   static_cast<unsigned long long>(s.done), static_cast<unsigned long long>(s.diverged),
                   static_cast<unsigned long long>(s.vanished), static_cast<unsigned long long>(s.failed));
      if (s.not_needed)
        std::fprintf(stderr, ", %llu replicates not needed", static_cast<unsigned long long>(s.not_needed));
      if (s.skipped) std::fprintf(stderr, " (%llu were already finished)", static_cast<unsigned long long>(s.skipped));
      std::fprintf(stderr, "; store %s\n", opt.output.c_str());
      if (s.ended_first_layer >= 0)
        std::fprintf(stderr, "[rcsweep] this run's diverged and vanished tasks ended at layers %d to %d\n",
                     s.ended_first_layer, s.ended_last_layer);
      if (s.store_diverged + s.store_vanished > 0)
        std::fprintf(stderr,
                     "[rcsweep] the store holds %llu diverged (X non-finite) and %llu vanished (X exactly zero) tasks: "
                     "outcomes of the stack, recorded with the layers before (/tasks/message)%s\n",
                     static_cast<unsigned long long>(s.store_diverged),
                     static_cast<unsigned long long>(s.store_vanished),
                     s.fail_on_diverged ? "; --fail-on-diverged: exit code 3" : "");
      if (s.store_failed > 0)
        std::fprintf(stderr,
                     "[rcsweep] the store holds %llu failed tasks (errors, see /tasks/message; --retry-failed runs "
                     "them again)\n",
                     static_cast<unsigned long long>(s.store_failed));
    }
    if (rank == 0 && s.exit_code() == 4) {  // even with --quiet: the user must know how to go on
      const std::string why = s.lost_rank > 0   ? "stopped because rank " + std::to_string(s.lost_rank) + " was lost"
                              : s.launcher_gone ? "stopped because " + sweep::launcher_name() + " is gone"
                              : s.stop_signal
                                  ? "stopped by " + sweep::signal_name(s.stop_signal) +
                                        (sweep::launcher_teardown() ? " from " + sweep::launcher_name() : std::string())
                                  : "time limit of " + human_seconds(s.time_limit_s) + " reached";
      std::fprintf(stderr,
                   "[rcsweep] %s: %llu tasks left, every finished task is in %s; resume with the same command\n",
                   why.c_str(), static_cast<unsigned long long>(s.store_pending), opt.output.c_str());
    }
    // The launcher is gone (MPI_Finalize would fail) or killing the job (MPI_Finalize would block
    // until the SIGKILL): the store is closed, end here.
    if (sweep::exit_without_finalize()) {
      std::fflush(nullptr);
      std::_Exit(s.exit_code());
    }
    if (args.dump_weights && rank == 0) {  // the store is closed: rank 0 records and writes the tapes
      const auto d = store::write_dump(opt.output, plan, dump_tasks);
      if (!args.quiet) {
        const std::string skipped = d.skipped ? "; " + std::to_string(d.skipped) + " tasks not done (no dump)"
                                              : std::string();
        std::fprintf(stderr, "[rcsweep] --dump-weights: /dump holds %llu tasks (%s)%s\n",
                     static_cast<unsigned long long>(d.written), human_bytes(static_cast<double>(d.bytes)).c_str(),
                     skipped.c_str());
      }
    }
    if (args.dump_weights && size > 1) {  // the others wait for rank 0's dump without busy-polling
      MPI_Request request;
      mpi::check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
      for (int done = 0;;) {
        mpi::check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) break;
        if (sweep::launcher_gone()) std::_Exit(s.exit_code());
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    return exit_code_for_launcher(s.exit_code());
  } catch (const ConfigError& e) {  // every rank read the same file: report once
    const bool option = !e.issues().empty() && e.issues().front().key.starts_with("--");
    if (rank == 0 && option) std::fprintf(stderr, "error: %s\n", e.what());
    if (rank == 0 && !option)
      std::fprintf(stderr, "error: invalid sweep file %s%s:\n%s\n", args.sweep_file.c_str(),
                   args.overrides.empty() ? "" : " with its command-line overrides", e.what());
    return 2;
  } catch (const sweep::StoreRefused& e) {  // thrown on every rank
    if (rank == 0) std::fprintf(stderr, "error: %s\n", e.what());
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

namespace {
/// The cores per node of the scheduler's compute nodes (the partition's, when given): the most
/// that `sinfo -h -o %c` (Slurm) or `pbsnodes -a` (PBS: resources_available.ncpus) reports; 0 when
/// the scheduler's commands are missing or say nothing.
int scheduler_cores_per_node(plan::Scheduler scheduler, const std::string& partition) {
  const bool slurm = scheduler == plan::Scheduler::slurm;
  const std::string cmd = slurm ? "timeout 20 sinfo -h -o %c" +
                                      (partition.empty() ? std::string() : " -p " + plan::shell_quote(partition))
                                : std::string("timeout 20 pbsnodes -a");
  FILE* pipe = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!pipe) return 0;
  int most = 0;
  char line[512];
  while (std::fgets(line, sizeof line, pipe)) {
    const char* at = line;
    if (!slurm) {
      at = std::strstr(line, "resources_available.ncpus = ");
      if (!at) continue;
      at += std::strlen("resources_available.ncpus = ");
    }
    most = std::max(most, std::atoi(at));  // sinfo: "64", or "32+" where nodes differ
  }
  ::pclose(pipe);
  return most;
}

/// --cores, or with --emit the scheduler's nodes' (a job runs on them, not on this login node):
/// 0 when the scheduler does not tell (size_job then refuses, naming --cores).
int planned_cores(const PlanArgs& args) {
  if (args.cores > 0) return args.cores;
  if (args.emit.empty()) return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return scheduler_cores_per_node(plan::parse_scheduler(args.emit), args.site.partition);
}

/// `plan --emit`: the job script on stdout, what it was sized for on stderr.
int emit_job_script(const PlanArgs& args, const plan::Plan& plan, const plan::WorkEstimate& work,
                    const plan::Layout& layout) {
  const auto scheduler = plan::parse_scheduler(args.emit);
  plan::check_site(scheduler, args.site);
  std::string setup;
  if (!args.setup.empty()) {
    std::error_code bad;
    if (!std::filesystem::is_regular_file(args.setup, bad))
      throw ConfigError(
          {{"--setup", args.setup.string() + ": no such file (the script sources it, e.g. with module load lines)"}});
    setup = std::filesystem::absolute(args.setup).lexically_normal().string();
  }
  const int cores = planned_cores(args);
  const int threads = layout.chosen.threads;
  const auto s = plan::size_job(work, {args.nodes, cores, args.hours, threads});
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string per_rank = threads > 1 ? " x " + std::to_string(threads) + " threads" : "";
  char line[768];
  std::snprintf(line, sizeof line,
                "sweep \"%s\" (plan %s): %zu tasks in %zu bundles, about %s on one core (rough cost model)\n"
                "layout %s per node: %s\n"
                "sized for --nodes %d --cores %d --hours %g: %d ranks%s on %d node(s) per job, %d shard(s),\n"
                "about %s each; asking %s and %.0f MiB per rank",
                plan.spec.name.c_str(), plan.hash.c_str(), plan.tasks.size(), plan.bundles.size(),
                human_seconds(work.core_seconds).c_str(), plan::describe(layout.chosen).c_str(), layout.reason.c_str(),
                args.nodes, cores, args.hours, s.ranks, per_rank.c_str(), s.nodes, s.shards,
                human_seconds(s.estimate_s).c_str(), plan::format_walltime(s.walltime_s).c_str(), s.mem_per_rank_mib);
  std::string summary = line;
  const bool slurm = scheduler == plan::Scheduler::slurm;
  const std::string out = plan.spec.name + ".h5";
  if (s.shards > 1)
    summary += std::string("\nsubmit this script alone (") + (slurm ? "sbatch" : "qsub") +
               " FILE; the shipped script's own notes below name submit_array.sh):\n"
               "the merge of the shards is in the script: its first element to start submits it to run\n"
               "after the array (" +
               (slurm ? "sbatch --dependency=afterok" : "qsub -W depend=afterok") +
               "); with MERGE_JOB=none, merge after the array yourself: " +
               (slurm ? "sbatch --dependency=afterok:ARRAY_JOB_ID jobs/slurm/merge_job.sh "
                      : "qsub -W depend=afterok:ARRAY_JOB_ID -v SWEEP=..,OUT=.. jobs/pbs/merge_job.sh ") +
               plan::shell_quote(std::filesystem::absolute(args.sweep_file).string()) + " " + out;
  const plan::ScriptNames names{std::filesystem::absolute(args.sweep_file).string(),
                                out,
                                plan.spec.name,
                                ec ? std::string("rcsweep") : self.string(),
                                summary,
                                args.overrides,
                                args.site,
                                setup};
  std::fputs(plan::job_script(scheduler, s, names).c_str(), stdout);
  std::fprintf(stderr, "%s\n", summary.c_str());
  if (const int asked = s.nodes * s.ranks_per_node * threads; s.enough_cores * plan::oversize_factor <= asked) {
    const int nodes = (s.enough_cores + cores - 1) / cores;
    const std::string fewer = nodes > 1 ? "--nodes " + std::to_string(nodes)
                                        : "--nodes 1 --cores " + std::to_string(s.enough_cores);
    std::fprintf(stderr,
                 "note: the sweep is about %s of one core: %d core%s would finish it in about %s, the job asks for %d "
                 "(a job this short is mostly queueing and start-up): %s is enough\n",
                 human_seconds(work.core_seconds).c_str(), s.enough_cores, s.enough_cores == 1 ? "" : "s",
                 human_seconds(std::max(work.core_seconds / s.shards / s.enough_cores, work.largest_task_s)).c_str(),
                 asked, fewer.c_str());
  }
  const char* home = std::getenv("HOME");
  for (const auto& path : plan::unshared_paths(names, args.nodes, home ? home : ""))
    std::fprintf(stderr,
                 "warning: the script names the %s, which compute nodes may not see (/tmp, /dev/shm and /run are "
                 "local to a node; home directories are not always mounted on them): put it on a shared file "
                 "system or set it when you submit; the script is written all the same\n",
                 path.c_str());
  return 0;
}
}  // namespace

namespace {
/// What `run -o STORE` would do with an existing store of this or another sweep.
void print_outlook(const std::filesystem::path& path, const plan::Plan& plan) {
  const auto info = store::read_info(path);
  if (info.plan_hash == plan.hash) {
    std::printf("store         %s: a run resumes it, %llu of %llu tasks left\n", path.c_str(),
                static_cast<unsigned long long>(info.n_pending), static_cast<unsigned long long>(info.n_tasks));
    return;
  }
  const auto r = store::compare_with_store(path, plan);
  const std::uint64_t copied = r.finished - r.not_in_sweep - r.recomputed - r.other_shards;
  if (!r.blockers.empty())
    std::printf("store         %s: made from another sweep, none of whose results fits: a run refuses it\n",
                path.c_str());
  else if (r.not_in_sweep + r.other_shards > 0)
    std::printf(
        "store         %s: made from another sweep; %llu of its finished tasks are not tasks of this one (or of this shard): a run "
        "refuses it (--reuse it into another -o to copy the %llu that fit)\n",
        path.c_str(), static_cast<unsigned long long>(r.not_in_sweep + r.other_shards),
        static_cast<unsigned long long>(copied));
  else
    std::printf("store         %s: made from another version of this sweep: a run grows it, copying %llu finished "
                "tasks and computing %llu\n",
                path.c_str(), static_cast<unsigned long long>(copied),
                static_cast<unsigned long long>(plan.tasks.size() - copied));
  std::printf("%s", store::describe(r).c_str());
}

/// What `run -o STORE` would do with the store: start it, resume it, grow it or refuse it. Read in
/// a child process, like every store a run opens (a damaged file cannot crash `plan`).
void print_store_outlook(const std::filesystem::path& path, const plan::Plan& plan) {
  if (!std::filesystem::exists(path)) {
    std::printf("store         %s does not exist: a run starts it\n", path.c_str());
    return;
  }
  std::string crash;
  const auto rc = in_child(
      [&] {
        try {
          print_outlook(path, plan);
        } catch (const std::exception& e) {
          std::printf("store         %s: a run refuses it (%s)\n", path.c_str(), e.what());
        }
        return 0;
      },
      crash);
  if (!rc) std::printf("store         %s\n", crashed_message(path, crash).c_str());
}

}  // namespace

int export_command(const std::vector<std::string>& args) {
  std::error_code ec;
  const auto dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  std::filesystem::path script;
  for (const auto& candidate : {dir / "rcsweep-export", dir / ".." / "scripts" / "rcsweep_export.py"})
    if (std::filesystem::exists(candidate, ec)) {
      script = candidate;
      break;
    }
  if (script.empty()) {
    std::fprintf(stderr, "error: rcsweep export needs the Python toolkit: no rcsweep-export next to %s\n", dir.c_str());
    return 2;
  }
  std::vector<std::string> words = {"/usr/bin/python3", script.string()};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execv(argv[0], argv.data());
  std::fprintf(stderr, "error: cannot run %s: %s\n", argv[0], std::strerror(errno));
  return 1;
}

int plan_command(const PlanArgs& args) {
  const plan::Plan plan = plan::make_plan(load_spec(args.sweep_file, args.overrides), args.shard);
  if (!args.output.empty()) check_store_path(args.output);
  const auto& spec = plan.spec;
  std::size_t shard_tasks = 0;
  for (const auto& b : plan.bundles) shard_tasks += b.tasks.size();
  const double flops = plan.total_flops();
  // Time from the cost model at this machine's measured rates (rcsweep calibrate), or rough rates.
  const auto stored = load_calibration(calibration_path());
  const plan::Calibration rates = stored ? *stored : plan::default_calibration();
  double core_s = 0.0;
  std::vector<plan::BundleWork> work;
  for (const auto& b : plan.bundles) core_s += work.emplace_back(plan::bundle_work(plan, b.tasks, rates)).seconds();
  // Ranks per node x threads per rank (plan/layout.hpp): one rank per core when that fits and pays,
  // no more ranks than tasks (a bundle may be cut into slices, a task not).
  const int cores = planned_cores(args);
  plan::LayoutRequest request;
  request.cores_per_node = std::max(cores, 1);  // 0: not known, refused by size_job
  request.nodes = args.emit.empty() ? 1 : args.nodes;
  request.threads = args.threads;
  request.mem_per_node = args.mem_per_node.empty() ? physical_memory_bytes()
                                                   : parse_bytes(args.mem_per_node, "--mem-per-node");
  if (!args.mem_per_rank.empty()) {
    request.mem_per_rank = parse_bytes(args.mem_per_rank, "--mem-per-rank");
    request.memory_source = "--mem-per-rank " + args.mem_per_rank;
  } else {
    request.memory_source = args.mem_per_node.empty() ? "this machine's memory; set --mem-per-node"
                                                      : "--mem-per-node " + args.mem_per_node;
  }
  const plan::Layout layout = plan::choose_layout(plan, work, request);
  const auto& chosen = layout.chosen;
  const int ranks = chosen.ranks, threads = chosen.threads;
  if (!args.emit.empty())
    return emit_job_script(
        args, plan, {core_s, plan::longest_task_seconds(plan, work, threads), shard_tasks, chosen.bytes_per_rank},
        layout);

  std::printf("sweep \"%s\"  (plan %s, seed %llu)\n", spec.name.c_str(), plan.hash.c_str(),
              static_cast<unsigned long long>(spec.seed));
  if (!spec.overrides.empty()) std::printf("overrides     %s\n", config::overrides_line(spec.overrides).c_str());
  std::printf("grid:\n");
  if (spec.dims.empty()) std::printf("  (no swept axes: one point)\n");
  for (const auto& dim : spec.dims) {
    std::string params;
    for (const auto& p : dim.params) params += (params.empty() ? "" : ", ") + p;
    std::printf("  %-12s %4zu  ", dim.name.c_str(), dim.size());
    if (dim.params.size() == 1)
      std::printf("%s\n", join_values(dim.columns[0]).c_str());
    else
      std::printf("(%s)\n", params.c_str());
  }
  if (!spec.depth_axis.empty())
    std::printf("  depth: layers 0..%d recorded once per task (depth is not a task dimension)\n", plan.max_depth);
  if (spec.adaptive.enabled())
    std::printf("points        %zu x %d to %d replicates (adaptive, step %d) = %zu to %zu tasks", plan.points.size(),
                spec.adaptive.min, spec.replicates, spec.adaptive.step,
                plan.points.size() * static_cast<std::size_t>(spec.adaptive.min), plan.tasks.size());
  else
    std::printf("points        %zu x %d replicates = %zu tasks", plan.points.size(), spec.replicates,
                plan.tasks.size());
  if (args.shard.count > 1) std::printf(" (shard %d/%d: %zu tasks)", args.shard.index, args.shard.count, shard_tasks);
  std::printf("\nbundles       %zu (tasks with the same replicate, T and d share their random weights)\n",
              plan.bundles.size());
  std::printf("layers        0..%d per task; spectra of X: %s\n", plan.max_depth,
              spec.output.spectra == config::Spectra::none   ? "none"
              : spec.output.spectra == config::Spectra::last ? "last layer"
                                                             : "all layers");
  const std::string rates_text = stored ? "rates of this machine from " + calibration_path().string()
                                        : "rough: this machine is not calibrated, run `rcsweep calibrate` once";
  if (spec.adaptive.enabled()) {
    // The least work: every point stops at min replicates; the most: every point needs max.
    double min_core_s = 0.0;
    std::vector<std::uint64_t> shard_ids;
    for (const auto& b : plan.bundles) {
      std::vector<std::uint64_t> first;
      for (const auto id : b.tasks)
        if (plan.tasks[id].replicate < spec.adaptive.min) first.push_back(id);
      shard_ids.insert(shard_ids.end(), b.tasks.begin(), b.tasks.end());
      if (!first.empty()) min_core_s += plan::bundle_work(plan, first, rates).seconds();
    }
    const auto range = plan::cost_range(plan, shard_ids);
    std::printf("work          %.3g to %.3g GFLOP, about %s to %s on one core (%s); the targets decide\n",
                range.min_flops / 1e9, range.max_flops / 1e9, human_seconds(min_core_s).c_str(),
                human_seconds(core_s).c_str(), rates_text.c_str());
  } else {
    std::printf("work          %.3g GFLOP, about %s on one core (%s)\n", flops / 1e9, human_seconds(core_s).c_str(),
                rates_text.c_str());
  }
  // What `run` checks (plan/memory.hpp): resident bytes against the budget, address space against ulimit -v.
  const plan::RankMemory memory = plan::rank_memory(plan,
                                                    {threads, 1, ranks, blas_load_threads(), spec.adaptive.enabled()});
  const std::string collect = memory.writer >= memory.message
                                  ? "rank 0's store tables and batch " + human_bytes(memory.writer)
                                  : "a worker's message " + human_bytes(memory.message);
  std::printf("peak memory   %s per rank (largest bundle %s%s with its tasks' results %s, %s, BLAS %s, program %s)\n",
              human_bytes(memory.resident()).c_str(), human_bytes(memory.unit).c_str(),
              threads > 1 ? (" on " + std::to_string(threads) + " threads").c_str() : "",
              human_bytes(memory.results).c_str(), collect.c_str(), human_bytes(memory.blas).c_str(),
              human_bytes(memory.program).c_str());
  const auto limit = address_space_limit();
  std::printf(
      "address space %s per rank (ulimit -v; BLAS buffers, MPI and libraries included)%s\n",
      human_bytes(memory.address_space()).c_str(),
      limit && memory.address_space() > *limit
          ? ("; more than this shell's limit of " + human_bytes(*limit) + ": `rcsweep run` here refuses it").c_str()
          : "");
  const std::string budget_source = !args.mem_per_rank.empty()
                                        ? request.memory_source
                                        : (args.mem_per_node.empty()
                                               ? "this machine's " + human_bytes(request.mem_per_node)
                                               : "--mem-per-node " + args.mem_per_node) +
                                              " / " + std::to_string(chosen.ranks_per_node) + " rank" +
                                              (chosen.ranks_per_node == 1 ? "" : "s") +
                                              "; set --mem-per-node or --mem-per-rank";
  std::printf("memory budget %s per rank (%s)\n", human_bytes(chosen.budget_per_rank).c_str(), budget_source.c_str());
  const double store_bytes = 8.0 * (static_cast<double>(plan.tasks.size()) * (plan.max_depth + 1) *
                                        static_cast<double>(metrics::n_layer_metrics) +
                                    static_cast<double>(plan.spectrum_total()));
  std::printf("store size    about %s\n", human_bytes(store_bytes).c_str());
  std::string command = plan::shell_quote(args.sweep_file.string());
  for (const auto& o : args.overrides) command += " " + plan::shell_quote(o);
  std::printf("layout        %s per node: %s\n", plan::describe(chosen).c_str(), layout.reason.c_str());
  // The store of -o when given (the one the user asked about), else the sweep's default name.
  const std::string store = plan::shell_quote(args.output.empty() ? spec.name + ".h5" : args.output.string());
  if (threads == 1)
    std::printf("suggested     mpiexec -n %d rcsweep run %s -o %s   (one rank per core, 1 BLAS thread each;"
                " about %s wall)\n",
                ranks, command.c_str(), store.c_str(), human_seconds(chosen.makespan_s).c_str());
  else
    std::printf(
        "suggested     mpiexec -n %d --map-by slot:PE=%d -x OMP_PLACES=cores -x OMP_PROC_BIND=close rcsweep run "
        "--threads %d %s -o %s   (%d cores per rank, one thread on each, 1 BLAS thread per thread; about %s "
        "wall)\n",
        ranks, threads, threads, command.c_str(), store.c_str(), threads, human_seconds(chosen.makespan_s).c_str());
  std::printf("ranks %d%s: %s\n", ranks, threads > 1 ? (" x " + std::to_string(threads) + " threads").c_str() : "",
              plan::describe(layout.schedule).c_str());
  // rank balance: the units at one thread's prices (the layout's own with one thread per rank)
  const auto balance = threads == 1 ? layout.schedule : plan::make_schedule(work, ranks);
  if (const auto warning = plan::idle_warning(balance, work); !warning.empty())
    std::printf("warning       %s\n", warning.c_str());
  if (!args.output.empty()) print_store_outlook(args.output, plan);
  return 0;
}

namespace {
int print_info(const std::filesystem::path& path) {
  const auto info = store::read_info(path);
  std::printf("store         %s\n", path.c_str());
  std::printf("sweep config  plan %s, schema %d, rcsweep %s (%s)\n", info.plan_hash.c_str(), info.schema_version,
              info.rcsweep_version.c_str(), info.git_commit.c_str());
  if (!info.overrides.empty()) std::printf("overrides     %s\n", config::overrides_line(info.overrides).c_str());
  std::printf("created       %s on %s; last run %d MPI ranks x %d threads%s\n", info.created.c_str(), info.host.c_str(),
              info.mpi_ranks, info.threads,
              info.blas_threads > 1 ? (" x " + std::to_string(info.blas_threads) + " BLAS threads").c_str() : "");
  std::printf("finished      %s\n", info.finished.empty() ? "(not yet)" : info.finished.c_str());
  std::printf("libraries     %s; HDF5 %s\n", info.blas.c_str(), info.hdf5_version.c_str());
  std::printf("tasks         %llu (%llu points), layers 0..%d\n", static_cast<unsigned long long>(info.n_tasks),
              static_cast<unsigned long long>(info.n_points), info.max_depth);
  const double pct = info.n_tasks ? 100.0 *
                                        static_cast<double>(info.n_done + info.n_failed + info.n_diverged +
                                                            info.n_vanished + info.n_not_needed) /
                                        static_cast<double>(info.n_tasks)
                                  : 100.0;
  const std::string not_needed = info.n_not_needed
                                     ? ", " + std::to_string(info.n_not_needed) + " not needed (adaptive replicates)"
                                     : "";
  std::printf("progress      %.1f%% finished: %llu done, %llu diverged, %llu vanished, %llu failed%s, %llu pending\n",
              pct, static_cast<unsigned long long>(info.n_done), static_cast<unsigned long long>(info.n_diverged),
              static_cast<unsigned long long>(info.n_vanished), static_cast<unsigned long long>(info.n_failed),
              not_needed.c_str(), static_cast<unsigned long long>(info.n_pending));
  // Which BLAS kernel (CPU, host) computed the finished tasks: bitwise reproducible on one kernel only.
  std::vector<std::string> kernels;
  for (const auto& [p, n] : info.platforms)
    if (!p.empty() && std::find(kernels.begin(), kernels.end(), p.blas_kernel) == kernels.end())
      kernels.push_back(p.blas_kernel);
  if (kernels.size() > 1)
    std::printf("BLAS kernels  this store mixes %zu kernels: their tasks agree to rounding, not bitwise "
                "(docs/GUARANTEES.md)\n",
                kernels.size());
  for (const auto& [p, n] : info.platforms)  // "on HOST" when the host was recorded
    std::printf("computed by   %s on %s%s%s: %llu tasks\n", p.empty() ? "(not recorded)" : p.blas_kernel.c_str(),
                p.empty() ? "(not recorded)" : p.cpu.c_str(), p.host.empty() ? "" : " on ", p.host.c_str(),
                static_cast<unsigned long long>(n));
  for (const auto& line : info.reused) std::printf("reused        %s\n", line.c_str());  // --reuse, growth
  std::string axes;
  for (const auto& a : info.axes) axes += (axes.empty() ? "" : ", ") + a;
  std::printf("axes          %s\n", axes.empty() ? "(none)" : axes.c_str());
  std::printf("datasets      %zu:", info.datasets.size());
  for (const auto& d : info.datasets) std::printf(" %s", d.c_str());
  std::printf("\nconfig:\n%s\n", info.config.c_str());
  return 0;
}

/// print_info with a refused store (not a store, damaged, another schema) as exit code 2.
/// A JSON string literal: a TOML basic string (quotes, backslashes and control characters escaped
/// as \", \\, \n, \t, \uXXXX; UTF-8 kept) is one.
std::string json_string(const std::string& text) { return config::toml_string(text); }

std::string json_strings(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_string(items[i]);
  return out + "]";
}

/// `info --json`: the same facts as print_info, as one JSON object (for scripts).
int print_info_json(const std::filesystem::path& path) {
  const auto info = store::read_info(path);
  const auto u = [](std::uint64_t n) { return std::to_string(n); };
  std::string platforms = "[";
  for (std::size_t i = 0; i < info.platforms.size(); ++i) {
    const auto& [p, n] = info.platforms[i];
    platforms += std::string(i ? ", " : "") + "{\"blas_kernel\": " + json_string(p.blas_kernel) +
                 ", \"cpu\": " + json_string(p.cpu) + ", \"host\": " + json_string(p.host) + ", \"tasks\": " + u(n) +
                 "}";
  }
  platforms += "]";
  std::printf(
      "{\"store\": %s, \"format\": %s, \"schema_version\": %d, \"plan_hash\": %s, \"rcsweep_version\": %s, "
      "\"git_commit\": %s, \"created\": %s, \"finished\": %s, \"host\": %s, \"mpi_ranks\": %d, \"threads\": %d, \"blas_threads\": %d, "
      "\"blas\": %s, \"hdf5_version\": %s, \"n_tasks\": %s, \"n_points\": %s, \"max_depth\": %d, "
      "\"tasks\": {\"pending\": %s, \"done\": %s, \"failed\": %s, \"diverged\": %s, \"vanished\": %s, \"not_needed\": %s}, \"platforms\": %s, "
      "\"overrides\": %s, \"reused\": %s, \"axes\": %s, \"datasets\": %s, \"config\": %s}\n",
      json_string(path.string()).c_str(), json_string(info.format).c_str(), info.schema_version,
      json_string(info.plan_hash).c_str(), json_string(info.rcsweep_version).c_str(),
      json_string(info.git_commit).c_str(), json_string(info.created).c_str(), json_string(info.finished).c_str(),
      json_string(info.host).c_str(), info.mpi_ranks, info.threads, info.blas_threads, json_string(info.blas).c_str(),
      json_string(info.hdf5_version).c_str(), u(info.n_tasks).c_str(), u(info.n_points).c_str(), info.max_depth,
      u(info.n_pending).c_str(), u(info.n_done).c_str(), u(info.n_failed).c_str(), u(info.n_diverged).c_str(),
      u(info.n_vanished).c_str(), u(info.n_not_needed).c_str(), platforms.c_str(), json_strings(info.overrides).c_str(),
      json_strings(info.reused).c_str(), json_strings(info.axes).c_str(), json_strings(info.datasets).c_str(),
      json_string(info.config).c_str());
  return 0;
}

int print_info_or_refuse(const std::filesystem::path& path, bool json) {
  try {
    return json ? print_info_json(path) : print_info(path);
  } catch (const StoreError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
}  // namespace

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
  config::SweepSpec spec = config::parse_sweep(infos[0].config, args.shards[0].string() + ":/config");
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

int info_command(const std::filesystem::path& path, bool json) {
  std::string crash;
  if (const auto rc = in_child([&] { return print_info_or_refuse(path, json); }, crash)) return *rc;
  std::fprintf(stderr, "error: %s\n", crashed_message(path, crash).c_str());
  return 2;
}

}  // namespace rcsweep::cli
