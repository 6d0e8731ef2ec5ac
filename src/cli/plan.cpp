// `rcsweep plan`: what a sweep would compute, its cost, memory and layout, what a run would do with
// a store (-o), and the job script of --emit.
#include "cli/commands.hpp"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/platform.hpp"
#include "base/units.hpp"
#include "cli/cli_internal.hpp"
#include "cli/command_line.hpp"
#include "cli/json.hpp"
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

/// printf into a std::string.
[[gnu::format(printf, 1, 2)]] std::string format(const char* fmt, ...) {
  std::va_list args;
  va_start(args, fmt);
  std::va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string out(static_cast<std::size_t>(std::max(n, 0)) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), fmt, again);
  va_end(again);
  out.resize(static_cast<std::size_t>(std::max(n, 0)));
  return out;
}

/// A JSON number (shortest text that reads back the same double); null when not finite.
std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string json_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

std::string json_strings(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const auto& s : items) quoted.push_back(json_string(s));
  return json_list(quoted);
}

/// One JSON object, its members in the order added (`plan --json`).
class JsonObject {
 public:
  JsonObject& raw(const std::string& key, std::string value) {
    members_.emplace_back(key, std::move(value));
    return *this;
  }
  JsonObject& str(const std::string& key, std::string_view value) { return raw(key, json_string(value)); }
  JsonObject& num(const std::string& key, double value) { return raw(key, json_number(value)); }
  JsonObject& count(const std::string& key, unsigned long long value) { return raw(key, std::to_string(value)); }
  JsonObject& flag(const std::string& key, bool value) { return raw(key, value ? "true" : "false"); }
  JsonObject& object(const std::string& key, const JsonObject& value) { return raw(key, value.text()); }
  std::string text() const {
    std::string out = "{";
    for (std::size_t i = 0; i < members_.size(); ++i)
      out += (i ? ", " : "") + json_string(members_[i].first) + ": " + members_[i].second;
    return out + "}";
  }

 private:
  std::vector<std::pair<std::string, std::string>> members_;
};

/// What `plan` says: its lines printed as they come, or with --json kept (the object's "text") and
/// its numbers in `out`.
struct Report {
  bool json = false;
  JsonObject out;
  std::string text;
  std::vector<std::string> warnings;
  void line(const std::string& s) {
    if (json)
      text += s + "\n";
    else
      std::printf("%s\n", s.c_str());
  }
  void warning(const std::string& s) {
    warnings.push_back(s);
    line("warning       " + s);
  }
};

/// What `run -o STORE` would do with a store: the action (start, resume, grow, refuse), the text
/// `plan` prints after "store" and the numbers of the JSON object.
struct Outlook {
  std::string action;
  std::string text;
  JsonObject numbers;
};

/// The outlook of an existing store of this or another sweep.
Outlook outlook_of(const std::filesystem::path& path, const plan::Plan& plan) {
  const auto info = store::read_info(path);
  Outlook o;
  if (info.plan_hash == plan.hash) {
    o.action = "resume";
    o.text = format("%s: a run resumes it, %llu of %llu tasks left", path.c_str(),
                    static_cast<unsigned long long>(info.n_pending), static_cast<unsigned long long>(info.n_tasks));
    o.numbers.count("tasks_left", info.n_pending).count("tasks", info.n_tasks);
    return o;
  }
  const auto r = store::compare_with_store(path, plan);
  const std::uint64_t copied = r.finished - r.not_in_sweep - r.recomputed - r.other_shards;
  o.numbers.count("finished", r.finished).count("copied", copied);
  if (!r.blockers.empty()) {
    o.action = "refuse";
    o.text = path.string() + ": made from another sweep, none of whose results fits: a run refuses it";
  } else if (r.not_in_sweep + r.other_shards > 0) {
    o.action = "refuse";
    o.text = format("%s: made from another sweep; %llu of its finished tasks are not tasks of this one (or of this "
                    "shard): a run refuses it (--reuse it into another -o to copy the %llu that fit)",
                    path.c_str(), static_cast<unsigned long long>(r.not_in_sweep + r.other_shards),
                    static_cast<unsigned long long>(copied));
    o.numbers.count("not_fitting", r.not_in_sweep + r.other_shards);
  } else {
    o.action = "grow";
    const std::string computing = r.to_compute_most == r.to_compute_least
                                      ? std::to_string(r.to_compute_least)
                                      : std::to_string(r.to_compute_least) + " to " +
                                            std::to_string(r.to_compute_most) +
                                            " (adaptive replicates: as many as the rule asks for)";
    o.text = format("%s: made from another version of this sweep: a run grows it, copying %llu finished tasks and "
                    "computing %s",
                    path.c_str(), static_cast<unsigned long long>(copied), computing.c_str());
    o.numbers.count("computed", r.to_compute_least);
    o.numbers.count("computed_most", r.to_compute_most);
  }
  std::string details = store::describe(r);
  while (!details.empty() && details.back() == '\n') details.pop_back();
  if (!details.empty()) o.text += "\n" + details;
  return o;
}

