// Job scripts of `rcsweep plan --emit`: sizing from the cost model (ranks, nodes, walltime with
// margin, shards, memory), the option errors, and the shipped scripts filled in as templates.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.hpp"
#include "plan/job_script.hpp"

namespace rcsweep {
namespace {

using plan::JobRequest;
using plan::Scheduler;
using plan::WorkEstimate;

/// The key of the single issue of the ConfigError `f` throws ("" if none).
template <class F>
std::string error_key(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.issues().size(), 1u) << e.what();
    return e.issues().empty() ? "?" : e.issues()[0].key;
  }
  return "";
}

std::string read(const std::string& relative) {
  std::ifstream in(std::string(RCSWEEP_SOURCE_DIR) + "/" + relative);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text + "\n").find("\n" + line + "\n") != std::string::npos;
}

/// A script's lines up to its first command (where the scheduler stops reading directives).
std::string header(const std::string& text) { return text.substr(0, text.find("\nset -euo pipefail\n")); }

TEST(JobScript, SchedulerNamesAndErrorsNameTheOption) {
  EXPECT_EQ(plan::parse_scheduler("slurm"), Scheduler::slurm);
  EXPECT_EQ(plan::parse_scheduler("pbs"), Scheduler::pbs);
  EXPECT_EQ(error_key([] { plan::parse_scheduler("lsf"); }), "--emit");
  EXPECT_EQ(error_key([] { plan::parse_scheduler("SLURM"); }), "--emit");
  const WorkEstimate w{100, 1, 10, 1e6};
  EXPECT_EQ(error_key([&] { plan::size_job(w, {0, 4, 24}); }), "--nodes");
  EXPECT_EQ(error_key([&] { plan::size_job(w, {-3, 4, 24}); }), "--nodes");
  EXPECT_EQ(error_key([&] { plan::size_job(w, {1, 0, 24}); }), "--cores");
  EXPECT_EQ(error_key([&] { plan::size_job(w, {1, 4, 0}); }), "--hours");
  EXPECT_EQ(error_key([&] { plan::size_job(w, {1, 4, -1}); }), "--hours");
  EXPECT_EQ(error_key([&] { plan::size_job(w, {1, 4, NAN}); }), "--hours");
  EXPECT_EQ(error_key([&] { plan::size_job(w, {1, 4, 0.01}); }), "--hours");  // 36 s < the shortest lead
  EXPECT_EQ(error_key([&] { plan::size_job(w, {1, 4, 24}); }), "");
  EXPECT_EQ(error_key([&] { plan::size_job(w, {1, 4, 24, 1, 11}); }), "--shards");  // more shards than tasks
  EXPECT_EQ(error_key([&] { plan::size_job(w, {1, 4, 24, 1, -1}); }), "--shards");
  // the units run --shard deals out (adaptive replicates: points) bound --shards, not the tasks
  EXPECT_EQ(error_key([] { plan::size_job({100, 1, 10, 1e6, 4}, {1, 4, 24, 1, 5}); }), "--shards");
  EXPECT_EQ(error_key([] { plan::size_job({100, 1, 10, 1e6, 4}, {1, 4, 24, 1, 4}); }), "");
  // shards whose jobs do not fit --hours: refused naming --shards (the fewest that fit is 3)
  EXPECT_EQ(error_key([] { plan::size_job({3.6e6, 60, 10000, 1e6}, {4, 32, 4, 1, 2}); }), "--shards");
  // a task is never split: one that does not fit the hours is refused, naming --hours
  EXPECT_EQ(error_key([] { plan::size_job({7200, 3600, 2, 1e6}, {1, 4, 1}); }), "--hours");
}

TEST(JobScript, SmallSweepGetsNoMoreRanksThanTasksAndTheMinimumTime) {
  const auto s = plan::size_job({100, 1, 10, 1e6}, {1, 64, 24});
  EXPECT_EQ(s.ranks, 10);  // 10 tasks: more ranks would idle
  EXPECT_EQ(s.ranks_per_node, 10);
  EXPECT_EQ(s.nodes, 1);
  EXPECT_EQ(s.shards, 1);
  EXPECT_DOUBLE_EQ(s.estimate_s, 10.0);
  EXPECT_DOUBLE_EQ(s.lead_s, 60.0);       // the shortest lead
  EXPECT_DOUBLE_EQ(s.walltime_s, 120.0);  // 10 s x 1.5 + 60 s, up to whole minutes
  EXPECT_EQ(s.stop_before_s, 24);
  EXPECT_DOUBLE_EQ(s.mem_per_rank_mib, 256.0);  // the floor
}

TEST(JobScript, EnoughCoresIsTheFewestThatFinishWithinTenMinutesOrTheLongestTask) {
  // 3 minutes of one core in 1000 tasks on 2 nodes x 64 cores: one core finishes it in 10 minutes.
  EXPECT_EQ(plan::size_job({180, 0.5, 1000, 1e6}, {2, 64, 24}).enough_cores, 1);
  // 10 h of work: ceil(36000 / 600) = 60 ranks; with 2 threads a rank, 30 ranks = 60 cores.
  EXPECT_EQ(plan::size_job({36000, 1, 10000, 1e6}, {2, 64, 24}).enough_cores, 60);
  EXPECT_EQ(plan::size_job({36000, 1, 10000, 1e6}, {2, 64, 24, 2}).enough_cores, 60);
  // A longest task of 1 h: ceil(36000 / 3600) = 10 ranks finish the rest alongside it.
  EXPECT_EQ(plan::size_job({36000, 3600, 100, 1e6}, {2, 64, 24}).enough_cores, 10);
  // Never more than the job has: a sweep that needs all of them.
  const auto big = plan::size_job({3.6e7, 10, 1000000, 1e6}, {2, 64, 24});
  EXPECT_EQ(big.enough_cores, big.ranks * big.threads_per_rank);
}

