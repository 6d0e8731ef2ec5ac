"""Build, plan, run and submit sweeps from Python (a notebook), through the rcsweep command line.

    from rcsweep_tools import Sweep
    sw = Sweep("width", seed=1, replicates=4,
               model={"mixer": "softmax", "depth": 10, "T": 64},
               axes={"d": [32, 64, 128], "lambda": [0.0, 1.0]},
               output={"spectra": "last"})
    print(sw.toml())                    # the sweep file (docs/CONFIG.md)
    p = sw.plan(cores=2)                # `rcsweep plan`: p.tasks, p.bundles, print(p)
    ds = sw.run("width.h5", ranks=2)    # `rcsweep run -n 2`; the store loaded (xarray.Dataset)
    job = sw.submit("width.h5", nodes=1, cores=64)   # a job script from `plan --emit slurm`, sbatch
    ds = job.wait()                     # when the job has left the queue: the store loaded

The sweep file is written next to the store (`width.toml` for `width.h5`), so the store, its sweep
file and the job script stay together. Running again resumes, or grows the store when the sweep
grew (docs/CONFIG.md "Growing a sweep"). The program is $RCSWEEP_BIN, else `rcsweep` on PATH, else
the checkout's build/rcsweep; mpiexec is $RCSWEEP_MPIEXEC, else `mpiexec` (with
--allow-run-as-root as root, and --oversubscribe for more ranks than cores).
"""
import math
import os
import re
import shutil
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .load import load


class RcsweepError(RuntimeError):
    """rcsweep exited with an error; `returncode` and `stderr` say which and why."""

    def __init__(self, what, returncode, stderr):
        super().__init__(f"{what} exited with {returncode}:\n{stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


class SweepConfigError(RcsweepError, ValueError):
    """The sweep was refused (exit code 2): the message lists every problem with its key."""


def rcsweep_bin():
    """The rcsweep program to run."""
    if os.environ.get("RCSWEEP_BIN"):
        return os.environ["RCSWEEP_BIN"]
    on_path = shutil.which("rcsweep")
    if on_path:
        return on_path
    checkout = Path(__file__).resolve().parents[2] / "build" / "rcsweep"
    if checkout.exists():
        return str(checkout)
    raise FileNotFoundError("rcsweep not found: set RCSWEEP_BIN, put it on PATH (module load rcsweep), "
                            "or build the checkout (scripts/build.sh)")


def mpiexec_command(ranks):
    """The mpiexec command (split) for `ranks` ranks on this machine."""
    cmd = os.environ.get("RCSWEEP_MPIEXEC", "mpiexec").split()
    if os.geteuid() == 0 and "--allow-run-as-root" not in cmd:
        cmd.append("--allow-run-as-root")
    if ranks > (os.cpu_count() or 1) and "--oversubscribe" not in cmd:
        cmd.append("--oversubscribe")
    return cmd


def _toml_value(v):
    if hasattr(v, "tolist"):  # numpy scalars and arrays
        v = v.tolist()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} ({type(v).__name__}) into a sweep file")


def _table(name, values, array=False):
    head = f"[[{name}]]" if array else f"[{name}]"
    return "\n".join([head] + [f"{k} = {_toml_value(v)}" for k, v in values.items()]) + "\n"


