#include "plan/job_script.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "base/error.hpp"

namespace rcsweep::plan {

extern const char* const job_template_slurm_mpi_job_sh;
extern const char* const job_template_slurm_array_job_sh;
extern const char* const job_template_pbs_mpi_job_sh;
extern const char* const job_template_pbs_array_job_sh;
extern const char* const job_template_slurm_merge_job_sh;
extern const char* const job_template_pbs_merge_job_sh;

namespace {

std::string hours_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g h", s / 3600);
  return buf;
}

/// Replace the whole line of `text` that starts with `prefix` by `line` (several lines allowed).
/// The templates are the shipped scripts: a line they lost is a bug here, not the user's.
void replace_line(std::string& text, std::string_view prefix, const std::string& line) {
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    if (std::string_view(text).substr(at, end - at).starts_with(prefix)) {
      text.replace(at, end - at, line);
      return;
    }
    at = end + 1;
  }
  throw std::logic_error("job script template has no line starting with \"" + std::string(prefix) + "\"");
}

/// PBS job names: at most 15 characters, the first a letter, no blanks.
std::string pbs_name(const std::string& name) {
  std::string out;
  for (char c : name)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') out += c;
  if (out.empty() || !std::isalpha(static_cast<unsigned char>(out[0]))) out = "r" + out;
  return out.substr(0, 15);
}

/// Drop the line of `text` that is exactly `line` (if any).
void drop_line(std::string& text, std::string_view line) {
  const std::string needle = "\n" + std::string(line) + "\n";
  const std::size_t at = text.find(needle);
  if (at != std::string::npos) text.erase(at + 1, line.size() + 1);
}

/// Insert `lines` after the last line of `text` that starts with `prefix` (the scheduler directives).
void insert_after_last(std::string& text, std::string_view prefix, const std::string& lines) {
  std::size_t after = std::string::npos, at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    if (std::string_view(text).substr(at, end - at).starts_with(prefix)) after = end + 1;
    at = end + 1;
  }
  if (after == std::string::npos)
    throw std::logic_error("job script template has no \"" + std::string(prefix) + "\" line");
  text.insert(std::min(after, text.size()), lines);
}

void check_value(std::vector<ConfigIssue>& issues, const std::string& key, const std::string& value, bool word) {
  std::string why;
  if (value.empty() || value.find_first_not_of(" \t") == std::string::npos)
    why = "empty";
  else if (value.find_first_of("\n\r") != std::string::npos)
    why = "holds a line break";
  else if (value[value.find_first_not_of(" \t")] == '#')
    why = "starts with '#' (give the option's text without \"#SBATCH\"/\"#PBS\")";
  else if (word && value.find_first_of(" \t") != std::string::npos)
    why = "holds a blank (one name)";
  if (!why.empty()) issues.push_back({key, "\"" + value + "\": " + why});
}

}  // namespace