TEST(JobScript, MultiNodeJobOneRankPerCoreWithMargin) {
  const WorkEstimate w{3.6e6, 60, 10000, 400.0 * (1 << 20)};
  const auto s = plan::size_job(w, {4, 32, 24});
  EXPECT_EQ(s.ranks, 128);
  EXPECT_EQ(s.ranks_per_node, 32);
  EXPECT_EQ(s.nodes, 4);
  EXPECT_EQ(s.shards, 1);
  EXPECT_DOUBLE_EQ(s.estimate_s, 3.6e6 / 128);
  EXPECT_DOUBLE_EQ(s.lead_s, plan::max_lead_s);  // a long job: the longest lead, the scripts' STOP_BEFORE
  EXPECT_EQ(s.stop_before_s, 120);
  EXPECT_GE(s.walltime_s, s.estimate_s * plan::time_margin + plan::max_lead_s);
  EXPECT_LT(s.walltime_s, s.estimate_s * plan::time_margin + plan::max_lead_s + 60);
  EXPECT_EQ(std::fmod(s.walltime_s, 60.0), 0.0);
  EXPECT_DOUBLE_EQ(s.mem_per_rank_mib, 500.0);  // 400 MiB x 1.25
  // fewer ranks than one node's cores: one node
  const auto one = plan::size_job({1200, 60, 20, 1e6}, {4, 32, 24});
  EXPECT_EQ(one.ranks, 20);
  EXPECT_EQ(one.nodes, 1);
  EXPECT_EQ(one.ranks_per_node, 20);
  // more ranks than one node's cores: spread evenly over the fewest nodes
  const auto even = plan::size_job({5400, 60, 90, 1e6}, {2, 64, 24});
  EXPECT_EQ(even.nodes, 2);
  EXPECT_EQ(even.ranks_per_node, 45);
  EXPECT_EQ(even.ranks, 90);
  const auto odd = plan::size_job({5460, 60, 91, 1e6}, {4, 64, 24});
  EXPECT_EQ(odd.nodes, 2);
  EXPECT_EQ(odd.ranks_per_node, 46);
  EXPECT_EQ(odd.ranks, 92);  // the job's tasks: nodes x ranks per node
}

TEST(JobScript, SweepLongerThanTheHoursIsShardedIntoTheFewestJobsThatFit) {
  const WorkEstimate w{3.6e6, 60, 10000, 1e6};
  const double max_s = 4 * 3600;
  const auto s = plan::size_job(w, {4, 32, 4});
  ASSERT_GT(s.shards, 1);
  EXPECT_EQ(s.ranks, 128);
  EXPECT_LE(s.walltime_s, max_s);
  // every shard's share of the work fits its job ...
  EXPECT_GE((s.walltime_s - plan::max_lead_s) / plan::time_margin * s.ranks * s.shards, w.core_seconds);
  // ... and one shard fewer would not
  const double fewer = w.core_seconds / (s.shards - 1) / s.ranks * plan::time_margin + plan::max_lead_s;
  EXPECT_GT(std::ceil(fewer / 60) * 60, max_s);
  EXPECT_EQ(s.shards, 3);  // 28125 s of wall on 128 ranks, 1.5 x that in jobs of at most 4 h
}

TEST(JobScript, TheLeadScalesWithTheJob) {
  EXPECT_DOUBLE_EQ(plan::time_lead(0.001), plan::min_lead_s);
  EXPECT_DOUBLE_EQ(plan::time_lead(100), 100.0);
  EXPECT_DOUBLE_EQ(plan::time_lead(1e5), plan::max_lead_s);
  EXPECT_EQ(plan::stop_lead(60), 24);
  EXPECT_EQ(plan::stop_lead(300), 120);
  // a sweep of seconds fits a job of a few minutes (a fixed 5-minute lead made 6)
  const WorkEstimate tiny{0.1, 0.01, 72, 1e6};
  const auto one = plan::size_job(tiny, {1, 2, 0.085});
  EXPECT_EQ(one.shards, 1);
  EXPECT_DOUBLE_EQ(one.walltime_s, 120.0);
}

TEST(JobScript, ShardsGiveExactlyThatManyElementsWhateverTheTasksLengths) {
  const WorkEstimate tiny{0.1, 0.01, 72, 1e6};
  for (int n : {1, 2, 3, 72}) {
    const auto s = plan::size_job(tiny, {1, 2, 0.085, 1, n});
    EXPECT_EQ(s.shards, n);
    EXPECT_EQ(s.ranks, std::min(2, (72 + n - 1) / n));  // a shard's tasks, at most the cores
    EXPECT_DOUBLE_EQ(s.walltime_s, 120.0);
  }
  // more shards than needed for the hours: each the smaller share of the work
  const WorkEstimate w{3.6e6, 60, 10000, 1e6};
  const auto six = plan::size_job(w, {4, 32, 4, 1, 6});
  EXPECT_EQ(six.shards, 6);
  EXPECT_DOUBLE_EQ(six.estimate_s, 3.6e6 / 6 / 128);
  const auto array = plan::job_script(Scheduler::slurm, plan::size_job(tiny, {1, 2, 0.085, 1, 3}), {});
  EXPECT_TRUE(array.find("\n#SBATCH --array=0-2\n") != std::string::npos);
}

