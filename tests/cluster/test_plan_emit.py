"""rcsweep plan --emit slurm|pbs: the emitted job scripts are valid bash, sized from the cost model
(an array of shards when the sweep does not fit --hours), refuse bad options naming them (exit 2),
and the Slurm one is accepted and run by the test Slurm (conftest.Slurm), giving the direct run's
store."""
import re
import subprocess

import pytest

from conftest import BIN, DATA, assert_same_results

BIG = DATA / "big.toml"  # planned only: more than an hour on one core by the cost model


def emit(*args):
    return subprocess.run([BIN, "plan", *map(str, args)], capture_output=True, text=True, timeout=120)


def bash_n(text, tmp_path, name):
    path = tmp_path / name
    path.write_text(text)
    check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    return path


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
def test_emitted_scripts_are_bash_and_sized(scheduler, tmp_path):
    one = emit(DATA / "small.toml", "--emit", scheduler, "--cores", 2)
    assert one.returncode == 0, one.stderr
    bash_n(one.stdout, tmp_path, "one.sh")
    assert "2 ranks on 1 node(s) per job, 1 shard(s)" in one.stderr
    assert f"SWEEP=${{1:-${{SWEEP:-{DATA / 'small.toml'}}}}}" in one.stdout
    assert "\nRCSWEEP=${RCSWEEP:-/" in one.stdout  # this program, by its absolute path
    if scheduler == "slurm":
        assert "#SBATCH --ntasks-per-node=2" in one.stdout and "#SBATCH --array" not in one.stdout
    else:
        assert re.search(r"^#PBS -l select=1:ncpus=2:mpiprocs=2:mem=\d+mb$", one.stdout, re.M)

    # more than an hour of work on one core, jobs of at most an hour: an array of shards
    many = emit(BIG, "--emit", scheduler, "--cores", 1, "--hours", 1)
    assert many.returncode == 0, many.stderr
    bash_n(many.stdout, tmp_path, "many.sh")
    shards = int(re.search(r"(\d+) shard\(s\)", many.stderr).group(1))
    assert shards >= 2
    assert f"SHARDS=${{SHARDS:-{shards}}}" in many.stdout
    assert ("#SBATCH --array=0-" if scheduler == "slurm" else "#PBS -J 0-") + str(shards - 1) in many.stdout
    assert "then merge the shards after the array" in many.stderr
    walltime = re.search(r"(?:--time=|walltime=)(\d\d):(\d\d):(\d\d)$", many.stdout, re.M).groups()
    assert int(walltime[0]) * 3600 + int(walltime[1]) * 60 + int(walltime[2]) <= 3600


# small.toml cut to one big task (layers of more than 2 GFLOP): the layout gives it both cores
ONE_TASK = ["sweep.replicates=1", "axes.mixer=['softmax']", "axes.lambda=[0.0]", "zip[0].T=[1024]", "zip[0].d=[1024]"]