void print_outlook(const std::filesystem::path& path, const Outlook& o, bool json) {
  if (json) {
    JsonObject obj = o.numbers;
    std::printf("%s", obj.str("path", path.string()).str("action", o.action).str("text", o.text).text().c_str());
  } else {
    std::printf("store         %s\n", o.text.c_str());
  }
}

/// What `run -o STORE` would do with the store: start it, resume it, grow it or refuse it. Read in
/// a child process, like every store a run opens (a damaged file cannot crash `plan`). With `json`
/// one JSON object.
void print_store_outlook(const std::filesystem::path& path, const plan::Plan& plan, bool json) {
  if (!std::filesystem::exists(path)) {
    print_outlook(path, {"start", path.string() + " does not exist: a run starts it", {}}, json);
    return;
  }
  std::string crash;
  const auto rc = in_child(
      [&] {
        Outlook o;
        try {
          o = outlook_of(path, plan);
        } catch (const std::exception& e) {
          o = {"refuse", path.string() + ": a run refuses it (" + e.what() + ")", {}};
        }
        print_outlook(path, o, json);
        return 0;
      },
      crash);
  if (!rc) print_outlook(path, {"refuse", crashed_message(path, crash), {}}, json);
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
void report_grid(const plan::Plan& plan, Report& r) {
  const auto& spec = plan.spec;
  r.line("grid:");
  if (spec.dims.empty()) r.line("  (no swept axes: one point)");
  std::vector<std::string> dims;
  for (const auto& dim : spec.dims) {
    std::string params;
    for (const auto& p : dim.params) params += (params.empty() ? "" : ", ") + p;
    r.line(format("  %-12s %4zu  %s", dim.name.c_str(), dim.size(),
                  dim.params.size() == 1 ? join_values(dim.columns[0]).c_str() : ("(" + params + ")").c_str()));
    std::vector<std::string> columns;
    for (const auto& column : dim.columns) {
      std::vector<std::string> values;
      for (const auto& v : column) values.push_back(config::to_text(v));
      columns.push_back(json_strings(values));
    }
    dims.push_back(JsonObject()
                       .str("name", dim.name)
                       .count("size", dim.size())
                       .raw("params", json_strings(dim.params))
                       .raw("values", json_list(columns))
                       .text());
  }
  r.out.raw("grid", json_list(dims));
  if (!spec.depth_axis.empty())
    r.line(format("  depth: layers 0..%d recorded once per task (depth is not a task dimension)", plan.max_depth));
  r.out.flag("depth_axis", !spec.depth_axis.empty());
}

/// Points, replicates and tasks (of the shard), bundles, layers and spectra.
void report_tasks(const plan::Plan& plan, const plan::Shard& shard, std::size_t shard_tasks, Report& r) {
  const auto& spec = plan.spec;
  const std::size_t points = plan.points.size(), tasks = plan.tasks.size();
  std::string line;
  std::size_t tasks_min = tasks;
  if (spec.adaptive.enabled()) {
    tasks_min = points * static_cast<std::size_t>(spec.adaptive.min);
    line = format("points        %zu x %d to %d replicates (adaptive, step %d) = %zu to %zu tasks", points,
                  spec.adaptive.min, spec.replicates, spec.adaptive.step, tasks_min, tasks);
    r.out.object("adaptive", JsonObject()
                                 .count("min", static_cast<unsigned long long>(spec.adaptive.min))
                                 .count("max", static_cast<unsigned long long>(spec.replicates))
                                 .count("step", static_cast<unsigned long long>(spec.adaptive.step)));
  } else {
    line = format("points        %zu x %d replicates = %zu tasks", points, spec.replicates, tasks);
    r.out.raw("adaptive", "null");
  }
  if (shard.count > 1) line += format(" (shard %d/%d: %zu tasks)", shard.index, shard.count, shard_tasks);
  r.line(line);
  r.out.count("points", points)
      .count("replicates", static_cast<unsigned long long>(spec.replicates))
      .count("tasks", tasks)
      .count("tasks_min", tasks_min)
      .count("tasks_max", tasks)
      .object("shard", JsonObject()
                           .count("index", static_cast<unsigned long long>(shard.index))
                           .count("count", static_cast<unsigned long long>(shard.count))
                           .count("tasks", shard_tasks));
  r.line(format("bundles       %zu (tasks with the same replicate, T and d share their random weights)",
                plan.bundles.size()));
  const std::string computed = spec.output.metrics == metrics::default_metrics()
                                   ? "all"
                                   : metrics::names_of(spec.output.metrics);
  const char* spectra = spec.output.spectra == config::Spectra::none   ? "none"
                        : spec.output.spectra == config::Spectra::last ? "last layer"
                                                                       : "all layers";
  r.line(
      format("layers        0..%d per task; metrics: %s; spectra of X: %s", plan.max_depth, computed.c_str(), spectra));
  r.out.count("bundles", plan.bundles.size())
      .count("max_depth", static_cast<unsigned long long>(plan.max_depth))
      .str("metrics", computed)
      .str("spectra", spectra);
}

/// The work in FLOPs and one core's time at `rates` (a range with adaptive replicates).
void report_work(const plan::Plan& plan, const plan::Calibration& rates, bool calibrated, double core_s, Report& r) {
  const auto& spec = plan.spec;
  const double flops = plan.total_flops();
  const std::string rates_text = calibrated ? "rates of this machine from " + plan::calibration_path().string()
                                            : "rough: this machine is not calibrated, run `rcsweep calibrate` once";
  JsonObject work;
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
    r.line(format("work          %.3g to %.3g GFLOP, about %s to %s on one core (%s); the targets decide",
                  range.min_flops / 1e9, range.max_flops / 1e9, human_seconds(min_core_s).c_str(),
                  human_seconds(core_s).c_str(), rates_text.c_str()));
    work.num("gflop_min", range.min_flops / 1e9).num("gflop", range.max_flops / 1e9);
    work.num("core_seconds_min", min_core_s);
  } else {
    r.line(format("work          %.3g GFLOP, about %s on one core (%s)", flops / 1e9, human_seconds(core_s).c_str(),
                  rates_text.c_str()));
    work.num("gflop", flops / 1e9);
  }
  work.num("core_seconds", core_s).flag("calibrated", calibrated);
  work.raw("calibration", calibrated ? json_string(plan::calibration_path().string()) : "null");
  r.out.object("work", work);
}

