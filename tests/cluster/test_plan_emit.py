"""rcsweep plan --emit slurm|pbs: the emitted job scripts are valid bash, sized from the cost model
(an array of shards when the sweep does not fit --hours), refuse bad options naming them (exit 2),
and the Slurm one is accepted and run by the test Slurm (conftest.Slurm), giving the direct run's
store."""
import os
import re
import shutil
import subprocess
import tempfile

import h5py
import pytest

from conftest import BIN, DATA, JOBS, assert_same_results

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
    assert "its first element to start submits it" in many.stderr
    assert "\nMERGE_JOB=${MERGE_JOB:-built-in}\n" in many.stdout and "cat <<'RCSWEEP_MERGE_JOB'\n" in many.stdout
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
    assert '\n      if (( THREADS > 1 )); then launch+=(--map-by "slot:PE=$THREADS" --bind-to core)\n' in one.stdout

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
    (["--emit", "slurm", "--cores", "2", "--shards", "0"], "--shards"),
    (["--emit", "slurm", "--cores", "2", "--shards", "73"], "--shards"),  # small.toml has 72 tasks
    (["--emit", "slurm", "--cores", "2", "--shards", "two"], "--shards"),
    (["--cores", "2", "--shards", "3"], "--shards"),  # only with --emit
    (["--emit", "slurm", "--cores", "1", "--hours", "1", "--shards", "1"], "--shards"),  # BIG needs more
])
def test_bad_emit_options_exit_2_naming_the_option(args, key):
    proc = emit(BIG if "--hours" in args and "--shards" in args else DATA / "small.toml", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert key in proc.stderr
    assert proc.stdout == ""  # no script


def test_emit_takes_the_cores_from_the_user_or_the_scheduler_never_this_machine(slurm):
    """Without --cores, `plan --emit slurm` sizes for the cores sinfo reports of the partition's
    nodes; a scheduler whose commands say nothing (no pbsnodes here) is refused naming --cores."""
    env = {**os.environ, **slurm.env}
    proc = subprocess.run([BIN, "plan", str(DATA / "small.toml"), "--emit", "slurm"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"--cores {slurm.cpus} " in proc.stderr, proc.stderr
    if shutil.which("pbsnodes") is None:
        proc = emit(DATA / "small.toml", "--emit", "pbs", "--hours", "0")
        assert proc.returncode == 2 and proc.stdout == ""
        assert "--cores: not given, and the scheduler (sinfo, pbsnodes -a) did not tell" in proc.stderr
        assert "--hours" in proc.stderr  # every problem at once


def test_emit_says_when_far_fewer_cores_are_enough():
    proc = emit(DATA / "small.toml", "--emit", "slurm", "--nodes", 2, "--cores", 64)
    assert proc.returncode == 0, proc.stderr
    note = re.search(r"note: the sweep is about .* of one core: (\d+) cores? would finish it in about .*, the job asks "
                     r"for (\d+) .*: --nodes 1 --cores (\d+) is enough", proc.stderr)
    assert note, proc.stderr
    assert int(note.group(1)) == int(note.group(3)) and 4 * int(note.group(1)) <= int(note.group(2))
    big = emit(BIG, "--emit", "slurm", "--nodes", 1, "--cores", 4)  # hours of work: every core pays
    assert big.returncode == 0 and "is enough" not in big.stderr, big.stderr


SITE = ["--account", "proj42", "--partition", "compute", "--directive=--constraint=zen4", "--directive=--mail-type=END"]


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
@pytest.mark.parametrize("big", [False, True])
def test_site_options_become_directives(scheduler, big, tmp_path):
    sweep, sizing = (BIG, ["--cores", 1, "--hours", 1]) if big else (DATA / "small.toml", ["--cores", 2])
    plain = emit(sweep, "--emit", scheduler, *sizing)
    assert plain.returncode == 0, plain.stderr
    # nothing asked: no account, partition, qos, exclusive
    assert not re.search(r"^#(SBATCH --(account|partition|qos|exclusive)|PBS -A|PBS -q|PBS -l place)", plain.stdout, re.M)
    pbs = scheduler == "pbs"
    directive = ["--directive=-m ae"] if pbs else ["--qos", "normal"] + SITE[4:]
    site = emit(sweep, "--emit", scheduler, *sizing, *SITE[:4], *directive, "--exclusive")
    assert site.returncode == 0, site.stderr
    bash_n(site.stdout, tmp_path, "site.sh")
    header = site.stdout[:site.stdout.index("\nset -euo pipefail\n")]  # an array's merge job comes later
    if pbs:
        lines = re.findall(r"^#PBS (.*)$", header, re.M)
        assert lines[-4:] == ["-A proj42", "-q compute", "-l place=excl", "-m ae"], lines
    else:
        lines = re.findall(r"^#SBATCH (.*)$", header, re.M)
        assert lines[-6:] == ["--account=proj42", "--partition=compute", "--qos=normal", "--exclusive",
                              "--constraint=zen4", "--mail-type=END"], lines
        d = directives(site.stdout, "#SBATCH")
        assert (d["account"], d["partition"], d["qos"], d["exclusive"]) == ("proj42", "compute", "normal", "")
    # the rest as without them
    added = set(site.stdout.splitlines()) - set(plain.stdout.splitlines())
    assert added == {("#PBS " if pbs else "#SBATCH ") + line for line in lines[-(4 if pbs else 6):]}, added


@pytest.mark.parametrize("args,key", [
    (["--emit", "pbs", "--qos", "normal"], "--qos"),
    (["--emit", "slurm", "--account", "#proj"], "--account"),
    (["--emit", "slurm", "--partition", "a b"], "--partition"),
    (["--emit", "slurm", "--qos", "a\nb"], "--qos"),
    (["--emit", "slurm", "--directive=#SBATCH --mem=1G"], "--directive"),
    (["--emit", "pbs", "--directive=-l a\n#PBS -l b"], "--directive"),
    (["--emit", "pbs", "--setup", "/nonexistent/env.sh"], "--setup"),
])
def test_bad_site_options_exit_2_naming_the_option(args, key):
    proc = emit(DATA / "small.toml", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert key in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
def test_setup_file_is_sourced_first(scheduler, tmp_path):
    setup = tmp_path / "env.sh"
    setup.write_text('echo "setup ran"\nexport THREADS=0\n')  # a bad THREADS stops the script right after
    proc = emit(DATA / "small.toml", "--emit", scheduler, "--cores", 2, "--setup", setup)
    assert proc.returncode == 0, proc.stderr
    assert f"\nRCSWEEP_SETUP=${{RCSWEEP_SETUP:-{setup}}}\n" in proc.stdout
    script = bash_n(proc.stdout, tmp_path, "job.sh")
    # run by hand: the setup runs first and its variables reach the script (which refuses THREADS=0,
    # exit 2, before running anything). A missing setup file stops the script (exit 2) first.
    nodefile = tmp_path / "nodes"
    nodefile.write_text("localhost\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PBS_NODEFILE": str(nodefile)}
    ran = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert ran.returncode == 2 and "setup ran" in ran.stdout, ran.stdout + ran.stderr
    assert "THREADS=0: not a positive integer" in ran.stderr, ran.stdout + ran.stderr
    gone = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env={**env, "RCSWEEP_SETUP": str(tmp_path / "missing.sh")})
    assert gone.returncode == 2 and "RCSWEEP_SETUP=" in gone.stderr and "setup ran" not in gone.stdout, gone.stderr
    # the shipped scripts themselves: RCSWEEP_SETUP unset, nothing sourced
    for name in ["mpi_job.sh", "array_job.sh", "merge_job.sh"]:
        text = (JOBS / scheduler / name).read_text()
        assert "\nRCSWEEP_SETUP=${RCSWEEP_SETUP:-}\n" in text and '  source "$RCSWEEP_SETUP"\n' in text, name


def test_paths_compute_nodes_may_not_see_are_warned(tmp_path):
    local = tmp_path / "local.toml"  # pytest's tmp_path is under /tmp
    local.write_text((DATA / "small.toml").read_text())
    assert str(local).startswith("/tmp/")
    proc = emit(local, "--emit", "slurm", "--cores", 2)
    assert proc.returncode == 0 and proc.stdout.startswith("#!/bin/bash"), proc.stderr  # written all the same
    assert f"warning: the script names the sweep file {local}, which compute nodes may not see" in proc.stderr
    # a home directory: only for a job of several nodes. The sweep file goes to a home made under
    # /var/tmp (the checkout, and so the program, may itself lie under /tmp: only the lines about
    # the sweep file are checked).
    home_dir = tempfile.mkdtemp(dir="/var/tmp")
    try:
        sweep = os.path.join(home_dir, "small.toml")
        shutil.copy(DATA / "small.toml", sweep)
        home = {**os.environ, "HOME": home_dir}
        about = f"warning: the script names the sweep file {sweep}, which compute nodes"
        one = subprocess.run([BIN, "plan", sweep, "--emit", "slurm", "--cores", "2"], env=home,
                             capture_output=True, text=True, timeout=120)
        assert one.returncode == 0 and about not in one.stderr, one.stderr
        many = subprocess.run([BIN, "plan", sweep, "--emit", "pbs", "--cores", "2", "--nodes", "2"], env=home,
                              capture_output=True, text=True, timeout=120)
        assert many.returncode == 0 and many.stdout.startswith("#!/bin/bash"), many.stderr
        assert about in many.stderr
        # elsewhere (HOME not above it, not under /tmp, /dev/shm or /run): no warning about it
        elsewhere = subprocess.run([BIN, "plan", sweep, "--emit", "pbs", "--cores", "2", "--nodes", "2"],
                                   env={**os.environ, "HOME": str(DATA)}, capture_output=True, text=True, timeout=120)
        assert elsewhere.returncode == 0 and "names the sweep file" not in elsewhere.stderr, elsewhere.stderr
    finally:
        shutil.rmtree(home_dir, ignore_errors=True)


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
    # seconds of work: a walltime of 2 minutes (the estimate x 1.5 and the shortest lead, 60 s)
    assert record["JobName"] == "cluster-small" and record["TimeLimit"] == "00:02:00", record
    assert re.search(r"RCSWEEP=/\S*rcsweep ", log) and "rcsweep exit code 0" in log, log
    assert_same_results(work / "cluster-small.h5", reference("small"))


def walltime_s(script):
    h, m, s = re.search(r"^(?:#SBATCH --time=|#PBS -l walltime=)(\d\d):(\d\d):(\d\d)$", script, re.M).groups()
    return int(h) * 3600 + int(m) * 60 + int(s)


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
def test_the_time_lead_scales_with_the_work_and_shards_are_asked_for(scheduler, tmp_path):
    """A sweep of seconds fits jobs of minutes (--hours 0.085, about 5 minutes: a fixed lead of 5
    minutes made 6 and refused it); --shards N makes N array elements whatever the tasks' lengths,
    each with a stop lead its walltime holds; an hours-long sweep keeps the shipped 120 s."""
    small = emit(DATA / "small.toml", "--emit", scheduler, "--cores", 2, "--hours", 0.085)
    assert small.returncode == 0, small.stderr
    assert walltime_s(small.stdout) == 120 and "1 shard(s)" in small.stderr
    assert "a lead of 60 s; STOP_BEFORE 24 s" in small.stderr, small.stderr
    for n in (1, 2, 5):
        proc = emit(DATA / "small.toml", "--emit", scheduler, "--cores", 2, "--hours", 0.085, "--shards", n)
        assert proc.returncode == 0, proc.stderr
        bash_n(proc.stdout, tmp_path, f"shards{n}.sh")
        assert f" --shards {n}: " in proc.stderr and f"{n} shard(s)" in proc.stderr, proc.stderr
        array = re.findall(r"^(?:#SBATCH --array=|#PBS -J )0-(\d+)$", proc.stdout, re.M)
        assert array == ([] if n == 1 else [str(n - 1)]), array
        if n > 1:
            assert f"\nSHARDS=${{SHARDS:-{n}}}\n" in proc.stdout
        assert "\nSTOP_BEFORE=${STOP_BEFORE:-24}\n" in proc.stdout
        assert ("\n#SBATCH --signal=B:USR1@24\n" in proc.stdout) == (scheduler == "slurm")
    big = emit(BIG, "--emit", scheduler, "--cores", 1, "--hours", 1)
    assert big.returncode == 0, big.stderr
    assert "a lead of 300 s; STOP_BEFORE 120 s" in big.stderr and "\nSTOP_BEFORE=${STOP_BEFORE:-120}\n" in big.stdout


def test_emitted_slurm_array_of_asked_shards_runs_a_small_sweep(slurm, reference):
    """`plan --emit slurm --shards 3 --hours 0.085` of a sweep of seconds: an array of 3 elements of
    2 minutes each, submitted with sbatch alone (the sweep file and store its defaults), whose merge
    gives the direct run's store."""
    work = slurm.root / "work" / "emit-shards"
    work.mkdir()
    proc = emit(DATA / "small.toml", "--emit", "slurm", "--cores", slurm.cpus, "--hours", 0.085, "--shards", 3)
    assert proc.returncode == 0, proc.stderr
    script = bash_n(proc.stdout, work, "job.sh")
    array = slurm.sbatch(script, cwd=work, env={**slurm.env, "RCSWEEP": ""})
    elements = slurm.wait(array)
    logs = "\n".join(f.read_text() for f in sorted(work.glob(f"rcsweep-{array}_*.out")))
    assert len(elements) == 3 and all(r["JobState"] == "COMPLETED" for r in elements), f"{elements}\n{logs}"
    assert all(r["TimeLimit"] == "00:02:00" for r in elements), elements
    (merge,) = re.findall(r"submitted the merge job (\d+)", logs)
    (record,) = slurm.wait(merge)
    log = (work / f"rcsweep-merge-{merge}.out").read_text()
    assert record["JobState"] == "COMPLETED" and "merged 3 shards" in log, f"{record}\n{log}"
    assert_same_results(work / "cluster-small.h5", reference("small"))


def test_emitted_slurm_array_submits_its_merge(slurm, reference):
    """The array script `rcsweep plan --emit slurm` writes for a sweep longer than --hours, submitted
    with sbatch alone: its first element to start submits the merge job written into the script
    (--dependency=afterok on the array), which runs after every element and gives the direct run's
    store. (big.toml sizes the array; its elements run small.toml, named on the sbatch command line as
    a user may.)"""
    work = slurm.root / "work" / "emit-array"
    work.mkdir()
    proc = emit(BIG, "--emit", "slurm", "--cores", 1, "--hours", 1)
    assert proc.returncode == 0, proc.stderr
    shards = int(re.search(r"^#SBATCH --array=0-(\d+)$", proc.stdout, re.M).group(1)) + 1
    assert shards >= 2
    script = bash_n(proc.stdout, work, "job.sh")
    out = work / "emitted.h5"
    array = slurm.sbatch(script, DATA / "small.toml", out, cwd=work, env={**slurm.env, "RCSWEEP": ""})
    elements = slurm.wait(array)
    logs = "\n".join(f.read_text() for f in sorted(work.glob(f"rcsweep-{array}_*.out")))
    submitted = re.findall(r"submitted the merge job (\d+): it runs after every element of array (\d+)", logs)
    assert len(submitted) == 1 and submitted[0][1] == array, logs  # by one element only
    merge = submitted[0][0]
    (record,) = slurm.wait(merge)
    log = (work / f"rcsweep-merge-{merge}.out").read_text()
    assert record["JobState"] == "COMPLETED" and record["JobName"] == "cluster-big-merge", f"{record}\n{log}"
    assert len(elements) == shards and all(r["JobState"] == "COMPLETED" for r in elements), elements
    assert all(record["StartTime"] >= r["EndTime"] for r in elements), "merge ran before a shard finished"
    assert f"merged {shards} shards" in log, log
    assert_same_results(out, reference("small"))


def test_emitted_array_of_a_sweep_that_diverges_by_design_is_merged(slurm, reference):
    """Diverged and vanished tasks are outcomes (exit 0): every element of an emitted array job of
    such a sweep completes, its merge job runs by the afterok dependency, and the merged store, with
    its diverged and vanished tasks, is the direct run's."""
    work = slurm.root / "work" / "emit-diverging"
    work.mkdir()
    proc = emit(BIG, "--emit", "slurm", "--cores", 1, "--hours", 1)
    assert proc.returncode == 0, proc.stderr
    script = bash_n(proc.stdout, work, "job.sh")
    out = work / "diverging.h5"
    array = slurm.sbatch(script, DATA / "diverging.toml", out, cwd=work, env={**slurm.env, "RCSWEEP": ""})
    elements = slurm.wait(array)
    logs = "\n".join(f.read_text() for f in sorted(work.glob(f"rcsweep-{array}_*.out")))
    assert all(r["JobState"] == "COMPLETED" and r["ExitCode"] == "0:0" for r in elements), f"{elements}\n{logs}"
    assert "diverged (X non-finite) and" in logs and "rcsweep exit code 0" in logs, logs
    (merge,) = re.findall(r"submitted the merge job (\d+)", logs)
    (record,) = slurm.wait(merge)
    log = (work / f"rcsweep-merge-{merge}.out").read_text()
    assert record["JobState"] == "COMPLETED", f"{record}\n{log}"
    with h5py.File(out, "r") as f:
        status = f["tasks"]["status"][...]
    assert {1, 3, 5} <= set(status.tolist()), status  # done, diverged and vanished, all merged
    assert_same_results(out, reference("diverging"))