def directives(text, prefix):
    """The scheduler lines of a script: {option: value} of `#SBATCH --option=value`, or the
    `#PBS -l select=` chunk as {resource: value}."""
    if prefix == "#SBATCH":
        return dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(\S*))?$", text, re.M))
    (select,) = re.findall(r"^#PBS -l select=(\S+)$", text, re.M)
    count, *resources = select.split(":")
    return {"chunks": count, **dict(r.split("=") for r in resources)}


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
def test_emitted_hybrid_scripts_give_each_rank_threads(scheduler, tmp_path):
    # chosen: one big task on two cores runs on one rank with two threads
    one = emit(DATA / "small.toml", *ONE_TASK, "--emit", scheduler, "--cores", 2)
    assert one.returncode == 0, one.stderr
    bash_n(one.stdout, tmp_path, "one.sh")
    assert "layout 1 rank x 2 threads per node: 1 task for 2 cores" in one.stderr
    assert "1 ranks x 2 threads on 1 node(s) per job, 1 shard(s)" in one.stderr
    if scheduler == "slurm":
        d = directives(one.stdout, "#SBATCH")
        assert (d["nodes"], d["ntasks-per-node"], d["cpus-per-task"]) == ("1", "1", "2"), d
        assert int(d["mem-per-cpu"].rstrip("M")) * 2 >= 256
        assert "\nTHREADS=${THREADS:-${SLURM_CPUS_PER_TASK:-2}}\n" in one.stdout
    else:
        d = directives(one.stdout, "#PBS")
        assert (d["chunks"], d["ncpus"], d["mpiprocs"], d["ompthreads"]) == ("1", "2", "1", "2"), d
        assert "\nTHREADS=${THREADS:-2}\n" in one.stdout
    assert '\n  map=(--map-by "slot:PE=$THREADS" --bind-to core -x OMP_PLACES -x OMP_PROC_BIND)\n' in one.stdout

    # forced: --threads 4 on two nodes of 8 cores, 2 ranks of 4 threads each
    forced = emit(DATA / "small.toml", "--emit", scheduler, "--cores", 8, "--nodes", 2, "--threads", 4)
    assert forced.returncode == 0, forced.stderr
    bash_n(forced.stdout, tmp_path, "forced.sh")
    assert "layout 2 ranks x 4 threads per node: set by --threads 4" in forced.stderr
    if scheduler == "slurm":
        d = directives(forced.stdout, "#SBATCH")
        assert (d["nodes"], d["ntasks-per-node"], d["cpus-per-task"]) == ("2", "2", "4"), d
    else:
        d = directives(forced.stdout, "#PBS")
        assert (d["chunks"], d["ncpus"], d["mpiprocs"], d["ompthreads"]) == ("2", "8", "2", "4"), d

    # one thread per rank: no hybrid directive
    plain = emit(DATA / "small.toml", "--emit", scheduler, "--cores", 2)
    assert "cpus-per-task" not in directives(plain.stdout, "#SBATCH") if scheduler == "slurm" else \
        "ompthreads" not in directives(plain.stdout, "#PBS")


@pytest.mark.parametrize("args,key", [
    (["--emit", "lsf"], "--emit"),
    (["--emit", "slurm", "--nodes", "-1"], "--nodes"),
    (["--emit", "slurm", "--nodes", "0"], "--nodes"),
    (["--emit", "pbs", "--hours", "0"], "--hours"),
    (["--emit", "pbs", "--hours", "-2"], "--hours"),
    (["--emit", "pbs", "--hours", "nan"], "--hours"),
    (["--emit", "slurm", "--nodes", "two"], "--nodes"),
    (["--emit", "slurm", "--cores", "2", "--threads", "4"], "--threads"),
    (["--emit", "pbs", "--threads", "0"], "--threads"),
    (["--emit", "slurm", "--mem-per-node", "10M"], "--mem-per-node"),
])
def test_bad_emit_options_exit_2_naming_the_option(args, key):
    proc = emit(DATA / "small.toml", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert key in proc.stderr
    assert proc.stdout == ""  # no script


def test_emitted_slurm_script_runs_on_slurm(slurm, reference):
    work = slurm.root / "work" / "emit"
    work.mkdir()
    proc = emit(DATA / "small.toml", "--emit", "slurm", "--cores", slurm.cpus)
    assert proc.returncode == 0, proc.stderr
    script = bash_n(proc.stdout, work, "job.sh")
    jid = slurm.sbatch(script, cwd=work, env={**slurm.env, "RCSWEEP": ""})  # RCSWEEP: the script's default
    (record,) = slurm.wait(jid)
    log = (work / f"rcsweep-{jid}.out").read_text()
    assert record["JobState"] == "COMPLETED" and record["ExitCode"] == "0:0", log + slurm.logs()
    assert record["JobName"] == "cluster-small" and record["TimeLimit"] == "00:06:00", record
    assert re.search(r"RCSWEEP=/\S*rcsweep ", log) and "rcsweep exit code 0" in log, log
    assert_same_results(work / "cluster-small.h5", reference("small"))