TEST(JobScript, WalltimeAndQuoting) {
  EXPECT_EQ(plan::format_walltime(3600), "01:00:00");
  EXPECT_EQ(plan::format_walltime(90061), "25:01:01");
  EXPECT_EQ(plan::format_walltime(59.2), "00:01:00");
  EXPECT_EQ(plan::shell_quote("/a/b-c_d.toml"), "/a/b-c_d.toml");
  EXPECT_EQ(plan::shell_quote("my sweep.toml"), "'my sweep.toml'");
  EXPECT_EQ(plan::shell_quote("it's$x"), "'it'\\''s$x'");
  EXPECT_EQ(plan::shell_quote(""), "''");
}

TEST(JobScript, CompiledInTemplatesAreTheShippedScripts) {
  EXPECT_EQ(plan::job_template(Scheduler::slurm, false), read("jobs/slurm/mpi_job.sh"));
  EXPECT_EQ(plan::job_template(Scheduler::slurm, true), read("jobs/slurm/array_job.sh"));
  EXPECT_EQ(plan::job_template(Scheduler::pbs, false), read("jobs/pbs/mpi_job.sh"));
  EXPECT_EQ(plan::job_template(Scheduler::pbs, true), read("jobs/pbs/array_job.sh"));
  EXPECT_EQ(plan::merge_template(Scheduler::slurm), read("jobs/slurm/merge_job.sh"));
  EXPECT_EQ(plan::merge_template(Scheduler::pbs), read("jobs/pbs/merge_job.sh"));
}

plan::ScriptNames names() {
  return {"/data/my sweep.toml", "out.h5", "mtg grid", "/opt/rcsweep/bin/rcsweep", "plan abc\nsecond", {}, {}, ""};
}

/// Every line of `shipped` is in `emitted` except those starting with one of `changed`.
void expect_rest_unchanged(const std::string& shipped, const std::string& emitted, std::vector<std::string> changed) {
  std::istringstream in(shipped);
  for (std::string line; std::getline(in, line);) {
    bool sized = false;
    for (const auto& c : changed) sized = sized || line.starts_with(c);
    if (!sized) {
      EXPECT_TRUE(has_line(emitted, line)) << "lost: " << line;
    }
  }
}

TEST(JobScript, SlurmMpiJobIsTheShippedScriptSized) {
  const auto s = plan::size_job({3.6e6, 60, 10000, 400.0 * (1 << 20)}, {4, 32, 24});
  const auto text = plan::job_script(Scheduler::slurm, s, names());
  EXPECT_TRUE(text.starts_with("#!/bin/bash\n# Written by `rcsweep plan --emit slurm`"));
  EXPECT_TRUE(has_line(text, "# plan abc"));
  EXPECT_TRUE(has_line(text, "# second"));
  EXPECT_TRUE(has_line(text, "#SBATCH --job-name=mtg grid"));
  EXPECT_TRUE(has_line(text, "#SBATCH --nodes=4"));
  EXPECT_TRUE(has_line(text, "#SBATCH --ntasks-per-node=32"));
  EXPECT_TRUE(has_line(text, "#SBATCH --mem-per-cpu=500M"));
  EXPECT_TRUE(has_line(text, "#SBATCH --time=" + plan::format_walltime(s.walltime_s)));
  EXPECT_TRUE(has_line(text, "SWEEP=${1:-${SWEEP:-'/data/my sweep.toml'}}"));
  EXPECT_TRUE(has_line(text, "OUT=${2:-${OUT:-out.h5}}"));
  EXPECT_TRUE(has_line(text, "RCSWEEP=${RCSWEEP:-/opt/rcsweep/bin/rcsweep}"));
  EXPECT_FALSE(has_line(text, "#SBATCH --exclusive"));  // only with plan --exclusive
  expect_rest_unchanged(read("jobs/slurm/mpi_job.sh"), text,
                        {"#SBATCH --job-name=", "#SBATCH --nodes=", "#SBATCH --time=", "#SBATCH --exclusive",
                         "SWEEP=", "OUT=", "RCSWEEP="});
}

TEST(JobScript, ShardedSweepsGetTheArrayScripts) {
  const auto s = plan::size_job({3.6e6, 60, 10000, 1e6}, {4, 32, 4});
  ASSERT_EQ(s.shards, 3);
  const auto slurm = plan::job_script(Scheduler::slurm, s, names());
  EXPECT_TRUE(has_line(slurm, "#SBATCH --array=0-2"));
  EXPECT_TRUE(has_line(slurm, "SHARDS=${SHARDS:-3}"));
  EXPECT_TRUE(has_line(slurm, "#SBATCH --nodes=4"));
  EXPECT_TRUE(has_line(slurm, "#SBATCH --ntasks-per-node=32"));
  EXPECT_FALSE(has_line(header(slurm), "#SBATCH --ntasks=1"));  // the merge job it carries has one
  expect_rest_unchanged(read("jobs/slurm/array_job.sh"), slurm,
                        {"#SBATCH --job-name=", "#SBATCH --array=", "#SBATCH --ntasks=", "#SBATCH --time=", "SHARDS=",
                         "SWEEP=", "OUT=", "RCSWEEP=", "MERGE_JOB=", "merge_job_text() {"});
  const auto pbs = plan::job_script(Scheduler::pbs, s, names());
  EXPECT_TRUE(pbs.starts_with("#!/bin/bash\n# Written by `rcsweep plan --emit pbs`"));
  EXPECT_TRUE(has_line(pbs, "#PBS -J 0-2"));
  EXPECT_TRUE(has_line(pbs, "#PBS -N mtggrid"));  // PBS names: no blanks, 15 characters at most
  EXPECT_TRUE(has_line(pbs, "#PBS -l select=4:ncpus=32:mpiprocs=32:mem=8192mb"));  // 32 x 256 MiB
  EXPECT_TRUE(has_line(pbs, "#PBS -l walltime=" + plan::format_walltime(s.walltime_s)));
  EXPECT_TRUE(has_line(pbs, "SHARDS=${SHARDS:-3}"));
  expect_rest_unchanged(read("jobs/pbs/array_job.sh"), pbs,
                        {"#PBS -N ", "#PBS -J ", "#PBS -l ",
                         "SHARDS=", "SWEEP=", "OUT=", "RCSWEEP=", "MERGE_JOB=", "merge_job_text() {"});
  const auto single = plan::job_script(Scheduler::pbs, plan::size_job({100, 1, 10, 1e6}, {1, 8, 24}), names());
  EXPECT_FALSE(single.find("#PBS -J") != std::string::npos);
  EXPECT_TRUE(has_line(single, "#PBS -l select=1:ncpus=8:mpiprocs=8:mem=2048mb"));
}

