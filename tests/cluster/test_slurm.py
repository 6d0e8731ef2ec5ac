"""The shipped Slurm job scripts (jobs/slurm/), submitted unchanged with sbatch to a real one-node
Slurm started by the test (conftest.Slurm): every result store is compared bitwise with a direct
run of the same sweep."""
import re
import subprocess

import pytest

from conftest import DATA, JOBS, assert_same_results, e2e

SLURM_JOBS = JOBS / "slurm"


def physical_cores():
    out = subprocess.run(["lscpu", "-p=CORE,SOCKET"], capture_output=True, text=True, check=True).stdout
    return len({line for line in out.splitlines() if not line.startswith("#")})


def store_ranks(path):
    info = e2e.rcsweep("info", path, check=0).stdout
    return int(re.search(r"(\d+) MPI ranks", info).group(1))


def job_log(slurm, pattern):
    files = sorted((slurm.root / "work").glob(pattern))
    assert files, f"no job output {pattern}\n{slurm.logs()}"
    return "\n".join(f.read_text() for f in files)


def assert_completed(slurm, record, log):
    assert record["JobState"] == "COMPLETED" and record["ExitCode"] == "0:0", \
        f"job {record['JobId']}: {record['JobState']} {record['ExitCode']}\n{log}\n{slurm.logs()}"


def test_mpi_job_one_rank_per_core_with_mpiexec_and_srun(slurm, reference):
    work = slurm.root / "work"
    jobs = {}
    for launcher in ("mpiexec", "srun"):
        jobs[launcher] = slurm.sbatch("-t", "5", f"--output=mpi-{launcher}-%j.out", SLURM_JOBS / "mpi_job.sh",
                                      DATA / "small.toml", work / f"mpi-{launcher}.h5",
                                      env={**slurm.env, "LAUNCHER": launcher})
    for launcher, jid in jobs.items():
        (record,) = slurm.wait(jid)
        log = job_log(slurm, f"mpi-{launcher}-{jid}.out")
        assert_completed(slurm, record, log)
        assert f"RANKS={physical_cores()} NODES=1 LAUNCHER={launcher}" in log  # the printed settings
        # what the job found: Debian's Open MPI, and Slurm's pmix plugin (srun --mpi=list)
        assert re.search(r"launcher: \S*mpiexec, MPI openmpi \(MPI_FLAVOUR=auto\): \S*mpiexec -n \d+ --map-by core "
                         if launcher == "mpiexec" else
                         r"launcher: srun, MPI plugin pmix \(SRUN_MPI=auto\): srun --mpi=pmix ", log), log
        assert "rcsweep exit code 0" in log
        assert store_ranks(work / f"mpi-{launcher}.h5") == physical_cores()
        assert_same_results(work / f"mpi-{launcher}.h5", reference("small"))


def test_hybrid_job_ranks_with_two_threads_each(slurm, reference):
    """The script `rcsweep plan --emit slurm --threads 2` writes for this machine: one rank per two
    cores, each with two OpenMP threads (--ntasks-per-node, --cpus-per-task=2, mpiexec --map-by
    slot:PE=2, rcsweep run --threads 2), gives bitwise the store of two ranks of one thread."""
    if slurm.cpus < 2:
        pytest.skip("one CPU: no room for two threads")
    work = slurm.root / "work" / "hybrid"
    work.mkdir()
    ranks = slurm.cpus // 2
    plan = e2e.rcsweep("plan", DATA / "small.toml", "--emit", "slurm", "--cores", slurm.cpus, "--threads", 2, check=0)
    assert f"#SBATCH --ntasks-per-node={ranks}\n#SBATCH --cpus-per-task=2\n" in plan.stdout, plan.stdout
    script = work / "job.sh"
    script.write_text(plan.stdout)
    jid = slurm.sbatch(script, cwd=work)
    (record,) = slurm.wait(jid)
    log = (work / f"rcsweep-{jid}.out").read_text()
    assert_completed(slurm, record, log)
    assert (record["NumTasks"], record["NumCPUs"]) == (str(ranks), str(2 * ranks)), record
    assert f"RANKS={ranks} NODES=1 LAUNCHER=mpiexec THREADS=2" in log and "rcsweep exit code 0" in log, log
    assert "warning" not in log, log  # each rank has its two cores
    info = e2e.rcsweep("info", work / "cluster-small.h5", check=0).stdout
    assert f"last run {ranks} MPI ranks x 2 threads" in info, info
    assert_same_results(work / "cluster-small.h5", reference("small"))


