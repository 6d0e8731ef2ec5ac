// Job scripts sized from the cost model (`rcsweep plan --emit slurm|pbs`): how many nodes, ranks
// and hours a sweep needs, split into array shards when it does not fit one job, written into the
// shipped scripts of jobs/slurm and jobs/pbs (compiled in as templates). Pure: no I/O.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rcsweep::plan {

enum class Scheduler { slurm, pbs };

/// "slurm" or "pbs"; ConfigError on key --emit otherwise.
Scheduler parse_scheduler(const std::string& text);

/// What the cost model says of a sweep (cli/plan.cpp computes it from the plan).
struct WorkEstimate {
  double core_seconds = 0.0;  ///< the whole sweep on one core
  /// The longest task with its bundle's shared work on a rank's threads (plan/layout.hpp,
  /// longest_task_seconds; one core with one thread per rank): the shortest a job can take (bundles
  /// are cut into slices across ranks, tasks are not split: plan/schedule.hpp).
  double largest_task_s = 0.0;
  std::size_t tasks = 0;        ///< the most ranks that have work
  double bytes_per_rank = 0.0;  ///< peak resident memory of one rank (largest unit on its threads + program)
  /// What `run --shard i/n` deals out (tasks; with adaptive replicates, grid points): the most
  /// shards that each get some. 0: `tasks`.
  std::size_t shard_units = 0;
};

/// What the user asks for; size_job checks it (ConfigError naming --nodes, --cores, --hours, --threads).
struct JobRequest {
  int nodes = 1;             ///< --nodes: nodes of one job (of one array element)
  int cores_per_node = 1;    ///< --cores: cores of a node (one rank per threads_per_rank cores); 0: not known
  double max_hours = 24.0;   ///< --hours: the longest walltime a job may ask for
  int threads_per_rank = 1;  ///< OpenMP threads of a rank (plan/layout.hpp), at most cores_per_node
  int shards = 0;            ///< --shards: exactly this many array elements (1: one job); 0: the fewest that fit
};

struct JobSizing {
  int nodes = 1;  ///< nodes of one job (array element)
  int ranks_per_node = 1;
  int threads_per_rank = 1;       ///< 1: one rank per core; more: a hybrid job, each rank on this many cores
  int ranks = 1;                  ///< MPI ranks of one job (array element)
  int shards = 1;                 ///< 1: one MPI job; more: an array of --shard i/n jobs and a merge
  double estimate_s = 0.0;        ///< estimated wall time of one job (array element)
  double walltime_s = 0.0;        ///< the time asked for: estimate x time_margin + lead_s, whole minutes
  double lead_s = 0.0;            ///< the time asked beyond the estimate x time_margin (time_lead)
  int stop_before_s = 0;          ///< the script's STOP_BEFORE and Slurm's --signal lead (stop_lead)
  double mem_per_rank_mib = 0.0;  ///< bytes_per_rank x memory_margin, whole MiB, at least 256
  /// The fewest cores (ranks x threads) whose job (array element) finishes within enough_time_s, or
  /// within its longest task when that is longer: far fewer than ranks x threads says the request
  /// is larger than the sweep (`plan --emit` warns).
  int enough_cores = 1;
};

/// A job shorter than this is dominated by its queueing and start-up: more cores do not pay.
inline constexpr double enough_time_s = 600.0;
/// `plan --emit` warns when enough_cores x this is at most the cores a job asks for.
inline constexpr int oversize_factor = 4;

/// The estimate is multiplied by this and time_lead added: the cost model is rough
/// (docs/BENCHMARKS.md).
inline constexpr double time_margin = 1.5;
/// The lead of a job's walltime beyond estimate x time_margin (start-up, the scripts' STOP_BEFORE
/// before the end, a stop's grace) scales with the job: its estimate, at least min_lead_s, at most
/// max_lead_s.
inline constexpr double min_lead_s = 60.0;
inline constexpr double max_lead_s = 300.0;
inline constexpr double memory_margin = 1.25;

/// clamp(estimate_s, min_lead_s, max_lead_s), in seconds.
double time_lead(double estimate_s);

/// The script's STOP_BEFORE (seconds before the end rcsweep stops starting bundles) and Slurm's
/// `--signal=B:USR1@` lead for a walltime lead of `lead_s`: 0.4 of it, whole seconds (the shipped
/// scripts' 120 s for the largest lead).
int stop_lead(double lead_s);

/// Size the job: ranks = min(nodes x cores / threads, tasks of a shard) (more ranks than tasks
/// idle), on as few nodes as hold them, spread evenly (rounded up to fill those nodes); its
/// estimate is max(work / shards / (ranks x threads), longest task); the time asked is estimate x
/// time_margin + time_lead(estimate), in whole minutes. Shards: request.shards when given, else the
/// fewest whose jobs fit --hours. Throws ConfigError (--nodes, --cores, --hours, --threads,
/// --shards) on bad values, when the longest task alone does not fit in --hours, when --shards
/// exceeds the units a shard takes (WorkEstimate::shard_units) or its jobs do not fit --hours.
JobSizing size_job(const WorkEstimate& work, const JobRequest& request);