TEST(JobScript, ThreadsPerRankMeanFewerRanksPerNode) {
  const WorkEstimate w{3.6e6, 60, 10000, 400.0 * (1 << 20)};
  const auto s = plan::size_job(w, {4, 32, 24, 4});
  EXPECT_EQ(s.threads_per_rank, 4);
  EXPECT_EQ(s.ranks_per_node, 8);
  EXPECT_EQ(s.ranks, 32);
  EXPECT_EQ(s.nodes, 4);
  EXPECT_DOUBLE_EQ(s.estimate_s, 3.6e6 / 128);  // the same cores as 128 ranks of one thread
  EXPECT_DOUBLE_EQ(s.mem_per_rank_mib, 500.0);
  // fewer tasks than ranks the nodes hold: the fewest nodes
  const auto few = plan::size_job({1200, 60, 3, 1e6}, {4, 32, 24, 8});
  EXPECT_EQ(few.ranks, 3);
  EXPECT_EQ(few.nodes, 1);
  EXPECT_EQ(few.ranks_per_node, 3);
  const auto spread = plan::size_job({1200, 60, 6, 1e6}, {4, 32, 24, 16});
  EXPECT_EQ(spread.nodes, 3);  // 6 ranks, 2 per node
  EXPECT_EQ(spread.ranks_per_node, 2);
  // one big task: its time on the threads is the floor
  EXPECT_DOUBLE_EQ(plan::size_job({1000, 250, 1, 1e6}, {1, 4, 24, 4}).estimate_s, 250.0);
  EXPECT_EQ(error_key([&] { plan::size_job(w, {1, 4, 24, 8}); }), "--threads");
  EXPECT_EQ(error_key([&] { plan::size_job(w, {1, 4, 24, 0}); }), "--threads");
  EXPECT_EQ(error_key([&] { plan::size_job(w, {1, 4, 24, 4}); }), "");
}

/// Lines of `emitted` that are not lines of `shipped`.
std::vector<std::string> added_lines(const std::string& shipped, const std::string& emitted) {
  std::vector<std::string> out;
  std::istringstream in(emitted);
  for (std::string line; std::getline(in, line);)
    if (!has_line(shipped, line)) out.push_back(line);
  return out;
}

TEST(JobScript, OneThreadPerRankScriptsAreSizedAsBefore) {
  // one thread per rank: the shipped scripts with only their sizing lines changed, no hybrid directive
  const auto s = plan::size_job({3.6e6, 60, 10000, 400.0 * (1 << 20)}, {4, 32, 24});
  ASSERT_EQ(s.threads_per_rank, 1);
  const auto slurm = plan::job_script(Scheduler::slurm, s, names());
  EXPECT_EQ(added_lines(read("jobs/slurm/mpi_job.sh"), slurm),
            (std::vector<std::string>{"# Written by `rcsweep plan --emit slurm` from the shipped script:", "# plan abc",
                                      "# second", "#SBATCH --job-name=mtg grid", "#SBATCH --nodes=4",
                                      "#SBATCH --ntasks-per-node=32", "#SBATCH --mem-per-cpu=500M",
                                      "#SBATCH --time=" + plan::format_walltime(s.walltime_s),
                                      "SWEEP=${1:-${SWEEP:-'/data/my sweep.toml'}}", "OUT=${2:-${OUT:-out.h5}}",
                                      "RCSWEEP=${RCSWEEP:-/opt/rcsweep/bin/rcsweep}"}));
  EXPECT_TRUE(has_line(slurm, "THREADS=${THREADS:-${SLURM_CPUS_PER_TASK:-1}}"));
  EXPECT_EQ(slurm.find("#SBATCH --cpus-per-task"), std::string::npos);
  const auto pbs = plan::job_script(Scheduler::pbs, s, names());
  EXPECT_TRUE(has_line(pbs, "#PBS -l select=4:ncpus=32:mpiprocs=32:mem=16000mb"));
  EXPECT_TRUE(has_line(pbs, "THREADS=${THREADS:-1}"));
  EXPECT_EQ(pbs.find(":ompthreads="), std::string::npos);
  const auto sharded = plan::size_job({3.6e6, 60, 10000, 1e6}, {4, 32, 4});
  ASSERT_GT(sharded.shards, 1);
  const auto array = plan::job_script(Scheduler::slurm, sharded, names());
  EXPECT_TRUE(has_line(array, "#SBATCH --cpus-per-task=1"));
  EXPECT_TRUE(has_line(array, "#SBATCH --mem-per-cpu=256M"));
}