@dataclass
class Sweep:
    """A sweep file as Python values: `model` ({parameter: value}), `axes` ({parameter: [values]}),
    `zips` ([{parameter: [values]}, ...] moving together), `output` ({key: value}); see
    docs/CONFIG.md for every parameter. Validation is rcsweep's own (plan/run raise
    SweepConfigError with its messages)."""
    name: str
    seed: int = 0
    replicates: int = 1
    model: dict = field(default_factory=dict)
    axes: dict = field(default_factory=dict)
    zips: list = field(default_factory=list)
    output: dict = field(default_factory=dict)

    def toml(self):
        """The sweep file's text."""
        parts = [_table("sweep", {"name": self.name, "seed": self.seed, "replicates": self.replicates})]
        if self.model:
            parts.append(_table("model", self.model))
        if self.axes:
            parts.append(_table("axes", self.axes))
        parts += [_table("zip", z, array=True) for z in self.zips]
        if self.output:
            parts.append(_table("output", self.output))
        return "\n".join(parts)

    def write(self, path):
        """Write the sweep file to `path`; returns it as a Path."""
        path = Path(path)
        path.write_text(self.toml())
        return path

    def _file_for(self, store):
        return self.write(Path(store).with_suffix(".toml"))

    def plan(self, cores=None, store=None):
        """`rcsweep plan`: points, tasks, bundles, time and memory on `cores` (default: this
        machine's); with `store`, what a run would do with it. Returns a Plan."""
        sweep = self._file_for(store) if store else self.write(Path(os.environ.get("TMPDIR", "/tmp")) /
                                                                  f"rcsweep-{os.getpid()}-{self.name}.toml")
        cmd = [rcsweep_bin(), "plan", str(sweep)]
        if cores:
            cmd += ["--cores", str(cores)]
        if store:
            cmd += ["-o", str(store)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if not store:
            sweep.unlink(missing_ok=True)
        _check(proc, "rcsweep plan")
        return Plan(proc.stdout)

    def run(self, store, ranks=1, args=(), quiet=True):
        """Run the sweep into `store` on `ranks` MPI ranks (`rcsweep run -n ranks`, which starts
        mpiexec); returns the store loaded. A store of this sweep is resumed, one of an earlier
        version grown. Raises SweepConfigError (exit 2), RcsweepError (1: an error; 4: stopped
        early, run again to resume); warns when tasks failed or diverged (3)."""
        store = Path(store)
        sweep = self._file_for(store)
        cmd = [rcsweep_bin(), "run", str(sweep), "-o", str(store), *map(str, args)]
        if quiet:
            cmd.append("-q")
        if ranks > 1:
            cmd += ["-n", str(ranks), "--mpiexec", " ".join(mpiexec_command(ranks))]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 3:
            warnings.warn(f"{store}: some tasks failed or diverged (see ds.status and ds.message)")
        else:
            _check(proc, "rcsweep run")
        return load(store)

    def submit(self, store, nodes=1, cores=None, hours=None, sbatch_args=()):
        """Submit the sweep to Slurm: the job script of `rcsweep plan --emit slurm` (sized for
        `nodes` nodes of `cores` cores), written next to the store and passed to sbatch with the
        sweep file and the store. Returns a Job."""
        store = Path(store).resolve()
        sweep = self._file_for(store)
        cmd = [rcsweep_bin(), "plan", str(sweep), "--emit", "slurm", "--nodes", str(nodes)]
        if cores:
            cmd += ["--cores", str(cores)]
        if hours:
            cmd += ["--hours", str(hours)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        _check(proc, "rcsweep plan --emit slurm")
        script = store.with_suffix(".slurm.sh")
        script.write_text(proc.stdout)
        sub = subprocess.run(["sbatch", "--parsable", *map(str, sbatch_args), str(script), str(sweep), str(store)],
                             capture_output=True, text=True, cwd=store.parent)
        _check(sub, "sbatch")
        return Job(sub.stdout.strip().split(";")[0], store, script)


@dataclass
class Plan:
    """What `rcsweep plan` printed, with its main numbers."""
    text: str

    def _number(self, pattern):
        m = re.search(pattern, self.text, re.M)
        return int(m.group(1)) if m else None

    @property
    def tasks(self):
        return self._number(r"^points\s+.*= (\d+) tasks")

    @property
    def points(self):
        return self._number(r"^points\s+(\d+)")

    @property
    def bundles(self):
        return self._number(r"^bundles\s+(\d+)")

    def __str__(self):
        return self.text


@dataclass
class Job:
    """A submitted Slurm job writing `store`."""
    job_id: str
    store: Path
    script: Path

    def state(self):
        """Slurm's JobState (PENDING, RUNNING, COMPLETED, FAILED, ...)."""
        p = subprocess.run(["scontrol", "-o", "show", "job", self.job_id], capture_output=True, text=True)
        m = re.search(r"JobState=(\S+)", p.stdout)
        return m.group(1) if m else "UNKNOWN"

    def wait(self, timeout=None, poll=2.0):
        """Wait until the job (and its requeues) has left the queue; return the store loaded.
        Raises RcsweepError when it did not complete."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            q = subprocess.run(["squeue", "-h", "-j", self.job_id], capture_output=True, text=True)
            if q.returncode == 0 and not q.stdout.strip():
                break
            if end is not None and time.monotonic() > end:
                raise TimeoutError(f"job {self.job_id} still queued after {timeout} s")
            time.sleep(poll)
        state = self.state()
        if state not in ("COMPLETED", "UNKNOWN"):
            raise RcsweepError(f"job {self.job_id}", state, f"see its output next to {self.store}")
        return load(self.store)


def _check(proc, what):
    if proc.returncode == 2:
        raise SweepConfigError(what, 2, proc.stderr)
    if proc.returncode != 0:
        raise RcsweepError(what, proc.returncode, proc.stderr)