void check_site(Scheduler scheduler, const SiteOptions& site) {
  std::vector<ConfigIssue> issues;
  if (!site.account.empty()) check_value(issues, "--account", site.account, true);
  if (!site.partition.empty()) check_value(issues, "--partition", site.partition, true);
  if (!site.qos.empty()) {
    if (scheduler == Scheduler::pbs)
      issues.push_back({"--qos", "PBS has no quality of service: leave --qos out for --emit pbs (or give the "
                                 "site's own line with --directive)"});
    else
      check_value(issues, "--qos", site.qos, true);
  }
  for (const auto& d : site.directives) check_value(issues, "--directive", d, false);
  const bool pbs = scheduler == Scheduler::pbs;
  if (!site.launcher.empty() && site.launcher != "mpiexec" && (pbs || site.launcher != "srun"))
    issues.push_back({"--launcher", "\"" + site.launcher +
                                        "\": " + (pbs ? "PBS jobs start ranks with mpiexec only" : "mpiexec or srun")});
  if (!site.mpi.empty() && site.mpi != "auto" && site.mpi != "openmpi" && site.mpi != "mpich" && site.mpi != "intel")
    issues.push_back({"--mpi", "\"" + site.mpi + "\": auto, openmpi, mpich or intel"});
  if (!site.srun_mpi.empty()) {
    const bool word = std::all_of(site.srun_mpi.begin(), site.srun_mpi.end(),
                                  [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (pbs)
      issues.push_back({"--srun-mpi", "PBS jobs have no srun: leave --srun-mpi out for --emit pbs"});
    else if (!word)
      issues.push_back(
          {"--srun-mpi",
           "\"" + site.srun_mpi + "\": auto, default (no --mpi) or a plugin of srun --mpi=list (pmix, pmi2, ...)"});
  }
  if (!issues.empty()) throw ConfigError(std::move(issues));
}

std::string site_directives(Scheduler scheduler, const SiteOptions& site) {
  const bool slurm = scheduler == Scheduler::slurm;
  const std::string pre = slurm ? "#SBATCH " : "#PBS ";
  std::string out;
  if (!site.account.empty()) out += pre + (slurm ? "--account=" : "-A ") + site.account + "\n";
  if (!site.partition.empty()) out += pre + (slurm ? "--partition=" : "-q ") + site.partition + "\n";
  if (!site.qos.empty() && slurm) out += pre + "--qos=" + site.qos + "\n";
  if (site.exclusive) out += pre + (slurm ? "--exclusive" : "-l place=excl") + "\n";
  for (const auto& d : site.directives) out += pre + d + "\n";
  return out;
}

std::vector<std::string> unshared_paths(const ScriptNames& names, int nodes, const std::string& home) {
  const auto under = [](const std::string& path, std::string dir) {
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir.size() > 1 && path.starts_with(dir) && (path.size() == dir.size() || path[dir.size()] == '/');
  };
  std::vector<std::string> out;
  const std::pair<const char*, const std::string*> paths[] = {{"sweep file", &names.sweep_file},
                                                              {"output", &names.output},
                                                              {"program", &names.rcsweep},
                                                              {"setup file", &names.setup}};
  for (const auto& [what, path] : paths) {
    if (!path->starts_with('/')) continue;
    const bool local = under(*path, "/tmp") || under(*path, "/dev/shm") || under(*path, "/run");
    if (local || (nodes > 1 && !home.empty() && under(*path, home))) out.push_back(std::string(what) + " " + *path);
  }
  return out;
}

Scheduler parse_scheduler(const std::string& text) {
  if (text == "slurm") return Scheduler::slurm;
  if (text == "pbs") return Scheduler::pbs;
  throw ConfigError({{"--emit", "unknown scheduler \"" + text + "\": slurm or pbs"}});
}

double time_lead(double estimate_s) { return std::clamp(estimate_s, min_lead_s, max_lead_s); }

int stop_lead(double lead_s) { return static_cast<int>(std::lround(0.4 * lead_s)); }

JobSizing size_job(const WorkEstimate& work, const JobRequest& request) {
  std::vector<ConfigIssue> issues;
  if (request.nodes < 1) issues.push_back({"--nodes", std::to_string(request.nodes) + ": at least 1 node"});
  if (request.cores_per_node == 0)
    issues.push_back({"--cores", "not given, and the scheduler (sinfo, pbsnodes -a) did not tell its nodes' cores: "
                                 "give the cores of one compute node (this machine's count is not theirs)"});
  else if (request.cores_per_node < 1)
    issues.push_back({"--cores", std::to_string(request.cores_per_node) + ": at least 1 core per node"});
  else if (request.threads_per_rank < 1 || request.threads_per_rank > request.cores_per_node)
    issues.push_back({"--threads", std::to_string(request.threads_per_rank) + ": from 1 to the cores of a node (" +
                                       std::to_string(request.cores_per_node) + ")"});
  const double max_s = request.max_hours * 3600;
  if (!std::isfinite(request.max_hours) || max_s <= min_lead_s)
    issues.push_back({"--hours", "not a number of hours above " + hours_text(min_lead_s) +
                                     " (the scripts' start-up and stop lead)"});
  const auto tasks = std::max<std::size_t>(1, work.tasks);
  const auto units = work.shard_units > 0 ? work.shard_units : tasks;
  if (request.shards < 0 || static_cast<std::size_t>(request.shards) > units)
    issues.push_back({"--shards", std::to_string(request.shards) + ": from 1 to the " + std::to_string(units) +
                                      (work.shard_units > 0 && work.shard_units != tasks ? " grid points" : " tasks") +
                                      " `run --shard` deals out (a shard gets at least one)"});
  if (!issues.empty()) throw ConfigError(std::move(issues));

  const int threads = request.threads_per_rank;
  const int per_node = request.cores_per_node / threads;  // ranks a node holds
  const long long slots = static_cast<long long>(request.nodes) * per_node;
  const auto ask = [](double estimate) { return std::ceil((estimate * time_margin + time_lead(estimate)) / 60) * 60; };
  if (ask(work.largest_task_s) > max_s)
    throw ConfigError(
        {{"--hours", "the longest task needs about " + hours_text(work.largest_task_s) + " on one core (" +
                         hours_text(ask(work.largest_task_s)) + " with margin), more than --hours " +
                         hours_text(max_s) + "; a task is not split: ask for more hours"}});
  JobSizing s;
  const auto size_shards = [&](int shards) {
    s.shards = shards;
    const auto per_shard = (tasks + static_cast<std::size_t>(shards) - 1) / static_cast<std::size_t>(shards);
    s.ranks = static_cast<int>(std::min<long long>(slots, static_cast<long long>(per_shard)));
    s.estimate_s = std::max(work.core_seconds / shards / (s.ranks * threads), work.largest_task_s);
    s.walltime_s = ask(s.estimate_s);
  };
  if (request.shards > 0) {
    size_shards(request.shards);
    if (s.walltime_s > max_s)
      throw ConfigError(
          {{"--shards", std::to_string(request.shards) + " shards of about " + hours_text(s.estimate_s) + " each (" +
                            hours_text(s.walltime_s) + " with margin) do not fit --hours " + hours_text(max_s) +
                            ": ask for more shards or hours, or leave --shards out"}});
  } else {
    for (int shards = 1;; ++shards) {
      size_shards(shards);
      if (s.walltime_s <= max_s) break;
      if (static_cast<std::size_t>(shards) >= tasks)  // cannot happen: one task per shard fits
        throw std::logic_error("size_job: no shard count fits");
    }
  }
  s.lead_s = time_lead(s.estimate_s);
  s.stop_before_s = stop_lead(s.lead_s);
  // as few nodes as hold the ranks, the ranks spread evenly over them (a few more to fill them)
  s.nodes = (s.ranks + per_node - 1) / per_node;
  s.ranks_per_node = (s.ranks + s.nodes - 1) / s.nodes;
  s.ranks = s.nodes * s.ranks_per_node;
  s.threads_per_rank = threads;
  s.mem_per_rank_mib = std::max(256.0, std::ceil(work.bytes_per_rank * memory_margin / (1 << 20)));
  // The fewest cores (whole ranks) that finish the work within enough_time_s or its longest task.
  const double target_s = std::max(enough_time_s, work.largest_task_s);
  const double ranks_needed = std::ceil(work.core_seconds / s.shards / threads / target_s);
  const auto enough_ranks = static_cast<int>(std::clamp(ranks_needed, 1.0, static_cast<double>(s.ranks)));
  s.enough_cores = enough_ranks * threads;
  return s;
}

std::string format_walltime(double seconds) {
  const long long s = static_cast<long long>(std::ceil(std::max(0.0, seconds)));
  char buf[48];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

std::string shell_quote(const std::string& text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_./+-").find(c) != std::string_view::npos;
  });
  if (plain) return text;
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string_view job_template(Scheduler scheduler, bool array) {
  if (scheduler == Scheduler::slurm) return array ? job_template_slurm_array_job_sh : job_template_slurm_mpi_job_sh;
  return array ? job_template_pbs_array_job_sh : job_template_pbs_mpi_job_sh;
}

std::string_view merge_template(Scheduler scheduler) {
  return scheduler == Scheduler::slurm ? job_template_slurm_merge_job_sh : job_template_pbs_merge_job_sh;
}

namespace {

/// The defaults of the sweep file, the output, the rcsweep program and the setup file.
void fill_paths(std::string& text, const ScriptNames& names) {
  replace_line(text, "SWEEP=${1:-${SWEEP:-", "SWEEP=${1:-${SWEEP:-" + shell_quote(names.sweep_file) + "}}");
  replace_line(text, "OUT=${2:-${OUT:-", "OUT=${2:-${OUT:-" + shell_quote(names.output) + "}}");
  replace_line(text, "RCSWEEP=${RCSWEEP:-", "RCSWEEP=${RCSWEEP:-" + shell_quote(names.rcsweep) + "}");
  if (!names.setup.empty())
    replace_line(text, "RCSWEEP_SETUP=${RCSWEEP_SETUP:-",
                 "RCSWEEP_SETUP=${RCSWEEP_SETUP:-" + shell_quote(names.setup) + "}");
}

}  // namespace

std::string merge_script(Scheduler scheduler, const ScriptNames& names) {
  std::string text(merge_template(scheduler));
  if (scheduler == Scheduler::slurm)
    replace_line(text, "#SBATCH --job-name=", "#SBATCH --job-name=" + names.job_name + "-merge");
  else
    replace_line(text, "#PBS -N ", "#PBS -N " + pbs_name(names.job_name).substr(0, 9) + "-merge");
  fill_paths(text, names);
  auto site = names.site;
  site.exclusive = false;  // one process
  const std::string lines = site_directives(scheduler, site);
  if (!lines.empty()) insert_after_last(text, scheduler == Scheduler::slurm ? "#SBATCH " : "#PBS ", lines);
  const std::size_t shebang = text.find('\n');
  text.insert(shebang == std::string::npos ? text.size() : shebang + 1,
              "# Written by `rcsweep plan --emit " + std::string(scheduler == Scheduler::slurm ? "slurm" : "pbs") +
                  "` into the array job that submits it.\n");
  return text;
}

namespace {

/// The Slurm directives and defaults of a job of `sizing`.
void size_slurm(std::string& text, bool array, const JobSizing& sizing, const ScriptNames& names) {
  const int threads = std::max(sizing.threads_per_rank, 1);
  // Slurm's --mem-per-cpu counts every CPU of a rank (--cpus-per-task)
  const std::string mem_per_cpu = std::to_string(static_cast<long long>(std::ceil(sizing.mem_per_rank_mib / threads)));
  const std::string cpus = threads > 1 ? "\n#SBATCH --cpus-per-task=" + std::to_string(threads) : "";
  replace_line(text, "#SBATCH --job-name=", "#SBATCH --job-name=" + names.job_name);
  replace_line(text, "#SBATCH --time=", "#SBATCH --time=" + format_walltime(sizing.walltime_s));
  if (array) {
    replace_line(text, "#SBATCH --array=", "#SBATCH --array=0-" + std::to_string(sizing.shards - 1));
    replace_line(text, "#SBATCH --ntasks=",
                 "#SBATCH --nodes=" + std::to_string(sizing.nodes) + "\n#SBATCH --ntasks-per-node=" +
                     std::to_string(sizing.ranks_per_node) + "\n#SBATCH --mem-per-cpu=" + mem_per_cpu + "M");
    replace_line(text, "#SBATCH --cpus-per-task=", "#SBATCH --cpus-per-task=" + std::to_string(threads));
    replace_line(text, "SHARDS=${SHARDS:-", "SHARDS=${SHARDS:-" + std::to_string(sizing.shards) + "}");
  } else {
    replace_line(text, "#SBATCH --nodes=",
                 "#SBATCH --nodes=" + std::to_string(sizing.nodes) + "\n#SBATCH --ntasks-per-node=" +
                     std::to_string(sizing.ranks_per_node) + cpus + "\n#SBATCH --mem-per-cpu=" + mem_per_cpu + "M");
  }
  replace_line(text, "THREADS=${THREADS:-",
               "THREADS=${THREADS:-${SLURM_CPUS_PER_TASK:-" + std::to_string(threads) + "}}");
}

/// The PBS directives and defaults of a job of `sizing`.
void size_pbs(std::string& text, bool array, const JobSizing& sizing, const ScriptNames& names) {
  const int threads = std::max(sizing.threads_per_rank, 1);
  const std::string ncpus = std::to_string(sizing.ranks_per_node * threads);
  const std::string mpiprocs = std::to_string(sizing.ranks_per_node);
  const std::string ompthreads = threads > 1 ? ":ompthreads=" + std::to_string(threads) : "";
  replace_line(text, "#PBS -N ", "#PBS -N " + pbs_name(names.job_name));
  replace_line(text, "#PBS -l walltime=", "#PBS -l walltime=" + format_walltime(sizing.walltime_s));
  replace_line(
      text, "#PBS -l select=",
      "#PBS -l select=" + std::to_string(sizing.nodes) + ":ncpus=" + ncpus + ":mpiprocs=" + mpiprocs + ompthreads +
          ":mem=" + std::to_string(static_cast<long long>(sizing.mem_per_rank_mib) * sizing.ranks_per_node) + "mb");
  replace_line(text, "THREADS=${THREADS:-", "THREADS=${THREADS:-" + std::to_string(threads) + "}");
  if (array) {
    replace_line(text, "#PBS -J ", "#PBS -J 0-" + std::to_string(sizing.shards - 1));
    replace_line(text, "SHARDS=${SHARDS:-", "SHARDS=${SHARDS:-" + std::to_string(sizing.shards) + "}");
  }
}

/// The stop lead of a job of `sizing`: STOP_BEFORE, Slurm's --signal lead, and GRACE at most half
/// of it (a short job's stop must land before its end). A sizing without one keeps the template's.
void fill_stop_lead(std::string& text, Scheduler scheduler, const JobSizing& sizing) {
  if (sizing.stop_before_s <= 0) return;
  const std::string lead = std::to_string(sizing.stop_before_s);
  replace_line(text, "STOP_BEFORE=${STOP_BEFORE:-", "STOP_BEFORE=${STOP_BEFORE:-" + lead + "}");
  if (scheduler == Scheduler::slurm) replace_line(text, "#SBATCH --signal=B:USR1@", "#SBATCH --signal=B:USR1@" + lead);
  const std::string grace = "GRACE=${GRACE:-";
  const std::size_t at = text.find("\n" + grace);
  if (at == std::string::npos) throw std::logic_error("job script template has no line starting with " + grace);
  const int shipped = std::atoi(text.c_str() + at + 1 + grace.size());
  const int shorter = std::min(shipped, sizing.stop_before_s / 2);
  replace_line(text, grace, grace + std::to_string(shorter) + "}");
  // The header's defaults and notes say the same (the shipped scripts': 120 s).
  const auto replace_all = [&text](const std::string& from, const std::string& to) {
    for (std::size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
      text.replace(pos, from.size(), to);
  };
  const std::string shipped_lead = "120";
  if (lead == shipped_lead) return;
  replace_all("(rcsweep --time-limit)  default: " + shipped_lead, "(rcsweep --time-limit)  default: " + lead);
  replace_all("walltime warning   default: " + std::to_string(shipped),
              "walltime warning   default: " + std::to_string(shorter));
  replace_all("USR1@" + shipped_lead, "USR1@" + lead);
  replace_all("this shell " + shipped_lead + " s", "this shell " + lead + " s");
  replace_all("\n# " + shipped_lead + " s before it", "\n# " + lead + " s before it");
}

/// The site's launcher settings, and the overrides after the run command's sweep file.
void fill_launcher_and_overrides(std::string& text, Scheduler scheduler, const ScriptNames& names) {
  if (!names.site.launcher.empty() && scheduler == Scheduler::slurm)
    replace_line(text, "LAUNCHER=${LAUNCHER:-", "LAUNCHER=${LAUNCHER:-" + names.site.launcher + "}");
  if (!names.site.mpi.empty())
    replace_line(text, "MPI_FLAVOUR=${MPI_FLAVOUR:-", "MPI_FLAVOUR=${MPI_FLAVOUR:-" + names.site.mpi + "}");
  if (!names.site.srun_mpi.empty())
    replace_line(text, "SRUN_MPI=${SRUN_MPI:-", "SRUN_MPI=${SRUN_MPI:-" + names.site.srun_mpi + "}");
  if (!names.overrides.empty()) {
    const std::string run = "run \"$SWEEP\"";
    std::string with = run;
    for (const auto& o : names.overrides) with += " " + shell_quote(o);
    const std::size_t at = text.find(run);
    if (at == std::string::npos) throw std::logic_error("job script template has no `" + run + "` command");
    text.replace(at, run.size(), with);
  }
}

/// An array job carries its merge job, which its first element submits.
void add_merge_job(std::string& text, Scheduler scheduler, const ScriptNames& names) {
  const std::string merge = merge_script(scheduler, names);
  const std::string end = "RCSWEEP_MERGE_JOB";
  if (("\n" + merge).find("\n" + end + "\n") != std::string::npos)
    throw std::logic_error("merge job template holds the line " + end);
  replace_line(text, "MERGE_JOB=${MERGE_JOB:-", "MERGE_JOB=${MERGE_JOB:-built-in}");
  replace_line(text, "merge_job_text() {",
               "merge_job_text() {  # built-in: the merge job `rcsweep plan --emit` wrote with this array\n"
               "  if [[ $MERGE_JOB != built-in ]]; then cat -- \"$MERGE_JOB\"; return; fi\n"
               "  cat <<'" +
                   end + "'\n" + merge + (merge.ends_with('\n') ? "" : "\n") + end + "\n}");
}

/// The summary, as comments right under the shebang.
void add_summary(std::string& text, Scheduler scheduler, const ScriptNames& names) {
  std::string summary = "# Written by `rcsweep plan --emit " +
                        std::string(scheduler == Scheduler::slurm ? "slurm" : "pbs") + "` from the shipped script:\n";
  std::size_t at = 0;
  while (at < names.summary.size()) {
    const std::size_t end = std::min(names.summary.find('\n', at), names.summary.size());
    summary += "# " + names.summary.substr(at, end - at) + "\n";
    at = end + 1;
  }
  const std::size_t shebang = text.find('\n');  // the summary goes right under it
  text.insert(shebang == std::string::npos ? text.size() : shebang + 1, summary + "#\n");
}

}  // namespace

std::string fill_job_template(std::string_view script, Scheduler scheduler, bool array, const JobSizing& sizing,
                              const ScriptNames& names) {
  check_site(scheduler, names.site);
  std::string text(script);
  if (scheduler == Scheduler::slurm)
    size_slurm(text, array, sizing, names);
  else
    size_pbs(text, array, sizing, names);
  fill_stop_lead(text, scheduler, sizing);
  fill_paths(text, names);
  fill_launcher_and_overrides(text, scheduler, names);

  const std::string directive = scheduler == Scheduler::slurm ? "#SBATCH " : "#PBS ";
  drop_line(text, "#SBATCH --exclusive");  // mpi_job.sh by hand takes whole nodes; emitted, only when asked
  const std::string site = site_directives(scheduler, names.site);
  if (!site.empty()) insert_after_last(text, directive, site);
  if (array) add_merge_job(text, scheduler, names);
  add_summary(text, scheduler, names);
  return text;
}

std::string job_script(Scheduler scheduler, const JobSizing& sizing, const ScriptNames& names) {
  const bool array = sizing.shards > 1;
  return fill_job_template(job_template(scheduler, array), scheduler, array, sizing, names);
}

}  // namespace rcsweep::plan