TEST(JobScript, HybridScriptsAskForThreadsPerRank) {
  const WorkEstimate w{3.6e4, 60, 10000, 400.0 * (1 << 20)};
  const auto s = plan::size_job(w, {2, 8, 24, 4});
  ASSERT_EQ(s.ranks_per_node, 2);
  const auto slurm = plan::job_script(Scheduler::slurm, s, names());
  // directives: R ranks per node, N CPUs each, memory per CPU = per rank / N
  EXPECT_NE(slurm.find("\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n#SBATCH --cpus-per-task=4\n"
                       "#SBATCH --mem-per-cpu=125M\n"),
            std::string::npos)
      << slurm;
  EXPECT_TRUE(has_line(slurm, "THREADS=${THREADS:-${SLURM_CPUS_PER_TASK:-4}}"));
  // the run: threads bound to the cores of their rank, rcsweep run --threads
  EXPECT_TRUE(has_line(slurm, "export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1"));
  EXPECT_TRUE(has_line(slurm, "  export OMP_PLACES=cores OMP_PROC_BIND=close"));
  EXPECT_TRUE(has_line(slurm, "  threads=(--threads \"$THREADS\")"));
  // THREADS cores per rank, whichever the launcher (tests/cluster/test_launchers.py runs them)
  EXPECT_TRUE(
      has_line(slurm, "      if (( THREADS > 1 )); then launch+=(--map-by \"slot:PE=$THREADS\" --bind-to core)"));
  EXPECT_TRUE(has_line(slurm, "  if (( THREADS > 1 )); then vars+=(OMP_PLACES OMP_PROC_BIND); fi"));
  EXPECT_TRUE(has_line(
      slurm, "    launch+=(--ntasks=\"$RANKS\" --cpus-per-task=\"$THREADS\" --cpu-bind=cores --kill-on-bad-exit=1)"));
  // the rest: as the one-thread script of the same job
  auto one = s;
  one.threads_per_rank = 1;
  EXPECT_EQ(added_lines(plan::job_script(Scheduler::slurm, one, names()), slurm),
            (std::vector<std::string>{"#SBATCH --cpus-per-task=4", "#SBATCH --mem-per-cpu=125M",
                                      "THREADS=${THREADS:-${SLURM_CPUS_PER_TASK:-4}}"}));

  const auto pbs = plan::job_script(Scheduler::pbs, s, names());
  EXPECT_TRUE(has_line(pbs, "#PBS -l select=2:ncpus=8:mpiprocs=2:ompthreads=4:mem=1000mb"));  // 2 x 500 MiB
  EXPECT_TRUE(has_line(pbs, "THREADS=${THREADS:-4}"));
  EXPECT_EQ(added_lines(plan::job_script(Scheduler::pbs, one, names()), pbs),
            (std::vector<std::string>{"#PBS -l select=2:ncpus=8:mpiprocs=2:ompthreads=4:mem=1000mb",
                                      "THREADS=${THREADS:-4}"}));

  // an array of hybrid shards
  const auto sharded = plan::size_job({3.6e6, 60, 10000, 1e6}, {4, 32, 4, 8});
  ASSERT_GT(sharded.shards, 1);
  const auto array = plan::job_script(Scheduler::slurm, sharded, names());
  EXPECT_TRUE(has_line(array, "#SBATCH --ntasks-per-node=4"));
  EXPECT_TRUE(has_line(array, "#SBATCH --cpus-per-task=8"));
  EXPECT_FALSE(has_line(header(array), "#SBATCH --cpus-per-task=1"));
  EXPECT_TRUE(has_line(array, "#SBATCH --mem-per-cpu=32M"));  // 256 MiB per rank over 8 CPUs
  EXPECT_TRUE(has_line(array, "THREADS=${THREADS:-${SLURM_CPUS_PER_TASK:-8}}"));
  const auto pbs_array = plan::job_script(Scheduler::pbs, sharded, names());
  EXPECT_TRUE(has_line(pbs_array, "#PBS -l select=4:ncpus=32:mpiprocs=4:ompthreads=8:mem=1024mb"));
  EXPECT_TRUE(has_line(pbs_array, "THREADS=${THREADS:-8}"));
}

TEST(JobScript, OverridesFollowTheSweepFileOfTheRunCommandQuoted) {
  auto with = names();
  with.overrides = {"model.T=256", "axes.lambda=[0, 0.5]"};
  for (const auto scheduler : {Scheduler::slurm, Scheduler::pbs})
    for (const int shards : {1, 3}) {
      const auto s = plan::size_job({3.6e6, 60, 10000, 1e6}, {4, 32, shards == 1 ? 24.0 : 4.0});
      ASSERT_EQ(s.shards, shards);
      const auto text = plan::job_script(scheduler, s, with);
      EXPECT_NE(text.find("run \"$SWEEP\" 'model.T=256' 'axes.lambda=[0, 0.5]' -o "), std::string::npos) << text;
      EXPECT_EQ(text.find("run \"$SWEEP\" -o"), std::string::npos);
    }
}

