"""The launcher the job scripts pick for the site's MPI and Slurm: each shipped script (and one that
`rcsweep plan --emit` wrote) run under bash with fake `mpiexec` and `srun` first on PATH, which print
what Open MPI, MPICH, Intel MPI or an unknown MPI print for `--version`, and what Slurm prints for
`srun --mpi=list`, and otherwise record the command line they were started with. No scheduler and
no MPI job: a few seconds in all."""
import os
import re
import subprocess

import pytest

from conftest import BIN, DATA, JOBS

VERSIONS = {
    "openmpi4": "mpiexec (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n",
    "openmpi5": "mpiexec (Open MPI) 5.0.3\n\nReport bugs to https://www.open-mpi.org/community/help/\n",
    "mpich": "HYDRA build details:\n    Version:                                 4.0.2\n"
             "    Release Date:                            Thu Apr  7 12:34:45 CDT 2022\n"
             "    Launchers available:                     ssh rsh fork slurm ll lsf sge manual persist\n",
    "intel": "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n"
             "Copyright 2003-2023, Intel Corporation.\n",
    "unknown": "mpiexec: unrecognized option '--version'\n",
}
FLAVOUR = {"openmpi4": "openmpi", "openmpi5": "openmpi", "mpich": "mpich", "intel": "intel", "unknown": "unknown"}

# `srun --mpi=list` of Slurm 22.05 (on stderr), of Slurm 23.11 (on stdout), and of sites with fewer plugins
MPI_LISTS = {
    "slurm22-pmix": ("", "srun: MPI types are...\nsrun: cray_shasta\nsrun: none\nsrun: pmi2\nsrun: pmix\nsrun: pmix_v4\n"),
    "slurm23-pmix": ("MPI plugin types are...\n\tnone\n\tcray_shasta\n\tpmi2\n\tpmix\n"
                     "specific pmix plugin versions available: pmix_v4\n", ""),
    "pmi2": ("", "srun: MPI types are...\nsrun: none\nsrun: pmi2\n"),
    "none": ("", "srun: MPI types are...\nsrun: none\n"),
}


@pytest.fixture
def fakes(tmp_path):
    """A directory of fake mpiexec, srun, squeue, scontrol, qstat, qrerun; fakes.use(version, mpi_list)
    sets what mpiexec --version and srun --mpi=list print; fakes.calls() the launcher's recorded
    command line (a list of words) per call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "calls"

    class Fakes:
        path = f"{bin_dir}:/usr/bin:/bin"

        def use(self, version="openmpi4", mpi_list="slurm22-pmix"):
            (tmp_path / "version").write_text(VERSIONS[version])
            (tmp_path / "version_rc").write_text("1" if version == "unknown" else "0")
            out, err = MPI_LISTS[mpi_list]
            (tmp_path / "mpi_list.out").write_text(out)
            (tmp_path / "mpi_list.err").write_text(err)
            record.unlink(missing_ok=True)

        def submitted(self):
            """(words, script on stdin) of every sbatch/qsub call."""
            path = tmp_path / "submitted"
            if not path.exists():
                return []
            return [(line.split("\x1f")[:-1], (tmp_path / f"submitted-script-{i}").read_text())
                    for i, line in enumerate(path.read_text().splitlines(), 1)]

        def refuse(self, on=True):
            (tmp_path / "refuse").touch() if on else (tmp_path / "refuse").unlink(missing_ok=True)

        def calls(self):
            if not record.exists():
                return []
            return [line.split("\x1f")[:-1] for line in record.read_text().splitlines()]

    (bin_dir / "mpiexec").write_text(f"""#!/bin/sh
if [ "$1" = --version ]; then cat {tmp_path}/version; exit "$(cat {tmp_path}/version_rc)"; fi
{{ printf 'mpiexec\\037'; for a in "$@"; do printf '%s\\037' "$a"; done; echo; }} >> {record}
""")
    (bin_dir / "srun").write_text(f"""#!/bin/sh