/// A rank's peak memory and address space in the chosen layout, and the budget it is checked against.
void report_memory(const PlanArgs& args, const plan::Plan& plan, const plan::Layout& layout,
                   const plan::LayoutRequest& request, Report& r) {
  const auto& spec = plan.spec;
  const auto& chosen = layout.chosen;
  const int ranks = chosen.ranks, threads = chosen.threads;
  // What `run` checks (plan/memory.hpp): resident bytes against the budget, address space against ulimit -v.
  const plan::RankMemory memory = plan::rank_memory(plan,
                                                    {threads, 1, ranks, blas_load_threads(), spec.adaptive.enabled()});
  const bool writer = memory.writer >= memory.message;
  const std::string collect = writer ? "rank 0's store tables and batch " + human_bytes(memory.writer)
                                     : "a worker's message " + human_bytes(memory.message);
  const std::string model = memory.model > 0 ? ", model files mapped " + human_bytes(memory.model) : "";
  r.line(format("peak memory   %s per rank (largest bundle %s%s with its tasks' results %s, %s, BLAS %s, program %s%s)",
                human_bytes(memory.resident()).c_str(), human_bytes(memory.unit).c_str(),
                threads > 1 ? (" on " + std::to_string(threads) + " threads").c_str() : "",
                human_bytes(memory.results).c_str(), collect.c_str(), human_bytes(memory.blas).c_str(),
                human_bytes(memory.program).c_str(), model.c_str()));
  const auto limit = address_space_limit();
  const bool over = limit && memory.address_space() > *limit;
  r.line(format(
      "address space %s per rank (ulimit -v; BLAS buffers, MPI and libraries included)%s",
      human_bytes(memory.address_space()).c_str(),
      over ? ("; more than this shell's limit of " + human_bytes(*limit) + ": `rcsweep run` here refuses it").c_str()
           : ""));
  const std::string budget_source = !args.mem_per_rank.empty()
                                        ? request.memory_source
                                        : (args.mem_per_node.empty()
                                               ? "this machine's " + human_bytes(request.mem_per_node)
                                               : "--mem-per-node " + args.mem_per_node) +
                                              " / " + std::to_string(chosen.ranks_per_node) + " rank" +
                                              (chosen.ranks_per_node == 1 ? "" : "s") +
                                              "; set --mem-per-node or --mem-per-rank";
  r.line(format("memory budget %s per rank (%s)", human_bytes(chosen.budget_per_rank).c_str(), budget_source.c_str()));
  r.out.object("memory", JsonObject()
                             .num("peak_bytes", memory.resident())
                             .num("unit_bytes", memory.unit)
                             .num("results_bytes", memory.results)
                             .num("writer_bytes", memory.writer)
                             .num("message_bytes", memory.message)
                             .str("collect", writer ? "writer" : "message")
                             .num("blas_bytes", memory.blas)
                             .num("program_bytes", memory.program)
                             .num("model_bytes", memory.model)
                             .num("address_space_bytes", memory.address_space())
                             .raw("address_space_limit_bytes", limit ? json_number(*limit) : "null")
                             .flag("over_address_space_limit", over)
                             .num("budget_per_rank_bytes", chosen.budget_per_rank)
                             .num("node_bytes", request.mem_per_node)
                             .str("budget_source", budget_source));
}