TEST(JobScript, SiteDirectivesOnlyWhenAsked) {
  const auto s = plan::size_job({3.6e6, 60, 10000, 1e6}, {4, 32, 24});
  const auto sharded = plan::size_job({3.6e6, 60, 10000, 1e6}, {4, 32, 4});
  ASSERT_GT(sharded.shards, 1);
  // none asked: no account, partition, qos, and no --exclusive (the shipped mpi_job.sh has one for
  // use by hand)
  EXPECT_TRUE(has_line(read("jobs/slurm/mpi_job.sh"), "#SBATCH --exclusive"));
  for (const auto& sizing : {s, sharded}) {
    const auto slurm = plan::job_script(Scheduler::slurm, sizing, names());
    for (const char* option : {"--exclusive", "--account", "--partition", "--qos"})
      EXPECT_EQ(slurm.find(std::string("#SBATCH ") + option), std::string::npos) << option;
    const auto pbs = plan::job_script(Scheduler::pbs, sizing, names());
    for (const char* option : {"-A ", "-q ", "-l place="})
      EXPECT_EQ(pbs.find(std::string("#PBS ") + option), std::string::npos) << option;
  }

  auto with = names();
  with.site = {"proj42", "compute", "normal", {"--constraint=zen4", "--mail-type=END"}, true, "", "", ""};
  for (const auto& sizing : {s, sharded}) {
    const auto slurm = plan::job_script(Scheduler::slurm, sizing, with);
    // after the template's last directive, in this order; the rest as without them
    EXPECT_NE(
        slurm.find("#SBATCH --output=rcsweep-%" + std::string(sizing.shards > 1 ? "A_%a" : "j") +
                   ".out\n#SBATCH --account=proj42\n#SBATCH --partition=compute\n#SBATCH --qos=normal\n"
                   "#SBATCH --exclusive\n#SBATCH --constraint=zen4\n#SBATCH --mail-type=END\nset -euo pipefail\n"),
        std::string::npos)
        << slurm;
    // an array's merge job gets the same lines but --exclusive
    EXPECT_EQ(added_lines(plan::job_script(Scheduler::slurm, sizing, names()), slurm).size(),
              sizing.shards > 1 ? 11u : 6u);
  }
  with.site.qos.clear();
  with.site.directives = {"-l place=scatter", "-m ae"};
  const auto pbs = plan::job_script(Scheduler::pbs, s, with);
  EXPECT_NE(pbs.find("#PBS -V\n#PBS -A proj42\n#PBS -q compute\n#PBS -l place=excl\n#PBS -l place=scatter\n"
                     "#PBS -m ae\nset -euo pipefail\n"),
            std::string::npos)
      << pbs;
}

TEST(JobScript, BadSiteValuesNameTheOption) {
  const auto s = plan::size_job({100, 1, 10, 1e6}, {1, 8, 24});
  const auto key = [&](Scheduler scheduler, plan::SiteOptions site) {
    auto with = names();
    with.site = std::move(site);
    return error_key([&] { plan::job_script(scheduler, s, with); });
  };
  EXPECT_EQ(key(Scheduler::slurm, {"a\nb", "", "", {}, false, "", "", ""}), "--account");
  EXPECT_EQ(key(Scheduler::slurm, {"#proj", "", "", {}, false, "", "", ""}), "--account");
  EXPECT_EQ(key(Scheduler::pbs, {"", "two words", "", {}, false, "", "", ""}), "--partition");
  EXPECT_EQ(key(Scheduler::slurm, {"", "", "hi\r", {}, false, "", "", ""}), "--qos");
  EXPECT_EQ(key(Scheduler::pbs, {"", "", "normal", {}, false, "", "", ""}), "--qos");  // PBS has no qos
  EXPECT_EQ(key(Scheduler::slurm, {"", "", "", {"--mem=1G", "#SBATCH --x"}, false, "", "", ""}), "--directive");
  EXPECT_EQ(key(Scheduler::slurm, {"", "", "", {" # x"}, false, "", "", ""}), "--directive");
  EXPECT_EQ(key(Scheduler::pbs, {"", "", "", {"-l a\n#PBS -l b"}, false, "", "", ""}), "--directive");
  EXPECT_EQ(key(Scheduler::slurm, {"", "", "", {"  "}, false, "", "", ""}), "--directive");
  EXPECT_EQ(key(Scheduler::slurm, {"p", "q", "r", {"--x y"}, true, "", "", ""}), "");
  EXPECT_EQ(key(Scheduler::pbs, {"p", "q", "", {"-l x=y"}, true, "", "", ""}), "");
  // every bad value is named
  try {
    plan::check_site(Scheduler::pbs, {"#a", "b\n", "q", {}, false, "", "", ""});
    ADD_FAILURE() << "not refused";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.issues().size(), 3u) << e.what();
  }
}