/// What a site's scheduler asks of every job (`plan --account/--partition/--qos/--directive/--exclusive`):
/// extra scheduler lines after the sized ones. Empty: none.
struct SiteOptions {
  std::string account;                  ///< Slurm --account=, PBS -A
  std::string partition;                ///< Slurm --partition=, PBS -q (the queue)
  std::string qos;                      ///< Slurm --qos= (PBS has none: refused)
  std::vector<std::string> directives;  ///< raw lines "#SBATCH TEXT" / "#PBS TEXT", in order
  bool exclusive = false;               ///< whole nodes: Slurm --exclusive, PBS -l place=excl
  // The launcher the script defaults to (`plan --launcher/--mpi/--srun-mpi`; "": the shipped default).
  std::string launcher;  ///< LAUNCHER: mpiexec or srun (Slurm only; shipped: mpiexec)
  std::string mpi;       ///< MPI_FLAVOUR: auto, openmpi, mpich or intel (shipped: auto, from mpiexec --version)
  std::string srun_mpi;  ///< SRUN_MPI: auto, default or a plugin name (Slurm only; shipped: auto, from srun --mpi=list)
};

/// ConfigError naming the option (--account, --partition, --qos, --directive, --launcher, --mpi,
/// --srun-mpi) of every bad value: empty, a line break, a leading '#' (account, partition and qos:
/// any blank too); --qos, --launcher srun or --srun-mpi with PBS; a launcher, MPI flavour or srun
/// plugin the scripts do not know.
void check_site(Scheduler scheduler, const SiteOptions& site);

/// The scheduler lines `site` asks for ("#SBATCH --account=A", "#PBS -A A", ...), one per line,
/// each ending in '\n'; "" when it asks for none. Unchecked (check_site).
std::string site_directives(Scheduler scheduler, const SiteOptions& site);

/// What the emitted script names.
struct ScriptNames {
  std::string sweep_file;              ///< default SWEEP (absolute path)
  std::string output;                  ///< default OUT (the store, or the merged store of shards)
  std::string job_name;                ///< the sweep's name
  std::string rcsweep;                 ///< default RCSWEEP (this program)
  std::string summary;                 ///< comment lines (plan, estimate) put under the first line, without '#'
  std::vector<std::string> overrides;  ///< command-line overrides of the sweep file, passed to `rcsweep run`
  SiteOptions site;                    ///< account, partition, ...: lines after the sized directives
  std::string setup;                   ///< default RCSWEEP_SETUP (absolute path; "": none)
};

/// The absolute paths the script bakes in (sweep file, output, program, setup) that compute nodes
/// may not see: under /tmp, /dev/shm or /run (local to a node), or under `home` when the job has
/// more than one node (home directories are not always mounted on compute nodes). Each as
/// "what path", in that order.
std::vector<std::string> unshared_paths(const ScriptNames& names, int nodes, const std::string& home);

/// The shipped script (jobs/slurm/mpi_job.sh or array_job.sh, jobs/pbs/...) for `sizing`: its
/// scheduler directives sized (nodes, ranks, walltime, memory, array range; with threads per rank,
/// Slurm's --cpus-per-task and PBS's ncpus = mpiprocs x ompthreads) and its defaults set (SWEEP,
/// OUT, RCSWEEP, SHARDS, THREADS, RCSWEEP_SETUP when names.setup is given, LAUNCHER, MPI_FLAVOUR,
/// SRUN_MPI when names.site gives them); the overrides, quoted, follow "$SWEEP" in its `rcsweep run`
/// command; the site's lines (site_directives) follow the template's last directive, whose own
/// `#SBATCH --exclusive` is dropped unless site.exclusive; the rest unchanged. An array script
/// carries its merge job (merge_script) and submits it from its first element (MERGE_JOB=built-in).
std::string job_script(Scheduler scheduler, const JobSizing& sizing, const ScriptNames& names);

/// As job_script, with the template given (tests).
std::string fill_job_template(std::string_view script, Scheduler scheduler, bool array, const JobSizing& sizing,
                              const ScriptNames& names);

/// The compiled-in copies of jobs/{slurm,pbs}/{mpi_job,array_job}.sh (generated at build time).
std::string_view job_template(Scheduler scheduler, bool array);

/// The compiled-in copy of jobs/{slurm,pbs}/merge_job.sh.
std::string_view merge_template(Scheduler scheduler);

/// The merge job of an array (merge_template) with its defaults set (SWEEP, OUT, RCSWEEP,
/// RCSWEEP_SETUP), its job name the sweep's with "-merge", and the site's lines but --exclusive. The
/// emitted array script carries it (MERGE_JOB=built-in): its first element to start submits it.
std::string merge_script(Scheduler scheduler, const ScriptNames& names);

/// "HH:MM:SS" (hours may exceed 24), as Slurm and PBS read walltimes.
std::string format_walltime(double seconds);

/// `text` single-quoted for bash when it holds anything but [A-Za-z0-9_./+-].
std::string shell_quote(const std::string& text);

}  // namespace rcsweep::plan
