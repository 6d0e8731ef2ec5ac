"""What a site installs: `cmake --install` into a temporary prefix, the Lmod module file loaded in a
clean shell, and from an unrelated directory the quick example under mpiexec, the Python commands
and package, the man pages, `pip install` of the package into a venv, and the shipped Slurm job
script (installed copy) running the installed binary. Stores are compared bitwise with runs of the
build tree's binary."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, MPIEXEC, SOURCE, assert_same_results, e2e

LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """The build tree (the one RCSWEEP_BIN is in) installed into a temporary prefix."""
    p = tmp_path_factory.mktemp("prefix")
    proc = subprocess.run(["cmake", "--install", str(Path(BIN).parent), "--prefix", str(p)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return p


@pytest.fixture(scope="module")
def quick_reference(tmp_path_factory):
    """The quick example run by the build tree's binary."""
    store = tmp_path_factory.mktemp("reference") / "quick.h5"
    e2e.rcsweep("run", SOURCE / "jobs" / "examples" / "quick.toml", "-o", store, "-q", check=0)
    return store


def clean_shell(script, cwd, prefix):
    """Run `script` in bash with a bare environment (no PATH of this build, no PYTHONPATH; OPENBLAS_*
    kept) after loading the module file of `prefix`."""
    if not LMOD_INIT.exists():
        pytest.skip("Lmod not installed (scripts/install_deps.sh installs lmod)")
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": f"{Path(MPIEXEC).parent}:/usr/bin:/bin", "TERM": "dumb",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    # OpenBLAS's settings (e.g. OPENBLAS_CORETYPE) kept: another kernel gives other bits than the
    # build tree's reference run, which runs in this environment
    env.update({k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")})
    full = f"set -e\nsource {LMOD_INIT}\nmodule use {prefix}/share/modulefiles\nmodule load rcsweep\n{script}"
    return subprocess.run(["bash", "--noprofile", "--norc", "-c", full], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_installed_tree_runs_from_a_clean_shell_with_the_module(prefix, quick_reference, tmp_path):
    for path in ("bin/rcsweep", "bin/rcsweep-plot", "bin/rcsweep-summary", "bin/rcsweep-recompute",
                 "bin/rcsweep-reproduce", "bin/rcsweep-export", "bin/rcsweep-ls",
                 "lib/rcsweep/python/rcsweep_tools/__init__.py",
                 "share/rcsweep/jobs/slurm/mpi_job.sh", "share/rcsweep/jobs/examples/quick.toml",
                 "share/rcsweep/python/pyproject.toml", "share/doc/rcsweep/README.md",
                 "share/doc/rcsweep/docs/CONFIG.md", "share/man/man1/rcsweep-run.1"):
        assert (prefix / path).exists(), path
    for page in ("rcsweep", "rcsweep-run", "rcsweep-plan", "rcsweep-merge", "rcsweep-summary", "rcsweep-plot"):
        text = (prefix / "share/man/man1" / f"{page}.1").read_text()
        assert f'\n.TH {page.upper()} "1"' in text, page  # each page named for itself, not for the program
        assert f"\n.SH NAME\n{page} \\- " in text, page
    work = tmp_path / "elsewhere"
    work.mkdir()
    proc = clean_shell(
        "command -v rcsweep\n"
        "rcsweep --version\n"
        "man -w rcsweep-run\n"
        "cp \"$RCSWEEP_SHARE/jobs/examples/quick.toml\" .\n"
        "mpiexec -n 2 --oversubscribe rcsweep run quick.toml -o quick.h5 -q\n"
        "rcsweep-summary quick.h5 --png quick.png\n"
        "rcsweep-plot --list\n"
        "rcsweep-plot quick.h5 --y sr_x --hue lambda --col mixer --sel gap_fix=none -o quick-sr.png\n"
        "rcsweep export quick.h5 -o quick.csv\n"
        "rcsweep-reproduce --list\n"
        "/usr/bin/python3 -c 'import rcsweep_tools; print(rcsweep_tools.__file__); "
        "print(rcsweep_tools.load(\"quick.h5\").sizes[\"layer\"])'\n",
        work, prefix)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == f"{prefix}/bin/rcsweep"
    assert f"{prefix}/share/man/man1/rcsweep-run.1" in out
    assert f"{prefix}/lib/rcsweep/python/rcsweep_tools/__init__.py" in out
    assert (work / "quick.png").stat().st_size > 1000
    assert (work / "quick.csv").stat().st_size > 1000
    assert (work / "quick-sr.png").stat().st_size > 5000
    assert_same_results(work / "quick.h5", quick_reference)
    assert not list(work.glob("out")), "nothing is written outside the current directory's own files"


def test_pip_installs_the_python_package_into_a_venv(prefix, quick_reference, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    source = tmp_path / "python"  # the installed copy is read, not built in place
    shutil.copytree(prefix / "share" / "rcsweep" / "python", source)
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", str(source)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    store = quick_reference
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    check = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import rcsweep_tools, sys; from rcsweep_tools import load, tidy; "
                            f"print(rcsweep_tools.__file__); print(len(tidy('{store}')))"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert check.returncode == 0, check.stderr
    assert str(venv) in check.stdout.splitlines()[0]
    assert int(check.stdout.splitlines()[1]) > 0
    plot = subprocess.run([str(venv / "bin" / "rcsweep-plot"), "--list"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert plot.returncode == 0 and "mtg-fig1" in plot.stdout, plot.stderr


def test_installed_slurm_job_script_runs_the_installed_binary(prefix, slurm, quick_reference):
    work = slurm.root / "work"
    sweep = prefix / "share" / "rcsweep" / "jobs" / "examples" / "quick.toml"
    env = {**slurm.env, "PATH": f"{prefix}/bin:{slurm.env['PATH']}"}
    env.pop("RCSWEEP", None)  # the job finds rcsweep on PATH: the installed one
    assert shutil.which("rcsweep", path=env["PATH"]) == str(prefix / "bin" / "rcsweep")
    jid = slurm.sbatch("-t", "5", "--output=installed-%j.out", prefix / "share/rcsweep/jobs/slurm/mpi_job.sh", sweep,
                       work / "installed.h5", env=env)
    (record,) = slurm.wait(jid)
    log = "\n".join(f.read_text() for f in work.glob(f"installed-{jid}.out"))
    assert record["JobState"] == "COMPLETED" and record["ExitCode"] == "0:0", log + slurm.logs()
    assert "rcsweep exit code 0" in log
    assert_same_results(work / "installed.h5", quick_reference)