TEST(JobScript, LauncherSettingsAreTheScriptsDefaults) {
  const auto s = plan::size_job({100, 1, 10, 1e6}, {1, 8, 24});
  const auto sharded = plan::size_job({3.6e6, 60, 10000, 1e6}, {4, 32, 4});
  ASSERT_GT(sharded.shards, 1);
  for (const auto& sizing : {s, sharded}) {
    // none asked: the shipped defaults, detected when the job runs
    const auto slurm = plan::job_script(Scheduler::slurm, sizing, names());
    EXPECT_TRUE(has_line(slurm, "LAUNCHER=${LAUNCHER:-mpiexec}"));
    EXPECT_TRUE(has_line(slurm, "MPI_FLAVOUR=${MPI_FLAVOUR:-auto}"));
    EXPECT_TRUE(has_line(slurm, "SRUN_MPI=${SRUN_MPI:-auto}"));
    EXPECT_TRUE(has_line(plan::job_script(Scheduler::pbs, sizing, names()), "MPI_FLAVOUR=${MPI_FLAVOUR:-auto}"));
    for (const char* flavour : {"openmpi", "mpich", "intel", "auto"}) {
      auto with = names();
      with.site.mpi = flavour;
      for (const auto scheduler : {Scheduler::slurm, Scheduler::pbs}) {
        const auto text = plan::job_script(scheduler, sizing, with);
        EXPECT_TRUE(has_line(text, std::string("MPI_FLAVOUR=${MPI_FLAVOUR:-") + flavour + "}")) << flavour;
        // only that line differs from the script with none asked
        const auto added = added_lines(plan::job_script(scheduler, sizing, names()), text);
        EXPECT_EQ(added.size(), std::string(flavour) == "auto" ? 0u : 1u) << flavour;
      }
    }
    for (const char* plugin : {"pmix", "pmi2", "pmix_v4", "default", "none"}) {
      auto with = names();
      with.site.launcher = "srun";
      with.site.srun_mpi = plugin;
      const auto text = plan::job_script(Scheduler::slurm, sizing, with);
      EXPECT_EQ(added_lines(plan::job_script(Scheduler::slurm, sizing, names()), text),
                (std::vector<std::string>{"LAUNCHER=${LAUNCHER:-srun}",
                                          std::string("SRUN_MPI=${SRUN_MPI:-") + plugin + "}"}));
    }
  }
  // what the scripts do not know, and what PBS has not, is refused naming the option
  const auto key = [&](Scheduler scheduler, std::string launcher, std::string mpi, std::string srun_mpi) {
    auto with = names();
    with.site.launcher = std::move(launcher);
    with.site.mpi = std::move(mpi);
    with.site.srun_mpi = std::move(srun_mpi);
    return error_key([&] { plan::job_script(scheduler, s, with); });
  };
  EXPECT_EQ(key(Scheduler::slurm, "mpirun", "", ""), "--launcher");
  EXPECT_EQ(key(Scheduler::pbs, "srun", "", ""), "--launcher");
  EXPECT_EQ(key(Scheduler::pbs, "mpiexec", "", ""), "");
  EXPECT_EQ(key(Scheduler::slurm, "", "OpenMPI", ""), "--mpi");
  EXPECT_EQ(key(Scheduler::pbs, "", "mvapich", ""), "--mpi");
  EXPECT_EQ(key(Scheduler::slurm, "", "", "pmix;rm"), "--srun-mpi");
  EXPECT_EQ(key(Scheduler::slurm, "", "", "pmi 2"), "--srun-mpi");
  EXPECT_EQ(key(Scheduler::pbs, "", "", "pmix"), "--srun-mpi");
  EXPECT_EQ(key(Scheduler::slurm, "srun", "intel", "pmi2"), "");
}

/// The text between "cat <<'RCSWEEP_MERGE_JOB'" and its end line ("" if none).
std::string embedded_merge(const std::string& text) {
  const std::string begin = "  cat <<'RCSWEEP_MERGE_JOB'\n", end = "\nRCSWEEP_MERGE_JOB\n";
  const std::size_t at = text.find(begin);
  if (at == std::string::npos) return "";
  const std::size_t stop = text.find(end, at);
  return stop == std::string::npos ? "" : text.substr(at + begin.size(), stop + 1 - at - begin.size());
}

TEST(JobScript, ArrayScriptsCarryTheMergeTheirFirstElementSubmits) {
  const auto sharded = plan::size_job({3.6e6, 60, 10000, 1e6}, {4, 32, 4});
  ASSERT_GT(sharded.shards, 1);
  auto with = names();
  with.site = {"proj42", "compute", "", {"--constraint=zen4"}, true, "", "", ""};
  with.setup = "/site/env.sh";
  for (const auto scheduler : {Scheduler::slurm, Scheduler::pbs}) {
    const bool slurm = scheduler == Scheduler::slurm;
    const auto text = plan::job_script(scheduler, sharded, with);
    EXPECT_TRUE(has_line(text, "MERGE_JOB=${MERGE_JOB:-built-in}"));
    EXPECT_FALSE(has_line(text, "MERGE_JOB=${MERGE_JOB:-none}"));
    EXPECT_TRUE(has_line(text, "if [[ $MERGE_JOB != none ]]; then submit_merge; fi"));
    // the merge job, embedded whole: the shipped merge_job.sh with the array's defaults and site lines
    const auto merge = embedded_merge(text);
    EXPECT_EQ(merge, plan::merge_script(scheduler, with));
    EXPECT_TRUE(merge.starts_with("#!/bin/bash\n# Written by `rcsweep plan --emit")) << merge;
    EXPECT_TRUE(has_line(merge, slurm ? "#SBATCH --job-name=mtg grid-merge" : "#PBS -N mtggrid-merge"));
    EXPECT_TRUE(has_line(merge, "SWEEP=${1:-${SWEEP:-'/data/my sweep.toml'}}"));
    EXPECT_TRUE(has_line(merge, "OUT=${2:-${OUT:-out.h5}}"));
    EXPECT_TRUE(has_line(merge, "RCSWEEP=${RCSWEEP:-/opt/rcsweep/bin/rcsweep}"));
    EXPECT_TRUE(has_line(merge, "RCSWEEP_SETUP=${RCSWEEP_SETUP:-/site/env.sh}"));
    EXPECT_TRUE(has_line(merge, slurm ? "#SBATCH --account=proj42" : "#PBS -A proj42"));
    EXPECT_TRUE(has_line(merge, slurm ? "#SBATCH --constraint=zen4" : "#PBS --constraint=zen4"));
    EXPECT_FALSE(has_line(merge, slurm ? "#SBATCH --exclusive" : "#PBS -l place=excl"));  // one process
    EXPECT_TRUE(has_line(text, slurm ? "#SBATCH --exclusive" : "#PBS -l place=excl"));    // the array's own
    expect_rest_unchanged(read(slurm ? "jobs/slurm/merge_job.sh" : "jobs/pbs/merge_job.sh"), merge,
                          {slurm ? "#SBATCH --job-name=" : "#PBS -N ", "SWEEP=", "OUT=", "RCSWEEP=", "RCSWEEP_SETUP="});
    // the array's scheduler lines come before the embedded merge's
    EXPECT_LT(text.find(slurm ? "#SBATCH --account=proj42" : "#PBS -A proj42"), text.find("set -euo pipefail"));
    // one MPI job: no merge
    const auto one = plan::job_script(scheduler, plan::size_job({100, 1, 10, 1e6}, {1, 8, 24}), with);
    EXPECT_EQ(one.find("MERGE_JOB"), std::string::npos);
    EXPECT_EQ(embedded_merge(one), "");
  }
}

