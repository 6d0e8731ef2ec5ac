"""The shipped PBS job scripts (jobs/pbs/), run under bash with the environment and node file a PBS
Pro / OpenPBS server would give them (no PBS server is packaged for Debian), with stub qstat, qsub
and qrerun on PATH that record how they were called: every result store is compared bitwise with a
direct run of the same sweep."""
import os
import re
import signal
import socket
import subprocess

from pathlib import Path

import pytest

from conftest import BIN, DATA, JOBS, assert_same_results, e2e, job_env

PBS_JOBS = JOBS / "pbs"

STUBS = {
    # qstat -f JOBID: the fields the scripts read, from the test's STUB_* variables
    "qstat": """echo "qstat $*" >> "$STUB_LOG"
echo "Job Id: $2"
echo "    Job_Name = rcsweep"
echo "    resources_used.walltime = ${STUB_USED:-00:00:01}"
echo "    Resource_List.walltime = ${STUB_WALLTIME:-01:00:00}"
echo "    run_count = ${STUB_RUN_COUNT:-1}"
""",
    "qrerun": 'echo "qrerun $*" >> "$STUB_LOG"\nexit "${STUB_QRERUN_RC:-0}"\n',
    # qsub: an array id for -J, a plain one otherwise; a script on stdin (no file named) is kept
    "qsub": """echo "qsub $*" >> "$STUB_LOG"
case "${!#}" in *.sh) ;; *) cat > "$STUB_LOG.stdin.sh" ;; esac
case " $* " in *" -J "*) echo "4242[].pbs01" ;; *) echo "4243.pbs01" ;; esac
""",
}