if [ "$1" = --mpi=list ]; then cat {tmp_path}/mpi_list.out; cat {tmp_path}/mpi_list.err >&2; exit 0; fi
{{ printf 'srun\\037'; for a in "$@"; do printf '%s\\037' "$a"; done; echo; }} >> {record}
""")
    # sbatch and qsub: record their words and the script on stdin; fail while the file "refuse" exists
    for name, answer in (("sbatch", "4243;rcsweeptest"), ("qsub", "4243.pbs01")):
        (bin_dir / name).write_text(f"""#!/bin/sh
[ -e {tmp_path}/refuse ] && {{ echo "{name}: error: refused" >&2; exit 1; }}
{{ printf '{name}\\037'; for a in "$@"; do printf '%s\\037' "$a"; done; echo; }} >> {tmp_path}/submitted
cat > {tmp_path}/submitted-script-$(wc -l < {tmp_path}/submitted | tr -d ' ')
echo "{answer}"
""")
    for name in ("squeue", "scontrol", "qstat", "qrerun"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    f = Fakes()
    f.use()
    return f


def run_script(script, fakes, tmp_path, threads=1, **env):
    """Run a job script under bash as its scheduler would start it (no time limit), with the fakes
    first on PATH; return the finished process."""
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("node1\nnode1\nnode2\nnode2\n")
    base = {"PATH": fakes.path, "HOME": str(tmp_path), "RCSWEEP": "/bin/true", "RANKS": "4",
            "THREADS": str(threads), "SLURM_SUBMIT_DIR": str(tmp_path), "SLURM_JOB_ID": "7",
            "SLURM_ARRAY_TASK_ID": "1", "SHARDS": "2", "PBS_NODEFILE": str(nodefile), "PBS_O_WORKDIR": str(tmp_path),
            "PBS_JOBID": "7.server", "PBS_ARRAY_INDEX": "1"}
    base.update(env)
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, env=base, cwd=tmp_path, timeout=60)


def expected_mpiexec(flavour, threads, hostfile=None):
    """mpiexec's words before rcsweep's for 4 ranks (as the scripts' documentation gives them)."""
    env = ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"]
    values = {"OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}
    if threads > 1:
        env += ["OMP_PLACES", "OMP_PROC_BIND"]
    words = ["mpiexec", "-n", "4"]
    if flavour == "openmpi":
        words += ["--hostfile", hostfile] if hostfile else []
        words += ["--map-by", f"slot:PE={threads}", "--bind-to", "core"] if threads > 1 else \
            ["--map-by", "core", "--bind-to", "core"]
        words += [w for v in env for w in ("-x", v)]
        if os.geteuid() == 0:
            words.append("--allow-run-as-root")
    elif flavour in ("mpich", "intel"):
        words += ["-f", hostfile] if hostfile else []
        if flavour == "intel":
            words += ["-genv", "I_MPI_PIN", "1", "-genv", "I_MPI_PIN_DOMAIN", "omp:compact" if threads > 1 else "core"]
        else:
            words += ["-bind-to", f"core:{threads}", "-map-by", f"core:{threads}"] if threads > 1 else \
                ["-bind-to", "core", "-map-by", "core"]
        words += [w for v in env for w in ("-genv", v, values[v])]
    return words


def launched(fakes, proc):
    calls = fakes.calls()
    assert proc.returncode == 0 and len(calls) == 1, proc.stdout + proc.stderr
    (call,) = calls
    at = call.index("/bin/true")  # rcsweep's command line starts there
    assert call[at + 1] == "run", call
    return call[:at]


SCRIPTS = [("slurm", "mpi_job.sh"), ("slurm", "array_job.sh"), ("pbs", "mpi_job.sh"), ("pbs", "array_job.sh")]


@pytest.mark.parametrize("scheduler,name", SCRIPTS, ids=[f"{s}-{n}" for s, n in SCRIPTS])
@pytest.mark.parametrize("version", list(VERSIONS))
@pytest.mark.parametrize("threads", [1, 2])
def test_mpiexec_flags_follow_the_mpi_that_mpiexec_names(fakes, tmp_path, scheduler, name, version, threads):
    fakes.use(version)
    proc = run_script(JOBS / scheduler / name, fakes, tmp_path, threads=threads)
    flavour = FLAVOUR[version]
    hostfile = str(tmp_path / "nodefile") if scheduler == "pbs" else None
    assert launched(fakes, proc) == expected_mpiexec(flavour, threads, hostfile)
    assert f"launcher: mpiexec, MPI {flavour} (MPI_FLAVOUR=auto)" in proc.stdout, proc.stdout
    if flavour == "unknown":
        assert "names no MPI this script knows" in proc.stderr and "MPI_FLAVOUR=" in proc.stderr, proc.stderr
    else:
        assert "warning" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
@pytest.mark.parametrize("chosen", ["openmpi", "mpich", "intel"])
def test_mpi_flavour_overrides_the_detection(fakes, tmp_path, scheduler, chosen):
    fakes.use("unknown" if chosen == "openmpi" else "openmpi4")
    proc = run_script(JOBS / scheduler / "mpi_job.sh", fakes, tmp_path, MPI_FLAVOUR=chosen)
    hostfile = str(tmp_path / "nodefile") if scheduler == "pbs" else None
    assert launched(fakes, proc) == expected_mpiexec(chosen, 1, hostfile)
    assert f"MPI {chosen} (MPI_FLAVOUR={chosen})" in proc.stdout and "warning" not in proc.stderr, proc.stdout


@pytest.mark.parametrize("name", ["mpi_job.sh", "array_job.sh"])
@pytest.mark.parametrize("mpi_list,plugin", [("slurm22-pmix", "pmix"), ("slurm23-pmix", "pmix"), ("pmi2", "pmi2"),
                                             ("none", None)])
@pytest.mark.parametrize("threads", [1, 2])
def test_srun_takes_pmix_else_pmi2_else_slurms_default(fakes, tmp_path, name, mpi_list, plugin, threads):
    fakes.use("unknown", mpi_list)  # mpiexec is not asked
    proc = run_script(JOBS / "slurm" / name, fakes, tmp_path, threads=threads, LAUNCHER="srun")
    words = ["srun"] + ([f"--mpi={plugin}"] if plugin else []) + \
        ["--ntasks=4", f"--cpus-per-task={threads}", "--cpu-bind=cores", "--kill-on-bad-exit=1"]
    assert launched(fakes, proc) == words
    assert f"launcher: srun, MPI plugin {plugin or 'default'} (SRUN_MPI=auto)" in proc.stdout, proc.stdout


@pytest.mark.parametrize("setting,words", [("pmi2", ["--mpi=pmi2"]), ("pmix_v4", ["--mpi=pmix_v4"]),
                                           ("none", ["--mpi=none"]), ("default", [])])
def test_srun_mpi_overrides_the_detection(fakes, tmp_path, setting, words):
    fakes.use("openmpi4", "slurm22-pmix")
    proc = run_script(JOBS / "slurm" / "mpi_job.sh", fakes, tmp_path, LAUNCHER="srun", SRUN_MPI=setting)
    assert launched(fakes, proc) == ["srun", *words, "--ntasks=4", "--cpus-per-task=1", "--cpu-bind=cores",
                                     "--kill-on-bad-exit=1"]


BAD_SETTINGS = [(s, n, setting) for s, n in SCRIPTS
                for setting in [{"MPI_FLAVOUR": "openmpi4"}, {"MPI_FLAVOUR": "OpenMPI"}, {"SRUN_MPI": "pmix;rm"},
                                {"SRUN_MPI": "two words"}]
                if s == "slurm" or "SRUN_MPI" not in setting]  # PBS scripts have no srun


@pytest.mark.parametrize("scheduler,name,setting", BAD_SETTINGS)
def test_bad_launcher_settings_exit_2_naming_them(fakes, tmp_path, scheduler, name, setting):
    proc = run_script(JOBS / scheduler / name, fakes, tmp_path, **setting)
    (key,) = setting
    assert proc.returncode == 2 and f"error: {key}=" in proc.stderr, proc.stdout + proc.stderr
    assert fakes.calls() == []


def test_one_rank_of_an_array_element_needs_no_launcher(fakes, tmp_path):
    fakes.use("unknown")
    for scheduler in ("slurm", "pbs"):
        proc = run_script(JOBS / scheduler / "array_job.sh", fakes, tmp_path, RANKS="1")
        assert proc.returncode == 0 and fakes.calls() == [], proc.stdout + proc.stderr
        assert "launcher:" not in proc.stdout and "warning" not in proc.stderr, proc.stdout + proc.stderr


def launcher_function(text):
    """The lines of set_launch and the comment above it."""
    m = re.search(r"\n((?:#[^\n]*\n)*set_launch\(\) \{\n.*?\n\}\n)", text, re.S)
    assert m, "no set_launch"
    return m.group(1)


def test_the_launcher_is_the_same_in_every_script():
    first = launcher_function((JOBS / "slurm" / "mpi_job.sh").read_text())
    assert "Open MPI" in first and "srun --mpi=list" in first
    for scheduler, name in SCRIPTS[1:]:
        assert launcher_function((JOBS / scheduler / name).read_text()) == first, f"{scheduler}/{name}"


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
def test_emitted_scripts_detect_the_same_way(fakes, tmp_path, scheduler):
    plan = subprocess.run([BIN, "plan", str(DATA / "small.toml"), "--emit", scheduler, "--cores", "4"], capture_output=True,
                          text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    script = tmp_path / "job.sh"
    script.write_text(plan.stdout)
    fakes.use("mpich")
    proc = run_script(script, fakes, tmp_path)
    hostfile = str(tmp_path / "nodefile") if scheduler == "pbs" else None
    assert launched(fakes, proc) == expected_mpiexec("mpich", 1, hostfile)


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
def test_array_element_submits_the_merge_job_once(fakes, tmp_path, scheduler):
    """MERGE_JOB=FILE: the first element to start submits FILE (on stdin) to run after the whole
    array; later and requeued elements do not; a refused submission is said on stderr, the element
    still runs its shard, and the next element tries again. MERGE_JOB unset (the shipped default):
    nothing is submitted."""
    merge_job = JOBS / scheduler / "merge_job.sh"
    slurm = scheduler == "slurm"
    ids = {"SLURM_ARRAY_JOB_ID": "4242"} if slurm else {"PBS_ARRAY_ID": "4242[].pbs01"}
    array_id = "4242" if slurm else "4242[].pbs01"
    script = JOBS / scheduler / "array_job.sh"
    common = dict(RANKS="1", SHARDS="3", **ids)

    plain = run_script(script, fakes, tmp_path, **common)
    assert plain.returncode == 0 and fakes.submitted() == [], plain.stdout + plain.stderr

    fakes.refuse()
    refused = run_script(script, fakes, tmp_path, MERGE_JOB=str(merge_job), SLURM_ARRAY_TASK_ID="2",
                         PBS_ARRAY_INDEX="2", **common)
    assert refused.returncode == 0, refused.stdout + refused.stderr  # the shard ran all the same
    assert "warning: the merge job was not submitted; submit it yourself" in refused.stderr, refused.stderr
    fakes.refuse(False)
    for i in ("0", "1"):
        proc = run_script(script, fakes, tmp_path, MERGE_JOB=str(merge_job), SLURM_ARRAY_TASK_ID=i, PBS_ARRAY_INDEX=i,
                          **common)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert ("submitted the merge job 4243" in proc.stdout) == (i == "0"), proc.stdout
    ((words, text),) = fakes.submitted()
    assert text == merge_job.read_text()
    if slurm:
        assert words[:4] == ["sbatch", "--parsable", f"--dependency=afterok:{array_id}", "--kill-on-invalid-dep=yes"]
    else:
        assert words[:3] == ["qsub", "-W", f"depend=afterok:{array_id}"]
        assert words[3] == "-v" and words[4].startswith("SWEEP=sweep.toml,OUT=sweep.h5,SHARDS=3,SHARD_DIR=sweep.shards")
    assert (tmp_path / "sweep.shards" / f"merge-of-{array_id}").is_dir()