TEST(JobScript, SetupFileIsTheDefaultOfRcsweepSetup) {
  const auto s = plan::size_job({100, 1, 10, 1e6}, {1, 8, 24});
  for (const auto scheduler : {Scheduler::slurm, Scheduler::pbs}) {
    EXPECT_TRUE(has_line(plan::job_script(scheduler, s, names()), "RCSWEEP_SETUP=${RCSWEEP_SETUP:-}"));
    auto with = names();
    with.setup = "/site/rcsweep env.sh";
    const auto text = plan::job_script(scheduler, s, with);
    EXPECT_TRUE(has_line(text, "RCSWEEP_SETUP=${RCSWEEP_SETUP:-'/site/rcsweep env.sh'}")) << text;
    // sourced before the settings are read
    EXPECT_LT(text.find("  source \"$RCSWEEP_SETUP\""), text.find("\nSWEEP=${1:-"));
  }
}

TEST(JobScript, PathsComputeNodesMayNotSee) {
  auto n = names();  // /data/my sweep.toml, out.h5 (relative), /opt/rcsweep/bin/rcsweep
  EXPECT_TRUE(plan::unshared_paths(n, 4, "/home/me").empty());
  n.sweep_file = "/tmp/s.toml";
  n.output = "/dev/shm/o.h5";
  n.rcsweep = "/home/me/bin/rcsweep";
  n.setup = "/run/user/1/env.sh";
  EXPECT_EQ(
      plan::unshared_paths(n, 1, "/home/me"),
      (std::vector<std::string>{"sweep file /tmp/s.toml", "output /dev/shm/o.h5", "setup file /run/user/1/env.sh"}));
  EXPECT_EQ(plan::unshared_paths(n, 2, "/home/me/").size(), 4u);  // home: only when several nodes
  n = names();
  n.sweep_file = "/tmpdata/s.toml";  // a prefix of the name is not the directory
  n.rcsweep = "/home/meself/rcsweep";
  EXPECT_TRUE(plan::unshared_paths(n, 2, "/home/me").empty());
  EXPECT_TRUE(plan::unshared_paths(n, 2, "/").empty());  // HOME=/ is everything: no warning
}

TEST(JobScript, PbsNamesStartWithALetter) {
  const auto text = plan::job_script(Scheduler::pbs, plan::size_job({100, 1, 10, 1e6}, {1, 8, 24}),
                                     {"s.toml", "o.h5", "2025 grid of everything", "rcsweep", "", {}, {}, ""});
  EXPECT_TRUE(has_line(text, "#PBS -N r2025gridofever"));
}

TEST(JobScript, ATemplateThatLostALineIsABug) {
  const auto s = plan::size_job({100, 1, 10, 1e6}, {1, 8, 24});
  EXPECT_THROW(plan::fill_job_template("#!/bin/bash\necho hi\n", Scheduler::slurm, false, s, names()),
               std::logic_error);
}

TEST(JobScript, AShortJobStopsAndIsSignalledWithinItsLead) {
  const auto s = plan::size_job({0.1, 0.01, 72, 1e6}, {1, 2, 0.085});
  const auto slurm = plan::job_script(Scheduler::slurm, s, names());
  EXPECT_TRUE(has_line(slurm, "#SBATCH --time=00:02:00"));
  EXPECT_TRUE(has_line(slurm, "#SBATCH --signal=B:USR1@24"));
  EXPECT_TRUE(has_line(slurm, "STOP_BEFORE=${STOP_BEFORE:-24}"));
  EXPECT_TRUE(has_line(slurm, "GRACE=${GRACE:-12}"));  // at most half the stop lead
  // the header's notes say so too: no 120 s left
  EXPECT_EQ(slurm.find("120"), std::string::npos);
  EXPECT_NE(slurm.find("(rcsweep --time-limit)  default: 24\n"), std::string::npos);
  EXPECT_NE(slurm.find("walltime warning   default: 12\n"), std::string::npos);
  const auto array = plan::job_script(Scheduler::slurm, plan::size_job({0.1, 0.01, 72, 1e6}, {1, 2, 0.085, 1, 3}),
                                      names());
  EXPECT_TRUE(has_line(array, "#SBATCH --signal=B:USR1@24"));
  EXPECT_EQ(header(array).find("120"), std::string::npos);
  const auto pbs = plan::job_script(Scheduler::pbs, s, names());
  EXPECT_TRUE(has_line(pbs, "STOP_BEFORE=${STOP_BEFORE:-24}"));
  EXPECT_TRUE(has_line(pbs, "GRACE=${GRACE:-8}"));  // the shipped one, already shorter
  EXPECT_NE(pbs.find("(rcsweep --time-limit)  default: 24\n"), std::string::npos);
  // a long job keeps the shipped scripts' leads
  const auto long_job = plan::job_script(Scheduler::slurm, plan::size_job({3.6e6, 60, 10000, 1e6}, {4, 32, 24}),
                                         names());
  EXPECT_TRUE(has_line(long_job, "#SBATCH --signal=B:USR1@120"));
  EXPECT_TRUE(has_line(long_job, "STOP_BEFORE=${STOP_BEFORE:-120}"));
  EXPECT_TRUE(has_line(long_job, "GRACE=${GRACE:-60}"));
}

}  // namespace
}  // namespace rcsweep