def test_array_job_with_dependent_merge(slurm, reference):
    work = slurm.root / "work"
    out = work / "array.h5"
    proc = slurm.run("bash", SLURM_JOBS / "submit_array.sh", DATA / "small.toml", out, "3",
                     env={**slurm.env, "ARRAY_SBATCH": "-t 5", "MERGE_SBATCH": "-t 5"})
    array, merge = re.search(r"array job (\d+) \(3 shards\), merge job (\d+)", proc.stdout).groups()
    records = slurm.wait(array, merge)
    log = job_log(slurm, f"rcsweep-{array}_*.out") + job_log(slurm, f"rcsweep-merge-{merge}.out")
    elements = [r for r in records if r.get("ArrayJobId") == array]
    assert sorted(r["ArrayTaskId"] for r in elements) == ["0", "1", "2"], log
    for r in records:
        assert_completed(slurm, r, log)
    (merge_record,) = [r for r in records if r["JobId"] == merge]
    assert merge_record["Dependency"] in ("(null)", "")  # satisfied
    assert all(merge_record["StartTime"] >= r["EndTime"] for r in elements), "merge ran before a shard finished"
    for i in range(3):
        assert f"SHARD={i}/3 -> {work / 'array.shards'}/shard-{i}-of-3.h5" in log
        assert (work / "array.shards" / f"shard-{i}-of-3.h5").exists()
    assert "merged 3 shards" in log
    assert_same_results(out, reference("small"))


def test_walltime_signal_stops_the_job_and_requeue_resumes_it(slurm, sweep, reference):
    """A one-minute time limit on the long sweep (conftest.sweep: about 20 s on two cores here): the
    script's time limit (STOP_BEFORE s before the end) or Slurm's warning signal (--signal=B:USR1@20:
    slurmctld checks every 30 s and signals when the end is less than 20 + 30 s away, so 10 to 40 s
    into the run) stops rcsweep cleanly (exit 4), the job requeues itself and the next run resumes
    the store, until the sweep is done. Which of the two comes first varies; the log says. The
    script's limit is 30 % of the time a direct run of the sweep took (5 to 10 s): the first run
    is stopped on any machine speed, even if it runs three times faster than the direct one."""
    work = slurm.root / "work"
    out = work / "long.h5"
    reference("long")  # timed: the direct run on two cores
    limit = min(10, max(5, round(0.3 * reference.seconds["long"])))
    stop_before = 60 - limit
    jid = slurm.sbatch("-t", "1", "--signal=B:USR1@20", "--output=long-%j.out", SLURM_JOBS / "mpi_job.sh",
                       sweep("long"), out, env={**slurm.env, "GRACE": "5", "STOP_BEFORE": str(stop_before)})
    (record,) = slurm.wait(jid, timeout=900)
    log = job_log(slurm, f"long-{jid}.out")
    assert_completed(slurm, record, log)
    assert int(record["Restarts"]) >= 1, log
    runs = re.findall(r"rcsweep exit code (\d+)", log)
    assert set(runs[:-1]) <= {"4", "138"} and runs[-1] == "0", log
    assert len(runs) == int(record["Restarts"]) + 1, log
    limits = [int(x) for x in re.findall(r"job ends \S+: rcsweep --time-limit (\d+)s", log)]
    assert len(limits) == len(runs) and all(max(1, limit - 10) <= x <= limit for x in limits), (limit, log)  # 60 s less STOP_BEFORE
    stops = re.findall(r"\[rcsweep\] (stopped by SIGUSR1|time limit of [\d.]+ s reached): \d+ tasks left", log)
    killed = re.findall(r"rcsweep exit code 138", log)  # the warning came before rcsweep could catch it
    assert len(stops) + len(killed) == len(runs) - 1, log  # rcsweep's own words, once per stop
    assert_same_results(out, reference("long"))