@pytest.fixture
def pbs(tmp_path):
    """pbs(script, *args, ranks=, **env) runs a job script as PBS would (returns the process); the
    stubs' calls are in pbs.calls()."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name, body in STUBS.items():
        (stubs / name).write_text("#!/bin/bash\n" + body)
        (stubs / name).chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "stub.log"
    log.touch()

    def env_for(ranks, **extra):
        nodefile = tmp_path / f"nodefile{ranks}"
        nodefile.write_text(f"{socket.gethostname()}\n" * ranks)  # one line per mpiproc, as PBS writes it
        env = job_env(PBS_O_WORKDIR=work, PBS_NODEFILE=nodefile, PBS_JOBID="4243.pbs01", PBS_JOBNAME="rcsweep",
                      PBS_ENVIRONMENT="PBS_BATCH", PBS_QUEUE="workq", PBS_O_HOST=socket.gethostname(),
                      STUB_LOG=log)
        env["PATH"] = f"{stubs}:{env['PATH']}"
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def run(script, *args, ranks=2, background=False, **extra):
        cmd = ["bash", str(PBS_JOBS / script), *map(str, args)]
        if background:
            return subprocess.Popen(cmd, cwd="/", env=env_for(ranks, **extra), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
        return subprocess.run(cmd, cwd="/", env=env_for(ranks, **extra), capture_output=True, text=True,
                              timeout=900)

    run.work = work
    run.calls = lambda: log.read_text().splitlines()
    run.stdin_script = lambda: Path(f"{log}.stdin.sh")
    return run


def store_ranks(path):
    info = e2e.rcsweep("info", path, check=0).stdout
    return int(re.search(r"(\d+) MPI ranks", info).group(1))


def test_pbs_mpi_job_uses_the_node_file(pbs, reference):
    out = pbs.work / "mpi.h5"
    proc = pbs("mpi_job.sh", ranks=2, SWEEP=DATA / "small.toml", OUT="mpi.h5")  # relative: from PBS_O_WORKDIR
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert "RANKS=2 NODES=1" in log and "rcsweep exit code 0" in log
    assert re.search(r"walltime 01:00:00, used 00:00:01: rcsweep --time-limit 3479s", log), log  # 3600 - 1 - 120
    assert pbs.calls() == ["qstat -f 4243.pbs01"]  # nothing rerun
    assert store_ranks(out) == 2
    assert_same_results(out, reference("small"))


def test_pbs_array_job_and_dependent_merge(pbs, reference):
    proc = pbs("submit_array.sh", DATA / "small.toml", "array.h5", "3")
    assert proc.returncode == 0, proc.stderr
    qsub = [c for c in pbs.calls() if c.startswith("qsub")]
    vars_ = f"SWEEP={DATA / 'small.toml'},OUT=array.h5,SHARDS=3"
    assert qsub == [f"qsub -J 0-2 -v {vars_} {PBS_JOBS / 'array_job.sh'}",
                    f"qsub -W depend=afterok:4242[].pbs01 -v {vars_} {PBS_JOBS / 'merge_job.sh'}"]
    assert "array job 4242[].pbs01 (3 shards), merge job 4243.pbs01" in proc.stdout
    # PBS runs the subjobs (in any order, single-process: one line in the node file), then the merge
    for i in (2, 0, 1):
        sub = pbs("array_job.sh", ranks=1, SWEEP=DATA / "small.toml", OUT="array.h5", SHARDS=3, PBS_ARRAY_INDEX=i,
                  PBS_JOBID=f"4242[{i}].pbs01", PBS_ARRAY_ID="4242[].pbs01")
        assert sub.returncode == 0, sub.stdout + sub.stderr
        assert f"SHARD={i}/3 -> array.shards/shard-{i}-of-3.h5 RANKS=1" in sub.stdout
    merge = pbs("merge_job.sh", SWEEP=DATA / "small.toml", OUT="array.h5")  # SHARDS from the file names
    assert merge.returncode == 0, merge.stdout + merge.stderr
    assert "SHARDS=3 SHARD_DIR=array.shards" in merge.stdout and "merged 3 shards" in merge.stderr
    assert_same_results(pbs.work / "array.h5", reference("small"))


def test_emitted_pbs_array_submits_its_merge_from_the_first_subjob(pbs, reference, tmp_path):
    """The array script `rcsweep plan --emit pbs` writes for a sweep longer than --hours: the first
    subjob to start submits the merge job written into the script (qsub -W depend=afterok:ARRAY,
    the script on stdin), the others do not; that merge gives the direct run's store. (big.toml sizes
    the array; the subjobs run small.toml, named on their command line as a user may.)"""
    plan = subprocess.run([BIN, "plan", str(DATA / "big.toml"), "--emit", "pbs", "--cores", "1", "--hours", "1"],
                          capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    shards = int(re.search(r"^#PBS -J 0-(\d+)$", plan.stdout, re.M).group(1)) + 1
    assert shards >= 2
    script = tmp_path / "job.sh"
    script.write_text(plan.stdout)
    for i in reversed(range(shards)):  # in any order; each sees the mark of the first
        sub = pbs(script, DATA / "small.toml", "emitted.h5", ranks=1, PBS_ARRAY_INDEX=i, PBS_JOBID=f"4242[{i}].pbs01",
                  PBS_ARRAY_ID="4242[].pbs01")
        assert sub.returncode == 0, sub.stdout + sub.stderr
        assert ("submitted the merge job 4243.pbs01" in sub.stdout) == (i == shards - 1), sub.stdout
    qsub = [c for c in pbs.calls() if c.startswith("qsub")]
    assert qsub == [f"qsub -W depend=afterok:4242[].pbs01 -v SWEEP={DATA / 'small.toml'},OUT=emitted.h5,"
                    f"SHARDS={shards},SHARD_DIR=emitted.shards,RCSWEEP={BIN}"], qsub
    merge_script = pbs.stdin_script().read_text()
    assert merge_script.startswith("#!/bin/bash\n# Written by `rcsweep plan --emit pbs` into the array job")
    merge = pbs(pbs.stdin_script(), SWEEP=DATA / "small.toml", OUT="emitted.h5", SHARDS=shards,
                SHARD_DIR="emitted.shards")  # what qsub -v passes
    assert merge.returncode == 0, merge.stdout + merge.stderr
    assert f"merged {shards} shards" in merge.stderr
    assert_same_results(pbs.work / "emitted.h5", reference("small"))


def test_pbs_merge_refuses_a_missing_shard(pbs):
    for i in (0, 2):
        sub = pbs("array_job.sh", ranks=1, SWEEP=DATA / "small.toml", OUT="gap.h5", SHARDS=3, PBS_ARRAY_INDEX=i)
        assert sub.returncode == 0, sub.stdout + sub.stderr
    merge = pbs("merge_job.sh", SWEEP=DATA / "small.toml", OUT="gap.h5", SHARDS=3)
    assert merge.returncode == 2, merge.stdout + merge.stderr
    assert "shard-1-of-3.h5" in merge.stderr and not (pbs.work / "gap.h5").exists()


def test_pbs_walltime_and_sigterm_stop_cleanly_and_qrerun_resumes(pbs, sweep, reference):
    """Run 1: 7 s of walltime left less STOP_BEFORE = 5 s: rcsweep's time limit stops it (exit 4),
    the job asks for qrerun. Run 2: PBS's SIGTERM (what it sends at the walltime), once rank 0
    reports tasks done, is forwarded as SIGUSR1: clean stop, qrerun. Run 3 (run_count 3) finishes
    the store: equal to a direct run. The long sweep takes about 20 s on two cores here
    (conftest.sweep)."""
    sweep = sweep("long")
    first = pbs("mpi_job.sh", SWEEP=sweep, OUT="long.h5", STOP_BEFORE=5, STUB_WALLTIME="00:00:08",
                STUB_USED="00:00:01", GRACE=2)
    log = first.stdout + first.stderr
    assert first.returncode == 0, log
    assert "rcsweep --time-limit 2s" in log and "rcsweep exit code 4" in log, log
    assert re.search(r"\[rcsweep\] time limit of [\d.]+ s reached: \d+ tasks left", log), log
    assert pbs.calls()[-1] == "qrerun 4243.pbs01"

    second = pbs("mpi_job.sh", SWEEP=sweep, OUT="long.h5", STUB_RUN_COUNT=2, GRACE=2, background=True,
                 RCSWEEP_PROGRESS_INTERVAL=0.1)
    head = []
    for line in second.stdout:  # rcsweep's stop handlers are in place before it resumes: wait for tasks done
        head.append(line)
        m = re.match(r"\[rcsweep\] (\d+)/\d+ tasks", line)
        if m and int(m.group(1)) >= 1:
            break
    second.send_signal(signal.SIGTERM)
    log = "".join(head) + second.communicate(timeout=300)[0]
    assert second.returncode == 0, log
    assert "run 2" in log and "SIGTERM: asking rcsweep to stop" in log and "[rcsweep] stopped by SIGUSR1" in log, log
    assert pbs.calls()[-1] == "qrerun 4243.pbs01"
    assert pbs.calls().count("qrerun 4243.pbs01") == 2

    last = pbs("mpi_job.sh", SWEEP=sweep, OUT="long.h5", STUB_RUN_COUNT=3)
    log = last.stdout + last.stderr
    assert last.returncode == 0 and "run 3" in log and "rcsweep exit code 0" in log, log
    assert pbs.calls().count("qrerun 4243.pbs01") == 2
    assert_same_results(pbs.work / "long.h5", reference("long"))


def test_pbs_without_qrerun_rights_exits_4_and_says_so(pbs, sweep):
    proc = pbs("mpi_job.sh", SWEEP=sweep("long"), OUT="norerun.h5", STOP_BEFORE=5, STUB_WALLTIME="00:00:07",
               STUB_QRERUN_RC=1)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "qrerun refused" in proc.stderr and "submit the same job again" in proc.stderr


def test_pbs_scripts_refuse_a_missing_node_file_and_bad_settings(pbs):
    env_missing = pbs("mpi_job.sh", SWEEP=DATA / "small.toml", PBS_NODEFILE="/nonexistent")
    assert env_missing.returncode == 2 and "PBS_NODEFILE" in env_missing.stderr
    no_index = pbs("array_job.sh", ranks=1, SWEEP=DATA / "small.toml")
    assert no_index.returncode == 2 and "PBS_ARRAY_INDEX" in no_index.stderr
    too_big = pbs("array_job.sh", ranks=1, SWEEP=DATA / "small.toml", SHARDS=2, PBS_ARRAY_INDEX=2)
    assert too_big.returncode == 2 and "SHARDS=2" in too_big.stderr
    one = pbs("submit_array.sh", DATA / "small.toml", "x.h5", "1")
    assert one.returncode == 2 and "SHARDS=1" in one.stderr


@pytest.mark.parametrize("script", sorted(str(p.relative_to(JOBS)) for p in JOBS.glob("*/*.sh")))
def test_every_script_prints_its_header_on_help(script):
    proc = subprocess.run(["bash", str(JOBS / script), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"jobs/{script}: "), lines[0]  # the title line, without its '#'
    assert "Settings:" in proc.stdout and "SWEEP" in proc.stdout
    assert not any(line.startswith(("#SBATCH", "#PBS", "SBATCH --", "PBS -", "#!")) for line in lines)
