// `rcsweep plan`: what a sweep would compute, its cost, memory and layout, what a run would do with
// a store (-o), and the job script of --emit.
#include "cli/commands.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/platform.hpp"
#include "base/units.hpp"
#include "cli/cli_internal.hpp"
#include "cli/command_line.hpp"
#include "config/overrides.hpp"
#include "metrics/metrics.hpp"
#include "plan/adaptive.hpp"
#include "plan/calibration.hpp"
#include "plan/cost_model.hpp"
#include "plan/job_script.hpp"
#include "plan/layout.hpp"
#include "plan/memory.hpp"
#include "plan/scheduler.hpp"
#include "plan/store_size.hpp"
#include "plan/threads.hpp"
#include "store/reuse.hpp"
#include "store/store.hpp"
#include "store/sweep_input.hpp"

namespace rcsweep::cli {
namespace {
std::string join_values(const std::vector<config::ParamValue>& values, std::size_t max_shown = 8) {
  std::string out;
  for (std::size_t i = 0; i < values.size() && i < max_shown; ++i) out += (i ? ", " : "") + config::to_text(values[i]);
  if (values.size() > max_shown) out += ", ...";
  return out;
}

/// --cores, or with --emit the scheduler's nodes' (a job runs on them, not on this login node):
/// 0 when the scheduler does not tell (size_job then refuses, naming --cores).
int planned_cores(const PlanArgs& args) {
  if (args.cores > 0) return args.cores;
  if (args.emit.empty()) return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return plan::scheduler_cores_per_node(plan::parse_scheduler(args.emit), args.site.partition);
}

/// What a job script was sized for (in the script, and on stderr): the sweep, the layout and the
/// job; for an array of shards, how to submit it and merge the shards into `out`.
std::string job_summary(const PlanArgs& args, const plan::Plan& plan, const plan::WorkEstimate& work,
                        const plan::Layout& layout, const plan::JobSizing& s, int cores, const std::string& out) {
  const int threads = layout.chosen.threads;
  const auto scheduler = plan::parse_scheduler(args.emit);
  const std::string per_rank = threads > 1 ? " x " + std::to_string(threads) + " threads" : "";
  char line[1024];
  std::snprintf(line, sizeof line,
                "sweep \"%s\" (plan %s): %zu tasks in %zu bundles, about %s on one core (rough cost model)\n"
                "layout %s per node: %s\n"
                "sized for --nodes %d --cores %d --hours %g%s: %d ranks%s on %d node(s) per job, %d shard(s),\n"
                "about %s each; asking %s (the estimate x %.1f + a lead of %.0f s; STOP_BEFORE %d s) and %.0f MiB "
                "per rank",
                plan.spec.name.c_str(), plan.hash.c_str(), plan.tasks.size(), plan.bundles.size(),
                human_seconds(work.core_seconds).c_str(), plan::describe(layout.chosen).c_str(), layout.reason.c_str(),
                args.nodes, cores, args.hours,
                args.shards > 0 ? (" --shards " + std::to_string(args.shards)).c_str() : "", s.ranks, per_rank.c_str(),
                s.nodes, s.shards, human_seconds(s.estimate_s).c_str(), plan::format_walltime(s.walltime_s).c_str(),
                plan::time_margin, s.lead_s, s.stop_before_s, s.mem_per_rank_mib);
  std::string summary = line;
  const bool slurm = scheduler == plan::Scheduler::slurm;
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
  return summary;
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
  const auto s = plan::size_job(work, {args.nodes, cores, args.hours, threads, args.shards});
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string out = plan.spec.name + ".h5";
  const std::string summary = job_summary(args, plan, work, layout, s, cores, out);
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
  // --cores above the cores the scheduler reports of a node: the job's threads would outnumber them.
  if (const int node = args.cores > 0 ? plan::scheduler_cores_per_node(scheduler, args.site.partition) : 0; node > 0)
    if (const auto over = plan::oversubscription(s.ranks_per_node, threads, node); !over.empty())
      std::fprintf(stderr,
                   "warning: %s (a node's cores as %s reports them; --cores %d is more): the scheduler may refuse "
                   "the job, or its ranks share cores; results are the same on any layout, only slower\n",
                   over.c_str(), scheduler == plan::Scheduler::slurm ? "sinfo" : "pbsnodes -a", args.cores);
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

/// What `plan` lays out ranks and threads for: the cores and nodes, --threads, and the memory of a
/// node and of a rank.
plan::LayoutRequest layout_request(const PlanArgs& args) {
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
  return request;
}

/// The swept axes of the grid, one line each, and the depth axis.
void print_grid(const plan::Plan& plan) {
  const auto& spec = plan.spec;
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
}

/// Points, replicates and tasks (of the shard), bundles, layers and spectra.
void print_tasks(const plan::Plan& plan, const plan::Shard& shard, std::size_t shard_tasks) {
  const auto& spec = plan.spec;
  if (spec.adaptive.enabled())
    std::printf("points        %zu x %d to %d replicates (adaptive, step %d) = %zu to %zu tasks", plan.points.size(),
                spec.adaptive.min, spec.replicates, spec.adaptive.step,
                plan.points.size() * static_cast<std::size_t>(spec.adaptive.min), plan.tasks.size());
  else
    std::printf("points        %zu x %d replicates = %zu tasks", plan.points.size(), spec.replicates,
                plan.tasks.size());
  if (shard.count > 1) std::printf(" (shard %d/%d: %zu tasks)", shard.index, shard.count, shard_tasks);
  std::printf("\nbundles       %zu (tasks with the same replicate, T and d share their random weights)\n",
              plan.bundles.size());
  const std::string computed = spec.output.metrics == metrics::default_metrics()
                                   ? "all"
                                   : metrics::names_of(spec.output.metrics);
  std::printf("layers        0..%d per task; metrics: %s; spectra of X: %s\n", plan.max_depth, computed.c_str(),
              spec.output.spectra == config::Spectra::none   ? "none"
              : spec.output.spectra == config::Spectra::last ? "last layer"
                                                             : "all layers");
}

/// The work in FLOPs and one core's time at `rates` (a range with adaptive replicates).
void print_work(const plan::Plan& plan, const plan::Calibration& rates, bool calibrated, double core_s) {
  const auto& spec = plan.spec;
  const double flops = plan.total_flops();
  const std::string rates_text = calibrated ? "rates of this machine from " + plan::calibration_path().string()
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
}

/// A rank's peak memory and address space in the chosen layout, and the budget it is checked against.
void print_memory(const PlanArgs& args, const plan::Plan& plan, const plan::Layout& layout,
                  const plan::LayoutRequest& request) {
  const auto& spec = plan.spec;
  const auto& chosen = layout.chosen;
  const int ranks = chosen.ranks, threads = chosen.threads;
  // What `run` checks (plan/memory.hpp): resident bytes against the budget, address space against ulimit -v.
  const plan::RankMemory memory = plan::rank_memory(plan,
                                                    {threads, 1, ranks, blas_load_threads(), spec.adaptive.enabled()});
  const std::string collect = memory.writer >= memory.message
                                  ? "rank 0's store tables and batch " + human_bytes(memory.writer)
                                  : "a worker's message " + human_bytes(memory.message);
  const std::string model = memory.model > 0 ? ", model files mapped " + human_bytes(memory.model) : "";
  std::printf("peak memory   %s per rank (largest bundle %s%s with its tasks' results %s, %s, BLAS %s, program %s%s)\n",
              human_bytes(memory.resident()).c_str(), human_bytes(memory.unit).c_str(),
              threads > 1 ? (" on " + std::to_string(threads) + " threads").c_str() : "",
              human_bytes(memory.results).c_str(), collect.c_str(), human_bytes(memory.blas).c_str(),
              human_bytes(memory.program).c_str(), model.c_str());
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
}

/// The store's size, the layout with the command that runs it, and the ranks' balance.
void print_layout(const PlanArgs& args, const plan::Plan& plan, const plan::Layout& layout,
                  const std::vector<plan::BundleWork>& work) {
  const auto& spec = plan.spec;
  const auto& chosen = layout.chosen;
  const int ranks = chosen.ranks, threads = chosen.threads;
  const auto size = plan::store_size(plan);  // the store of this shard once it has run
  if (size.most > size.least * 1.01)
    std::printf("store size    about %s (every point at min = %d replicates) to %s (at max = %d)\n",
                human_bytes(size.least).c_str(), spec.adaptive.min, human_bytes(size.most).c_str(), spec.replicates);
  else
    std::printf("store size    about %s\n", human_bytes(size.most).c_str());
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
  // Without --emit the layout is for this machine: --cores above its cores oversubscribes it.
  const int here = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const auto over = plan::oversubscription(chosen.ranks_per_node, threads, here); !over.empty())
    std::printf("warning       %s (this machine's cores; --cores %d is more); results are the same on any layout, "
                "only slower\n",
                over.c_str(), args.cores);
}
}  // namespace

int plan_command(const PlanArgs& args) {
  if (args.shards != 0 && args.emit.empty())
    throw ConfigError(
        std::vector<ConfigIssue>{{"--shards", "only with --emit: the array elements of the job script it writes"}});
  if (args.json && !args.emit.empty())
    throw ConfigError(std::vector<ConfigIssue>{{"--json", "not with --emit, which prints a job script"}});
  const plan::Shard shard = parse_shard(args.shard);
  const plan::Plan plan = plan::make_plan(store::load_sweep_with_input(args.sweep_file, args.overrides), shard);
  if (!args.output.empty()) check_store_path(args.output);
  std::size_t shard_tasks = 0;
  for (const auto& b : plan.bundles) shard_tasks += b.tasks.size();
  // Time from the cost model at this machine's measured rates (rcsweep calibrate), or rough rates.
  const auto stored = plan::load_calibration(plan::calibration_path());
  const plan::Calibration rates = stored ? *stored : plan::default_calibration();
  double core_s = 0.0;
  std::vector<plan::BundleWork> work;
  for (const auto& b : plan.bundles) core_s += work.emplace_back(plan::bundle_work(plan, b.tasks, rates)).seconds();
  // Ranks per node x threads per rank (plan/layout.hpp): one rank per core when that fits and pays,
  // no more ranks than tasks (a bundle may be cut into slices, a task not).
  const plan::LayoutRequest request = layout_request(args);
  const plan::Layout layout = plan::choose_layout(plan, work, request);
  const auto& chosen = layout.chosen;
  if (!args.emit.empty()) {
    // `run --shard` deals out tasks, or with adaptive replicates grid points
    const std::size_t units = plan.spec.adaptive.enabled() ? plan.points.size() : plan.tasks.size();
    return emit_job_script(
        args, plan,
        {core_s, plan::longest_task_seconds(plan, work, chosen.threads), shard_tasks, chosen.bytes_per_rank, units},
        layout);
  }

  const auto& spec = plan.spec;
  std::printf("sweep \"%s\"  (plan %s, seed %llu)\n", spec.name.c_str(), plan.hash.c_str(),
              static_cast<unsigned long long>(spec.seed));
  if (!spec.overrides.empty()) std::printf("overrides     %s\n", config::overrides_line(spec.overrides).c_str());
  print_grid(plan);
  print_tasks(plan, shard, shard_tasks);
  print_work(plan, rates, stored.has_value(), core_s);
  print_memory(args, plan, layout, request);
  print_layout(args, plan, layout, work);
  if (!args.output.empty()) print_store_outlook(args.output, plan);
  return 0;
}

CLI::App* add_plan_command(CLI::App& app, PlanArgs& args) {
  auto* cmd = app.add_subcommand("plan", "Show what a sweep would compute, its cost and memory; computes nothing.");
  cmd->add_option("sweep", args.sweep_file, "sweep file (TOML)")->required()->check(sweep_file_check());
  cmd->add_option("overrides", args.overrides, overrides_help());
  cmd->footer(overrides_footer("plan"));
  cmd->add_option("--shard", args.shard, "plan only shard i/n");
  cmd->add_option("-o,--output", args.output,
                  "a store to run into: say what `run -o` would do with it (start, resume with N tasks\n"
                  "left, grow it to this sweep copying N finished tasks, or refuse it and why)");
  cmd->add_option("--cores", args.cores,
                  "cores to plan for: of this machine, or with --emit of one compute node (default: this\n"
                  "machine's; with --emit the scheduler's nodes', from sinfo or pbsnodes -a, else refused)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--mem-per-rank", args.mem_per_rank,
                  "memory budget of one rank (e.g. 4G), whatever the layout; refused (exit 2) if the largest\n"
                  "bundle does not fit. Default: --mem-per-node / ranks per node");
  cmd->add_option("--mem-per-node", args.mem_per_node,
                  "memory of one node (e.g. 256G), shared by its ranks: the layout gives a rank whose largest\n"
                  "bundle does not fit its share threads instead of cores (default: this machine's memory)");
  cmd->add_option("--threads", args.threads,
                  "OpenMP threads per rank: plan this layout (cores / N ranks per node) instead of choosing\n"
                  "one (default: one rank per core, or threads for big tasks, few tasks or little memory)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--emit", args.emit,
                  "print a job script for slurm or pbs (jobs/slurm, jobs/pbs) sized from the cost model: ranks,\n"
                  "walltime with margin, memory per rank, and an array of --shard jobs when the sweep does\n"
                  "not fit --hours (docs/CLUSTER.md); what it was sized for goes to stderr");
  cmd->add_option("--nodes", args.nodes, "with --emit: nodes per job (default 1); --cores is then cores per node");
  cmd->add_option("--hours", args.hours, "with --emit: the longest walltime a job may ask for (default 24)");
  cmd->add_option("--shards", args.shards,
                  "with --emit: an array of exactly N --shard jobs (1: one job), whatever the tasks' lengths;\n"
                  "refused (exit 2) when its jobs do not fit --hours (default: the fewest that fit)")
      ->option_text("N")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--account", args.site.account, "with --emit: the account charged (#SBATCH --account=A, #PBS -A A)")
      ->option_text("A");
  cmd->add_option("--partition", args.site.partition,
                  "with --emit: the partition (#SBATCH --partition=P) or PBS queue (#PBS -q P)")
      ->option_text("P");
  cmd->add_option("--qos", args.site.qos,
                  "with --emit slurm: the quality of service (#SBATCH --qos=Q); PBS has none, refused (exit 2)")
      ->option_text("Q");
  cmd->add_option("--directive", args.site.directives,
                  "with --emit: one more scheduler line, as given after \"#SBATCH \" or \"#PBS \" (repeatable,\n"
                  "in order; e.g. --directive=--constraint=zen4 --directive='-l place=scatter'); values\n"
                  "with a line break or a leading '#' are refused (exit 2)")
      ->allow_extra_args(false);
  cmd->add_flag("--exclusive", args.site.exclusive,
                "with --emit: whole nodes for the job (#SBATCH --exclusive, #PBS -l place=excl); without\n"
                "it the job asks only for its ranks' cores and memory");
  cmd->add_option("--launcher", args.site.launcher,
                  "with --emit slurm: the script's default LAUNCHER, mpiexec (the default) or srun")
      ->option_text("L");
  cmd->add_option("--mpi", args.site.mpi,
                  "with --emit: the script's default MPI_FLAVOUR, openmpi, mpich or intel: mpiexec's binding\n"
                  "and environment flags (default auto: the MPI `mpiexec --version` names, when the job runs)")
      ->option_text("FLAVOUR");
  cmd->add_option("--srun-mpi", args.site.srun_mpi,
                  "with --emit slurm: the script's default SRUN_MPI, srun's --mpi plugin (pmix, pmi2, ...) or\n"
                  "default for none (default auto: pmix, else pmi2, of `srun --mpi=list`, when the job runs)")
      ->option_text("PLUGIN");
  cmd->add_option("--setup", args.setup,
                  "with --emit: a file the script sources before anything runs (module load, environment),\n"
                  "its default RCSWEEP_SETUP (absolute path); must exist (exit 2 otherwise)")
      ->option_text("FILE");
  return cmd;
}

}  // namespace rcsweep::cli