/// The store's size, the layout with the command that runs it, and the ranks' balance.
void report_layout(const PlanArgs& args, const plan::Plan& plan, const plan::Layout& layout,
                   const std::vector<plan::BundleWork>& work, Report& r) {
  const auto& spec = plan.spec;
  const auto& chosen = layout.chosen;
  const int ranks = chosen.ranks, threads = chosen.threads;
  const auto size = plan::store_size(plan);  // the store of this shard once it has run
  if (size.most > size.least * 1.01)
    r.line(format("store size    about %s (every point at min = %d replicates) to %s (at max = %d)",
                  human_bytes(size.least).c_str(), spec.adaptive.min, human_bytes(size.most).c_str(), spec.replicates));
  else
    r.line("store size    about " + human_bytes(size.most));
  r.out.num("store_bytes", size.most);
  r.out.num("store_bytes_least", size.least);
  r.line(format("layout        %s per node: %s", plan::describe(chosen).c_str(), layout.reason.c_str()));
  r.out.object("layout", JsonObject()
                             .count("ranks", static_cast<unsigned long long>(ranks))
                             .count("ranks_per_node", static_cast<unsigned long long>(chosen.ranks_per_node))
                             .count("threads", static_cast<unsigned long long>(threads))
                             .str("text", plan::describe(chosen))
                             .str("reason", layout.reason)
                             .num("bytes_per_rank", chosen.bytes_per_rank)
                             .num("makespan_s", chosen.makespan_s));
  // The command, as words: mpiexec's, rcsweep's, the sweep file and overrides as given, the store
  // of -o when given (the one the user asked about), else the sweep's default name.
  std::vector<std::string> argv{"mpiexec", "-n", std::to_string(ranks)};
  if (threads > 1)
    argv.insert(argv.end(), {"--map-by", "slot:PE=" + std::to_string(threads), "-x", "OMP_PLACES=cores", "-x",
                             "OMP_PROC_BIND=close"});
  argv.insert(argv.end(), {"rcsweep", "run"});
  if (threads > 1) argv.insert(argv.end(), {"--threads", std::to_string(threads)});
  std::string command;  // the program's own words as they are, the user's quoted for the shell
  for (const auto& word : argv) command += (command.empty() ? "" : " ") + word;
  argv.push_back(args.sweep_file.string());
  argv.insert(argv.end(), args.overrides.begin(), args.overrides.end());
  for (auto at = argv.end() - 1 - static_cast<std::ptrdiff_t>(args.overrides.size()); at != argv.end(); ++at)
    command += " " + plan::shell_quote(*at);
  const std::string store = args.output.empty() ? spec.name + ".h5" : args.output.string();
  argv.insert(argv.end(), {"-o", store});
  command += " -o " + plan::shell_quote(store);
  const std::string note = threads == 1
                               ? "one rank per core, 1 BLAS thread each"
                               : format("%d cores per rank, one thread on each, 1 BLAS thread per thread", threads);
  const std::string suggested = format("suggested     %s   (%s; about %s wall)", command.c_str(), note.c_str(),
                                       human_seconds(chosen.makespan_s).c_str());
  r.line(suggested);
  r.out.object("suggested", JsonObject()
                                .raw("argv", json_strings(argv))
                                .str("command", command)
                                .str("line", suggested)
                                .str("sweep_file", args.sweep_file.string())
                                .num("wall_s", chosen.makespan_s));
  const auto& s = layout.schedule;
  r.line(format("ranks %d%s: %s", ranks, threads > 1 ? (" x " + std::to_string(threads) + " threads").c_str() : "",
                plan::describe(s).c_str()));
  r.out.object("schedule", JsonObject()
                               .count("ranks", static_cast<unsigned long long>(s.ranks))
                               .num("utilisation", s.units.empty() ? 0.0 : s.utilisation())
                               .count("units", s.units.size())
                               .count("bundles", s.bundles)
                               .count("split_bundles", s.split_bundles)
                               .num("work_s", s.work_s)
                               .num("bundle_work_s", s.bundle_work_s)
                               .num("makespan_s", s.makespan_s)
                               .str("text", plan::describe(s)));
  // rank balance: the units at one thread's prices (the layout's own with one thread per rank)
  const auto balance = threads == 1 ? layout.schedule : plan::make_schedule(work, ranks);
  if (const auto warning = plan::idle_warning(balance, work); !warning.empty()) r.warning(warning);
  // Without --emit the layout is for this machine: --cores above its cores oversubscribes it.
  const int here = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const auto over = plan::oversubscription(chosen.ranks_per_node, threads, here); !over.empty())
    r.warning(format("%s (this machine's cores; --cores %d is more); results are the same on any layout, only slower",
                     over.c_str(), args.cores));
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
  Report r;
  r.json = args.json;
  r.line(format("sweep \"%s\"  (plan %s, seed %llu)", spec.name.c_str(), plan.hash.c_str(),
                static_cast<unsigned long long>(spec.seed)));
  r.out.str("name", spec.name).str("plan_hash", plan.hash).count("seed", spec.seed);
  r.out.str("sweep_file", args.sweep_file.string()).raw("overrides", json_strings(spec.overrides));
  if (!spec.overrides.empty()) r.line("overrides     " + config::overrides_line(spec.overrides));
  report_grid(plan, r);
  report_tasks(plan, shard, shard_tasks, r);
  report_work(plan, rates, stored.has_value(), core_s, r);
  report_memory(args, plan, layout, request, r);
  report_layout(args, plan, layout, work, r);
  if (!r.json) {
    if (!args.output.empty()) print_store_outlook(args.output, plan, false);
    return 0;
  }
  // The store's outlook is read in a child process, which prints it as the last member.
  r.out.raw("warnings", json_strings(r.warnings)).str("text", r.text);
  std::string head = r.out.text();
  head.pop_back();  // the closing brace
  std::printf("%s, \"store\": ", head.c_str());
  if (args.output.empty())
    std::printf("null");
  else
    print_store_outlook(args.output, plan, true);
  std::printf("}\n");
  return 0;
}

CLI::App* add_plan_command(CLI::App& app, PlanArgs& args) {
  auto* cmd = app.add_subcommand("plan", "Show what a sweep would compute, its cost and memory; computes nothing.");
  cmd->add_option("sweep", args.sweep_file, "sweep file (TOML)")->required()->check(sweep_file_check());
  cmd->add_option("overrides", args.overrides, overrides_help());
  cmd->footer(overrides_footer("plan"));
  cmd->add_option("--shard", args.shard, "plan only shard i/n");
  cmd->add_flag("--json", args.json,
                "print the plan as one JSON object: every number of the text, and the text itself\n"
                "(docs/USAGE.md \"The plan as JSON\"); not with --emit");
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
