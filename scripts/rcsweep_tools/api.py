"""Build, plan, run and submit sweeps from Python (a notebook), through the rcsweep command line.

    from rcsweep_tools import Sweep
    sw = Sweep("width", seed=1, replicates=4,
               model={"mixer": "softmax", "depth": 10, "T": 64},
               axes={"d": [32, 64, 128], "lambda": [0.0, 1.0]},
               output={"spectra": "last"})
    print(sw.toml())                    # the sweep file (docs/CONFIG.md)
    p = sw.plan(ranks=2)                # `rcsweep plan`: p.tasks, p.bundles, p.layout, print(p)
    ds = sw.run("width.h5", ranks=2)    # `rcsweep run -n 2`; the store loaded (xarray.Dataset)
    ds = sw.run("width.h5", threads=2, overrides={"model.T": 128}, time_limit="2h")   # any run option
    job = sw.submit("width.h5", nodes=1, cores=64)   # a job script from `plan --emit slurm`, sbatch
    ds = job.wait()                     # when the job has left the queue: the store loaded

Adaptive replicates (docs/CONFIG.md "Adaptive replicates") are a dict, written as the
`[sweep.replicates]` table:

    Sweep("ad", replicates={"min": 4, "max": 20, "step": 2,
                            "targets": [{"metric": "sr_cov", "layer": "last", "rel_se": 0.05}]}, ...)

Every option of `rcsweep run` and `rcsweep plan` a script needs is a keyword argument (see
`Sweep.run`, `Sweep.plan`); `Sweep.run_command` and `Sweep.plan_command` return the command line
they build. An unknown keyword raises TypeError naming it.

The sweep file is written next to the store (`width.toml` for `width.h5`), so the store, its sweep
file and the job script stay together. Running again resumes, or grows the store when the sweep
grew (docs/CONFIG.md "Growing a sweep"). Such a file starts with a comment that marks it as this
module's (with a digest of the rest): one it wrote and nobody edited since is replaced when the
sweep changes; any other file there (the user's, one edited since, a symbolic link) is kept, and
the call raises FileExistsError naming it before anything runs, unless overwrite_sweep_file=True.
`plan()` without a store runs on a temporary sweep file, which its errors call NAME.toml (the
sweep's name) and whose suggestion is `sweep.run("NAME.h5", ranks=...)`; with a store the sweep file
is written beside it and the suggested command names it. `Sweep.from_toml(path)` and
`Sweep.from_store(store)` give back the Sweep of a sweep file or a store (the same plan hash).

Overrides are KEY=VALUE pairs only (a dict {KEY: value} or "KEY=VALUE" strings, KEY a dotted key
path); anything else raises ValueError naming it before anything runs. They are passed last, after
the end-of-options marker `--`, so no value of any keyword is read as an option.

The program is $RCSWEEP_BIN, else `rcsweep` on PATH, else the checkout's build/rcsweep; mpiexec
is the `mpiexec` argument, else $RCSWEEP_MPIEXEC, else `mpiexec` (with --allow-run-as-root as
root, and --oversubscribe for more ranks x threads than cores).

Exit codes (docs/ERRORS.md): 0 (every task ran to an outcome: done, diverged or vanished, the
last two outcomes of the stack, in ds.status) and 3 (finished, some tasks failed) return the store
loaded, with a TaskOutcomeWarning giving the counts of failed and pending tasks when there are any; 2 raises SweepConfigError (the engine's messages with their keys), 4 RunStopped
(stopped early by a signal or the time limit: run again to resume), 1 and others RcsweepError.
"""
import codecs
import collections
import difflib
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from .events import ProgressBar, parse_event
from .load import load, outcome_words


class RcsweepError(RuntimeError):
    """rcsweep exited with an error; `returncode` and `stderr` say which and why."""

    def __init__(self, what, returncode, stderr):
        super().__init__(f"{what} exited with {returncode}:\n{stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


class SweepConfigError(RcsweepError, ValueError):
    """The sweep was refused (exit code 2): the message lists every problem with its key."""


class RunStopped(RcsweepError):
    """The run stopped early (exit code 4: a signal or the time limit). The store keeps every
    finished task (`store`); the same call again resumes it."""

    def __init__(self, what, returncode, stderr, store=None):
        super().__init__(what, returncode, stderr)
        self.store = store


class TaskOutcomeWarning(UserWarning):
    """The run finished, but some tasks failed (an error, `ds.message` says which) or are still
    pending (`rcsweep info`); `counts` holds the store's task counts. Diverged and vanished tasks
    are outcomes of the stack, kept up to the layer they reached: no warning."""

    def __init__(self, message, counts=None):
        super().__init__(message)
        self.counts = counts or {}


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


def mpiexec_command(ranks, threads=1):
    """The mpiexec command (split) for `ranks` ranks of `threads` threads on this machine:
    $RCSWEEP_MPIEXEC, else mpiexec, with --allow-run-as-root as root and --oversubscribe when
    ranks x threads exceed the cores."""
    cmd = os.environ.get("RCSWEEP_MPIEXEC", "mpiexec").split()
    if os.geteuid() == 0 and "--allow-run-as-root" not in cmd:
        cmd.append("--allow-run-as-root")
    if ranks * max(1, threads or 1) > (os.cpu_count() or 1) and "--oversubscribe" not in cmd:
        cmd.append("--oversubscribe")
    return cmd


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(k):
    k = str(k)
    return k if _BARE_KEY.match(k) else _toml_value(k)


# A TOML basic string's escapes: the quote, the backslash and every control character.
_TOML_ESCAPES = {**{c: f"\\u{c:04X}" for c in (*range(0x20), 0x7F)},
                 **{ord(c): e for c, e in (('"', '\\"'), ("\\", "\\\\"), ("\b", "\\b"), ("\t", "\\t"),
                                           ("\n", "\\n"), ("\f", "\\f"), ("\r", "\\r"))}}


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
        return '"' + v.translate(_TOML_ESCAPES) + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):  # an inline table
        if not v:
            return "{}"
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} ({type(v).__name__}) into a sweep file")


def _table(name, values, array=False):
    head = f"[[{name}]]" if array else f"[{name}]"
    return "\n".join([head] + [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in values.items()]) + "\n"


def _replicates_table(rule):
    """`[sweep.replicates]` of an adaptive rule, its `targets` one inline table a line."""
    lines = ["[sweep.replicates]"]
    for k, v in rule.items():
        if k == "targets" and isinstance(v, (list, tuple)) and v:
            lines.append("targets = [")
            lines += [f"  {_toml_value(t)}," for t in v]
            lines.append("]")
        else:
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    return "\n".join(lines) + "\n"


# A sweep's name that can name its temporary sweep file as it is (else "sweep.toml").
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,100}")

# The first comment line of a file this module writes beside a store (after a "#!" line): the
# SHA-256 of the file's other lines, so a file it wrote and nobody edited since is told from any other.
_MARK = "# Written by rcsweep_tools.Sweep ({what}; sha256 {digest} of the other lines): replaced when the sweep " \
        "changes, kept once edited\n"
_MARK_LINE = re.compile(r"# Written by rcsweep_tools\.Sweep \([^;\n]*; sha256 ([0-9a-f]{64}) "
                        r"of the other lines\)[^\n]*\n")


def _digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _mark_at(text):
    """Where the mark line goes in `text`: after a first "#!" line, else first."""
    return text.find("\n") + 1 if text.startswith("#!") else 0


def _marked(text, what):
    """`text` with the mark line."""
    at = _mark_at(text)
    return text[:at] + _MARK.format(what=what, digest=_digest(text)) + text[at:]


def _unedited(text):
    """Whether `text` is a file `_marked` made that nobody edited since."""
    at = _mark_at(text)
    m = _MARK_LINE.match(text, at)
    return bool(m) and _digest(text[:at] + text[m.end():]) == m.group(1)


def _write_beside(path, text, what, overwrite=False):
    """Write `text` to `path` (beside a store), marked as this module's (`_marked`), atomically
    (a new file renamed over the old: a symbolic link is replaced, never followed). An existing
    `path` that holds exactly `text` is kept as it is; one this module wrote and nobody edited since
    is replaced; anything else (a file of the user's, one edited since, a symbolic link, not a
    regular file) raises FileExistsError naming it, unless `overwrite`. With `text` None only the
    refusal is checked (a file of the user's is refused even if it would hold the same). Returns `path`."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    mode, keep_mode = 0o666, False
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            if not overwrite:
                raise FileExistsError(
                    f"{path}: the {what} beside the store is a symbolic link (to {os.readlink(path)}); it is "
                    f"neither followed nor replaced: remove it, or pass overwrite_sweep_file=True to replace "
                    f"the link (not its target) with this sweep's {what}")
        elif not stat.S_ISREG(st.st_mode):
            raise FileExistsError(f"{path}: the {what} beside the store exists and is not a regular file")
        else:
            try:
                old = path.read_bytes().decode("utf-8", "surrogateescape")
            except OSError as e:
                raise FileExistsError(f"{path}: the {what} beside the store exists and cannot be read: "
                                      f"{e.strerror}") from None
            if text is not None and old in (text, _marked(text, what)):
                return path
            if not (overwrite or _unedited(old)):
                raise FileExistsError(
                    f"{path}: a {what} beside the store that rcsweep_tools did not write (or that was edited "
                    f"since) and that differs from this sweep's; it is kept: move it away, or pass "
                    f"overwrite_sweep_file=True to replace it")
            mode, keep_mode = stat.S_IMODE(st.st_mode), True
    if text is None:
        return path
    data = _marked(text, what).encode("utf-8", "surrogateescape")
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    except OSError as e:
        raise type(e)(e.errno, f"{e.strerror}: cannot write the {what} beside the store", str(path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            if keep_mode:
                os.fchmod(f.fileno(), mode)
            f.write(data)
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):  # named by the user's file, not the temporary
            raise type(e)(e.errno, f"{e.strerror}: cannot write the {what} beside the store", str(path)) from None
        raise
    return path


def _reject_unknown(function, unknown, known):
    """TypeError naming the first unknown keyword argument (and the nearest known one)."""
    if not unknown:
        return
    name = next(iter(unknown))
    near = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise TypeError(f"{function}() got an unexpected keyword argument {name!r}{hint}; "
                    f"its options: {', '.join(sorted(known))}")


# KEY of an override, as the command line's grammar takes it (src/config/overrides.cpp): parts
# separated by '.', each a bare TOML key (letters, digits, '_', '-') followed by any [i], or an
# index alone (zip.0.T); the first part starts with a letter or '_', so no override reads as an option.
_INDEX = r"\[[0-9]{1,6}\]"
_OVERRIDE_KEY = re.compile(rf"[A-Za-z_][A-Za-z0-9_-]*(?:{_INDEX})*(?:\.(?:[A-Za-z0-9_-]+(?:{_INDEX})*|[0-9]{{1,6}}))*")


def _override_key(key, shown):
    """`key` (str) stripped, if it is an override's KEY; else ValueError naming `shown`."""
    if isinstance(key, str) and _OVERRIDE_KEY.fullmatch(key.strip()) and "\0" not in key:
        return key.strip()
    raise ValueError(f"override {shown!r} is not KEY=VALUE with KEY a dotted key path (letters, digits, '_', "
                     "'-', [i]; e.g. model.T, axes.lambda, zip[0].d: docs/CONFIG.md \"Overrides on the command "
                     "line\"); give a dict {KEY: value} or 'KEY=VALUE' strings")


def _overrides(overrides):
    """KEY=VALUE arguments: a dict {KEY: Python value} (the value written as TOML), or strings
    'KEY=VALUE' passed as given (the command line's syntax: a bare word is a string). Anything else
    raises ValueError naming it: the API passes them after `--`, where nothing is an option."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        overrides = [overrides]
    if isinstance(overrides, Mapping):
        out = []
        for k, v in overrides.items():
            out.append(f"{_override_key(k, k)}={_toml_value(v)}")
            if "\0" in out[-1]:
                raise ValueError(f"override {k!r}: its value holds a NUL character")
        return out
    out = []
    for o in overrides:
        if not isinstance(o, str) or "=" not in o or "\0" in o:
            raise ValueError(f"override {o!r} is not KEY=VALUE (give a dict {{KEY: value}} or 'KEY=VALUE' strings)")
        _override_key(o.split("=", 1)[0], o)
        out.append(o)
    return out


def _after_options(overrides):
    """The overrides at the end of a command line, after the end-of-options marker `--`."""
    return ["--", *overrides] if overrides else []


def _arg_path(path):
    """A path as a command-line argument that cannot be read as an option ('-x.h5' is './-x.h5')."""
    text = os.fspath(path)
    return "./" + text if text.startswith("-") else text


# The options of `rcsweep run` and `plan` that a keyword owns (it names the store, the program to
# start, replaces data or carries the events the API reads): `args` may not give them.
_RUN_OWNED = {"-o": "store", "--output": "store", "-n": "ranks", "--ranks": "ranks", "--mpiexec": "mpiexec",
              "--overwrite": "overwrite", "--resume": "resume", "-q": "progress", "--quiet": "progress",
              "--progress": "progress", "--gemm-library": "gemm_library"}
_PLAN_OWNED = {"-o": "store", "--output": "store", "--emit": "submit"}


def _extra_args(args, owned, keyword="args"):
    """More command-line options, passed as given (a list): an option that a keyword owns, `--`
    (overrides go in `overrides`) or a single string (which would be split into characters) raise."""
    if isinstance(args, (str, bytes, os.PathLike)):
        raise TypeError(f"{keyword}={args!r}: give a list of arguments, e.g. [\"--grace\", \"5\"]")
    out = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    for a in out:
        if a == "--":
            raise ValueError(f"{keyword}={args!r}: '--' ends the options; give KEY=VALUE pairs as overrides=")
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            if name in owned:
                raise ValueError(f"{keyword}={args!r}: {name} is the keyword argument {owned[name]}=")
        elif a.startswith("-") and len(a) > 1 and a[1].isalpha():  # -n2, -qo x.h5: short options in one word
            for c in a[1:]:
                if not c.isalpha():
                    break
                if f"-{c}" in owned:
                    raise ValueError(f"{keyword}={args!r}: -{c} in {a!r} is the keyword argument {owned['-' + c]}=")
    return out


def _shard(shard):
    if shard is None:
        return []
    if isinstance(shard, (tuple, list)):
        if len(shard) != 2:
            raise ValueError(f"shard={shard!r}: give (i, n) or 'i/n'")
        shard = f"{shard[0]}/{shard[1]}"
    return ["--shard", str(shard)]


def _time_limit(limit):
    """A number or timedelta is seconds (rounded down); a string is passed as given (Slurm's
    formats: a bare "90" is 90 minutes)."""
    if limit is None:
        return []
    if isinstance(limit, timedelta):
        limit = limit.total_seconds()
    if isinstance(limit, (int, float)) and not isinstance(limit, bool):
        if not limit >= 1:
            raise ValueError(f"time_limit={limit!r}: at least 1 second")
        limit = f"{int(limit)}s"
    return ["--time-limit", str(limit)]


def _size(flag, value):
    """A memory size: a string as the command line takes it ("4G", "512M") or a number of bytes."""
    if value is None:
        return []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(int(value))
    return [flag, str(value)]


def _positive(name, value):
    if value is None:
        return []
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name}={value!r}: a positive integer")
    return [f"--{name.replace('_', '-')}", str(int(value))]


def _paths(value):
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [str(value)]
    return [str(v) for v in value]


_RUN_OPTIONS = ("ranks", "threads", "blas_threads", "gemm_library", "mpiexec", "overrides", "resume", "overwrite", "shard",
                "reuse", "retry_failed", "fail_on_diverged", "time_limit", "grace", "mem_per_rank", "dump_weights",
                "progress", "quiet", "args")
_PLAN_OPTIONS = ("cores", "store", "ranks", "threads", "shard", "mem_per_rank", "mem_per_node", "overrides",
                 "args")
_SUBMIT_OPTIONS = ("nodes", "cores", "hours", "shards", "threads", "mem_per_rank", "mem_per_node", "overrides", "account",
                   "partition", "qos", "directives", "exclusive", "launcher", "mpi", "srun_mpi", "setup",
                   "run_args", "sbatch_args")


@dataclass
class Sweep:
    """A sweep file as Python values: `model` ({parameter: value}), `axes` ({parameter: [values]}),
    `zips` ([{parameter: [values]}, ...] moving together), `output` ({key: value}); see
    docs/CONFIG.md for every parameter. `replicates` is a count, or an adaptive rule as a dict
    {"min", "max", "step", "targets": [{"metric", "layer", "rel_se"/"abs_se"}, ...]}
    (docs/CONFIG.md "Adaptive replicates"), written as the `[sweep.replicates]` table.
    Validation is rcsweep's own (plan/run raise SweepConfigError with its messages)."""
    name: str
    seed: int = 0
    replicates: object = 1
    model: dict = field(default_factory=dict)
    axes: dict = field(default_factory=dict)
    zips: list = field(default_factory=list)
    output: dict = field(default_factory=dict)

    def toml(self):
        """The sweep file's text."""
        adaptive = isinstance(self.replicates, Mapping)
        if not adaptive and (isinstance(self.replicates, bool) or not isinstance(
                getattr(self.replicates, "tolist", lambda: self.replicates)(), int)):
            raise TypeError(f"replicates={self.replicates!r}: an integer, or a dict of an adaptive rule "
                            "(min, max, step, targets: docs/CONFIG.md \"Adaptive replicates\")")
        head = {"name": self.name, "seed": self.seed}
        if not adaptive:
            head["replicates"] = self.replicates
        parts = [_table("sweep", head)]
        if adaptive:
            parts.append(_replicates_table(self.replicates))
        if self.model:
            parts.append(_table("model", self.model))
        if self.axes:
            parts.append(_table("axes", self.axes))
        parts += [_table("zip", z, array=True) for z in self.zips]
        if self.output:
            parts.append(_table("output", self.output))
        return "\n".join(parts)

    @classmethod
    def from_toml(cls, path):
        """The Sweep of the sweep file `path` (its [sweep], [model], [axes], [[zip]] and [output]
        tables as they are written): its `toml()` is the same sweep, with the same plan hash.
        Paths in it (model.input_path, model.model_folder) stay as written, relative to the
        folder of the sweep file that is run (the store's, when `run` writes it). A file that is not
        TOML raises ValueError naming it; a table or a [sweep] key a sweep file does not have
        raises ValueError naming it (docs/CONFIG.md "Tables")."""
        import tomllib
        path = Path(path)
        try:
            with open(path, "rb") as f:
                doc = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{path}: not a TOML sweep file: {e}") from None
        return cls._from_document(doc, str(path))

    @classmethod
    def from_store(cls, store):
        """The Sweep a store was made from (its canonical sweep, /config: `rcsweep info --json`),
        command-line overrides included: its plan hash is the store's, so `run(store)` resumes it.
        Every model parameter is spelled out (the canonical text gives defaults too). A file rcsweep
        refuses as a store raises SweepConfigError (exit 2) with rcsweep's message."""
        import tomllib
        proc = subprocess.run([rcsweep_bin(), "info", "--json", _arg_path(store)], capture_output=True, text=True,
                              errors="replace")
        _check(proc, "rcsweep info")
        config = json.loads(proc.stdout)["config"]
        return cls._from_document(tomllib.loads(config), f"{store} (/config)")

    @classmethod
    def _from_document(cls, doc, source):
        tables = {"sweep", "model", "axes", "zip", "output"}
        unknown = sorted(set(doc) - tables)
        if unknown:
            raise ValueError(f"{source}: table {unknown[0]!r} is not one of a sweep file's ({', '.join(sorted(tables))})")
        head = dict(doc.get("sweep", {}))
        extra = sorted(set(head) - {"name", "seed", "replicates"})
        if extra:
            raise ValueError(f"{source}: sweep.{extra[0]} is not a key of [sweep] (name, seed, replicates)")
        if "name" not in head:
            raise ValueError(f"{source}: sweep.name is missing")
        zips = doc.get("zip", [])
        if isinstance(zips, Mapping):  # [zip] written as one table
            zips = [zips]
        return cls(head["name"], seed=head.get("seed", 0), replicates=head.get("replicates", 1),
                   model=dict(doc.get("model", {})), axes=dict(doc.get("axes", {})), zips=[dict(z) for z in zips],
                   output=dict(doc.get("output", {})))

    def write(self, path):
        """Write the sweep file to `path`; returns it as a Path."""
        path = Path(path)
        path.write_text(self.toml())
        return path

    def _file_for(self, store, overwrite=False):
        """The sweep file beside `store` (its name with .toml), written by `_write_beside`."""
        return _write_beside(Path(store).with_suffix(".toml"), self.toml(), "sweep file", overwrite)

    def _planned(self, args):
        """`rcsweep plan` of the sweep without a store: the sweep file is a temporary, named as the
        sweep (NAME.toml) in a directory of its own, and the output names it NAME.toml, the file
        `run("NAME.h5")` writes beside the store, never the temporary (gone when this returns)."""
        name = self.name if isinstance(self.name, str) and _PLAIN_NAME.fullmatch(self.name) else "sweep"
        folder = tempfile.mkdtemp(prefix="rcsweep-plan-")
        sweep = Path(folder) / f"{name}.toml"
        try:
            sweep.write_text(self.toml())
            proc = subprocess.run(args(sweep), capture_output=True, text=True, errors="replace")
        finally:
            sweep.unlink(missing_ok=True)
            try:
                os.rmdir(folder)
            except OSError:
                pass
        here = os.path.join(folder, "")
        return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.replace(here, ""),
                                           proc.stderr.replace(here, ""))

    # -- plan --------------------------------------------------------------------------------------

    def plan_command(self, sweep_file, cores=None, store=None, *, ranks=None, threads=None, shard=None,
                     mem_per_rank=None, mem_per_node=None, overrides=None, args=(), **unknown):
        """The `rcsweep plan` command line (a list) for the sweep file `sweep_file`; the options
        are those of `plan`."""
        _reject_unknown("plan", unknown, _PLAN_OPTIONS)
        if ranks is not None:
            _positive("ranks", ranks)
            threads = threads or 1
            if cores is not None and int(cores) != int(ranks) * int(threads):
                raise ValueError(f"cores={cores} but ranks={ranks} x threads={threads}: give ranks or cores")
            cores = int(ranks) * int(threads)
        cmd = [rcsweep_bin(), "plan", _arg_path(sweep_file)]
        cmd += _positive("cores", cores) + _positive("threads", threads) + _shard(shard)
        cmd += _size("--mem-per-rank", mem_per_rank) + _size("--mem-per-node", mem_per_node)
        if store is not None:
            cmd += ["-o", _arg_path(store)]
        return cmd + _extra_args(args, _PLAN_OWNED) + _after_options(_overrides(overrides))

    def plan(self, cores=None, store=None, *, ranks=None, threads=None, shard=None, mem_per_rank=None,
             mem_per_node=None, overrides=None, args=(), overwrite_sweep_file=False, **unknown):
        """`rcsweep plan --json`: points, tasks, bundles, time and memory, and the layout. Returns a
        Plan. Without a store the plan reads a temporary sweep file, which its errors call NAME.toml
        (NAME the sweep's name: the file `run("NAME.h5")` writes beside the store), and its
        suggestion is that `run` call; with a store, the sweep file is written beside it and the
        suggested command names it.

        cores         cores to plan for (`--cores`; default: this machine's)
        store         a store: what `run(store)` would do with it (`-o`: start, resume, grow or
                      refuse it); the sweep file is written next to it, as `run` does
        ranks         plan this layout: `ranks` ranks of `threads` threads (default 1), i.e.
                      `--cores ranks*threads --threads threads` (instead of `cores`)
        threads       OpenMP threads per rank (`--threads`): plan this layout instead of choosing one
        shard         (i, n) or "i/n": plan only that shard (`--shard`)
        mem_per_rank  memory of one rank, "4G" or bytes (`--mem-per-rank`; refused, exit 2, if the
                      largest bundle does not fit)
        mem_per_node  memory of one node, "256G" or bytes (`--mem-per-node`)
        overrides     {KEY: value} or ["KEY=VALUE", ...] applied to the sweep file
                      (docs/CONFIG.md "Overrides on the command line"), passed after `--`; anything
                      else (a KEY that is not a dotted key path, e.g. "--cores=4") raises ValueError
        args          more `rcsweep plan` options, a list passed as given, before `--`; -o/--output
                      (store=), --emit (submit) and `--` raise ValueError
        overwrite_sweep_file  with a store: replace a NAME.toml beside it that this module did not
                      write (or that was edited since), or a symbolic link there (not its target);
                      without it such a file is kept and FileExistsError names it
        """
        _reject_unknown("plan", unknown, _PLAN_OPTIONS + ("overwrite_sweep_file",))

        def command(sweep):
            return self.plan_command(sweep, cores, store, ranks=ranks, threads=threads, shard=shard,
                                     mem_per_rank=mem_per_rank, mem_per_node=mem_per_node, overrides=overrides,
                                     args=args)

        def json_command(sweep):  # --json right after the sweep file, before any `--`
            cmd = command(sweep)
            return cmd[:3] + ["--json"] + cmd[3:]

        if store is not None:
            cmd = json_command(Path(store).with_suffix(".toml"))  # every argument checked before any file is written
            self._file_for(store, overwrite_sweep_file)
            proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        else:
            command("sweep.toml")
            proc = self._planned(json_command)
        _check(proc, "rcsweep plan")
        try:
            data = json.loads(proc.stdout)
        except ValueError as e:
            raise RcsweepError("rcsweep plan --json", proc.returncode, f"not one JSON object ({e}):\n"
                               f"{proc.stdout[:2000]}\n{proc.stderr}") from None
        return Plan(data, temporary=store is None)

    # -- run ---------------------------------------------------------------------------------------

    def run_command(self, store, ranks=1, *, threads=None, blas_threads=None, gemm_library=None, mpiexec=None,
                    overrides=None,
                    resume=False, overwrite=False, shard=None, reuse=None, retry_failed=False,
                    fail_on_diverged=False, time_limit=None, grace=None, mem_per_rank=None, dump_weights=False,
                    progress=False, quiet=None, args=(), **unknown):
        """The `rcsweep run` command line (a list) that `run` starts, with the same options; the
        sweep file it names is `store` with the suffix .toml (written by `run`). The overrides come
        last, after `--`."""
        _reject_unknown("run", unknown, _RUN_OPTIONS)
        return self._run_command(store, ranks, threads=threads, blas_threads=blas_threads,
                                 gemm_library=gemm_library, mpiexec=mpiexec, overrides=overrides, resume=resume, overwrite=overwrite, shard=shard, reuse=reuse,
                                 retry_failed=retry_failed, fail_on_diverged=fail_on_diverged,
                                 time_limit=time_limit, grace=grace, mem_per_rank=mem_per_rank,
                                 dump_weights=dump_weights, progress=progress, quiet=quiet, args=args)

    def _run_command(self, store, ranks, *, threads, blas_threads, gemm_library, mpiexec, overrides, resume,
                     overwrite, shard,
                     reuse, retry_failed, fail_on_diverged, time_limit, grace, mem_per_rank, dump_weights, progress,
                     quiet, args, events=False):
        """run_command's list; with `events`, the run's events as JSON lines on stdout (`--progress
        json`, the notes stay text on stderr) whether or not it shows progress."""
        if resume and overwrite:
            raise ValueError("resume=True and overwrite=True exclude each other")
        if quiet is not None:
            if progress and quiet:
                raise ValueError("progress=True and quiet=True exclude each other")
            progress = not quiet
        store = Path(store)
        cmd = [rcsweep_bin(), "run", _arg_path(store.with_suffix(".toml")), "-o", _arg_path(store)]
        tail = _extra_args(args, _RUN_OWNED) + _after_options(_overrides(overrides))
        _positive("ranks", ranks)
        if ranks > 1 or mpiexec is not None:
            launcher = mpiexec if mpiexec is not None else mpiexec_command(ranks, threads or 1)
            if isinstance(launcher, (list, tuple)):
                if any(" " in str(a) for a in launcher):
                    raise ValueError(f"mpiexec={launcher!r}: rcsweep splits the command at spaces, "
                                     "so no argument may hold one")
                launcher = " ".join(map(str, launcher))
            cmd += ["-n", str(int(ranks)), "--mpiexec", str(launcher)]
        cmd += _positive("threads", threads) + _positive("blas_threads", blas_threads)
        if gemm_library is not None:
            if gemm_library not in ("auto", "openblas", "blis"):
                raise ValueError(f"gemm_library={gemm_library!r}: 'auto', 'openblas' or 'blis'")
            cmd += ["--gemm-library", gemm_library]
        if resume:
            cmd.append("--resume")
        if overwrite:
            cmd.append("--overwrite")
        cmd += _shard(shard)
        for old in _paths(reuse):
            cmd += ["--reuse", _arg_path(old)]
        if retry_failed:
            cmd.append("--retry-failed")
        if fail_on_diverged:
            cmd.append("--fail-on-diverged")
        cmd += _time_limit(time_limit)
        if grace is not None:
            cmd += ["--grace", repr(float(grace))]
        cmd += _size("--mem-per-rank", mem_per_rank)
        if dump_weights:
            cmd.append("--dump-weights")
        if events:
            cmd += ["--progress", "json"]
        elif not progress:
            cmd.append("-q")
        return cmd + tail

    def run(self, store, ranks=1, *, threads=None, blas_threads=None, gemm_library=None, mpiexec=None,
            overrides=None,
            resume=False, overwrite=False, shard=None, reuse=None, retry_failed=False,
            fail_on_diverged=False, time_limit=None, grace=None, mem_per_rank=None, dump_weights=False,
            progress=False, quiet=None, args=(), on_event=None, load=True, overwrite_sweep_file=False, **unknown):
        """Run the sweep into `store` (`rcsweep run`, the sweep file written next to it); returns
        the store loaded (an xarray.Dataset; `load=False`: its Path). A store of this sweep is
        resumed, one of an earlier version grown.

        ranks         MPI ranks: `-n ranks`, rcsweep starts mpiexec itself (Ctrl-C stops it cleanly)
        threads       OpenMP threads per rank (`--threads`; default OMP_NUM_THREADS, else 1); the
                      store is bitwise the same in every ranks x threads layout
        blas_threads  BLAS threads per OpenMP thread (`--blas-threads`, default 1; above 1 needs
                      threads=1 and results depend on the layout)
        gemm_library  which library multiplies the products (`--gemm-library`): "auto" (default:
                      BLIS for the sizes `rcsweep calibrate` measured it faster at, else
                      OpenBLAS), "openblas" or "blis"; recorded per task with the BLAS kernel
        mpiexec       the launcher for ranks (`--mpiexec`), a string split at spaces or a list, used
                      as given; default $RCSWEEP_MPIEXEC, else mpiexec, with --allow-run-as-root as
                      root and --oversubscribe for more ranks x threads than cores
        overrides     {KEY: value} (the value written as TOML) or ["KEY=VALUE", ...] (the command
                      line's syntax) applied to the sweep file, e.g. {"model.T": 256,
                      "axes.lambda": [0, 0.5]}; the store records them (docs/CONFIG.md "Overrides");
                      passed after `--`; anything else (e.g. "--overwrite=true") raises ValueError
        resume        require an existing store and continue it (`--resume`)
        overwrite     replace an existing store (`--overwrite`)
        shard         (i, n) or "i/n": only the tasks with id % n == i (`--shard`; adaptive
                      replicates: the points), into their own store for `rcsweep merge`
        reuse         an older store or a list of them (`--reuse`, repeated): finished results
                      that fit are copied instead of computed
        retry_failed  run the failed, diverged and vanished tasks of the store again (`--retry-failed`)
        fail_on_diverged  exit 3 (and warn) when some task diverged or vanished (`--fail-on-diverged`)
        time_limit    stop cleanly before this wall time (`--time-limit`): a number or timedelta of
                      seconds, or a string as the command line takes it ("90m", "2h", "1:30:00")
        grace         seconds running tasks get to finish after a stop signal (`--grace`, default 30)
        mem_per_rank  memory budget of one rank, "4G" or bytes (`--mem-per-rank`): a sweep that
                      cannot fit is refused before any work
        dump_weights  write every done task's X_l and weights into /dump (`--dump-weights`)
        progress      show a progress bar of the run's work with rcsweep's ETA (tqdm's: a widget in a
                      notebook; a line on stderr without tqdm) and its notes on this process's stderr, as
                      they come; default: quiet (`-q`). `quiet=False` is the same as progress=True
        overwrite_sweep_file  replace a NAME.toml beside the store that this module did not write (or
                      that was edited since), or a symbolic link there (not its target); without it
                      such a file is kept and FileExistsError names it, before anything runs
        on_event      a function called with each event of the run as a dict ({"event": "progress",
                      "fraction": 0.4, ...}: `rcsweep run --progress json`, docs/EVENTS.md), in a reader
                      thread of its own, as they come (a slow one gets them late, never holding
                      the run); an exception it raises (any) is raised by run when rcsweep ends,
                      and it gets no more events (the pipes are still read to their end)
        args          more `rcsweep run` options, a list passed as given, before `--`; an option
                      that a keyword gives (-o, -n, --mpiexec, --overwrite, --resume, -q,
                      --progress) and `--` raise ValueError: give the keyword
        load          return the loaded Dataset (default) or, False, the store's Path

        Exit codes: 0 (every task ran to an outcome: done, diverged or vanished) and 3 (finished,
        but some tasks failed) return the store, with a TaskOutcomeWarning counting failed and
        pending tasks (`rcsweep info --json`) when there are any; 2 raises SweepConfigError (the engine's messages with their keys); 4
        RunStopped (stopped early by a signal or the time limit: the same call resumes); 1 or
        another code RcsweepError. An unknown keyword raises TypeError.
        """
        _reject_unknown("run", unknown, _RUN_OPTIONS + ("on_event", "load", "overwrite_sweep_file"))
        store = Path(store)
        show = bool(progress) if quiet is None else not quiet
        cmd = self._run_command(store, ranks, threads=threads, blas_threads=blas_threads,
                                gemm_library=gemm_library, mpiexec=mpiexec, overrides=overrides, resume=resume, overwrite=overwrite, shard=shard, reuse=reuse,
                                retry_failed=retry_failed, fail_on_diverged=fail_on_diverged,
                                time_limit=time_limit, grace=grace, mem_per_rank=mem_per_rank,
                                dump_weights=dump_weights, progress=progress, quiet=quiet, args=args,
                                events=show or on_event is not None)
        self._file_for(store, overwrite_sweep_file)
        bar = ProgressBar() if show else None
        handlers = [h for h in (bar, on_event) if h is not None]
        try:
            proc = _run_engine(cmd, echo=show, handlers=handlers)
        finally:
            if bar is not None:
                bar.close()
        return _finished(proc, "rcsweep run", store, want_load=load, pending=shard is None,
                         outcomes=fail_on_diverged)

    # -- submit ------------------------------------------------------------------------------------

    def submit(self, store, nodes=1, cores=None, hours=None, sbatch_args=(), *, shards=None, threads=None,
               mem_per_rank=None, mem_per_node=None, overrides=None, account=None, partition=None, qos=None, directives=(),
               exclusive=False, launcher=None, mpi=None, srun_mpi=None, setup=None, run_args=(),
               overwrite_sweep_file=False, **unknown):
        """Submit the sweep to Slurm: the job script of `rcsweep plan --emit slurm` (sized for
        `nodes` nodes of `cores` cores, jobs of at most `hours`), written next to the store and
        passed to sbatch with the sweep file and the store. Returns a Job.

        shards        an array of exactly this many elements (`--shards`), whatever the tasks'
                      lengths, with its merge job (which its first element submits); default: one
                      job, or the fewest elements whose jobs fit `hours`. `Job.wait` waits for the
                      elements and the merge

        threads, mem_per_rank, mem_per_node, overrides   as for `plan` (the overrides are written
                      into the script's `rcsweep run` command)
        account, partition, qos, directives (a list of "#SBATCH" lines' text), exclusive,
        launcher ("mpiexec" or "srun"), mpi ("openmpi", "mpich", "intel"), srun_mpi, setup (a file
        of `module load` lines)   `plan --emit`'s options of the same names (docs/CLUSTER.md)
        run_args      more `rcsweep run` options for the job (its RCSWEEP_ARGS), e.g.
                      ["--retry-failed"], ["--mem-per-rank", "3G"]; those of run's keywords (-o,
                      -n, --mpiexec, --overwrite, ...) and `--` raise ValueError
        sbatch_args   more sbatch options, a list passed as given
        overwrite_sweep_file  replace NAME.toml and NAME.slurm.sh beside the store even when this
                      module did not write them (or they were edited since); without it such a
                      file is kept and FileExistsError names it, before anything runs
        """
        _reject_unknown("submit", unknown, _SUBMIT_OPTIONS + ("overwrite_sweep_file",))
        store = Path(store).resolve()
        sweep = store.with_suffix(".toml")
        cmd = [rcsweep_bin(), "plan", _arg_path(sweep), "--emit", "slurm", *_positive("nodes", nodes)]
        cmd += _positive("cores", cores) + _positive("threads", threads) + _positive("shards", shards)
        if hours:
            cmd += ["--hours", str(hours)]
        cmd += _size("--mem-per-rank", mem_per_rank) + _size("--mem-per-node", mem_per_node)
        for flag, value in (("--account", account), ("--partition", partition), ("--qos", qos),
                            ("--launcher", launcher), ("--mpi", mpi), ("--srun-mpi", srun_mpi)):
            if value is not None:
                cmd += [flag, str(value)]
        if isinstance(directives, str):
            directives = [directives]
        cmd += [f"--directive={d}" for d in directives]
        if exclusive:
            cmd.append("--exclusive")
        if setup is not None:
            cmd += ["--setup", str(Path(setup).resolve())]
        cmd += _after_options(_overrides(overrides))
        env = None
        extra = _extra_args(run_args, _RUN_OWNED, "run_args")
        if extra:
            if any(" " in a for a in extra):
                raise ValueError(f"run_args={run_args!r}: the job script splits them at spaces")
            env = {**os.environ, "RCSWEEP_ARGS": " ".join(extra)}
        if isinstance(sbatch_args, (str, bytes)):
            raise TypeError(f"sbatch_args={sbatch_args!r}: give a list of arguments, e.g. [\"--hold\"]")
        script = store.with_suffix(".slurm.sh")
        _write_beside(script, None, "job script", overwrite_sweep_file)  # refused before anything is written
        self._file_for(store, overwrite_sweep_file)
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        _check(proc, "rcsweep plan --emit slurm")
        _write_beside(script, proc.stdout, "job script", overwrite_sweep_file)
        sub = subprocess.run(["sbatch", "--parsable", *map(str, sbatch_args), str(script), str(sweep), str(store)],
                             capture_output=True, text=True, errors="replace", cwd=store.parent, env=env)
        _check(sub, "sbatch")
        elements = re.search(r"^#SBATCH --array=0-(\d+)$", proc.stdout, re.M)
        return Job(sub.stdout.strip().split(";")[0], store, script, int(elements.group(1)) + 1 if elements else 1)


@dataclass
class Plan:
    """What `rcsweep plan --json` says of a sweep (docs/USAGE.md "The plan as JSON"): `data` is its
    JSON object, every number the plan's text gives; the main ones are properties. `text` (and
    str()) is the plan as `rcsweep plan` prints it, with what a run would do with the store.

    `suggested` is the layout as keyword arguments of `Sweep.run` ({"ranks": 2, "threads": 1});
    `command` the suggested command line (a list), which names the sweep file beside the store that
    `plan(store=...)` wrote. Planned without a store (the sweep file a temporary, gone), there is no
    file to name: `command` is None and the text suggests `sweep.run("NAME.h5", ranks=...)`, which
    writes NAME.toml beside the store."""
    data: dict
    temporary: bool = False

    @property
    def text(self):
        text = self.data["text"]
        if self.temporary:
            line = self.data["suggested"]["line"]
            kwargs = "".join(f", {k}={v}" for k, v in self.suggested.items() if k == "ranks" or v != 1)
            store = self.data["suggested"]["argv"][-1]
            note = line[line.rindex("   ("):] if "   (" in line else ""
            text = text.replace(line, f"suggested     sweep.run({store!r}{kwargs}){note}")
        if self.data.get("store"):
            text += "store         " + self.data["store"]["text"] + "\n"
        return text

    @property
    def name(self):
        return self.data["name"]

    @property
    def plan_hash(self):
        return self.data["plan_hash"]

    @property
    def tasks(self):
        """The sweep's tasks (with adaptive replicates: every point at max, as the store counts)."""
        return self.data["tasks"]

    @property
    def tasks_min(self):
        """Tasks at least (adaptive replicates: every point at min; else `tasks`)."""
        return self.data["tasks_min"]

    @property
    def tasks_max(self):
        """Tasks at most (adaptive replicates: every point at max; else `tasks`)."""
        return self.data["tasks_max"]

    @property
    def adaptive(self):
        return self.data["adaptive"] is not None

    @property
    def points(self):
        return self.data["points"]

    @property
    def bundles(self):
        return self.data["bundles"]

    @property
    def ranks(self):
        """Ranks per node of the layout."""
        return self.data["layout"]["ranks_per_node"]

    @property
    def threads(self):
        """OpenMP threads per rank of the layout."""
        return self.data["layout"]["threads"]

    @property
    def layout(self):
        """The layout and why: "2 ranks x 1 thread per node: one rank per core: ..."."""
        return f"{self.data['layout']['text']} per node: {self.data['layout']['reason']}"

    @property
    def core_seconds(self):
        """One core's estimated seconds for the sweep (adaptive replicates: at most)."""
        return self.data["work"]["core_seconds"]

    @property
    def peak_bytes(self):
        """A rank's estimated peak resident memory in the layout."""
        return self.data["memory"]["peak_bytes"]

    @property
    def suggested(self):
        """The layout as keyword arguments of `Sweep.run`: {"ranks": N, "threads": T}."""
        return {"ranks": self.data["layout"]["ranks"], "threads": self.data["layout"]["threads"]}

    @property
    def command(self):
        """The suggested command line (a list), or None when it would name a temporary sweep file."""
        return None if self.temporary else list(self.data["suggested"]["argv"])

    @property
    def warnings(self):
        return list(self.data["warnings"])

    @property
    def store(self):
        """With a store: what a run would do with it (start, resume, grow or refuse it)."""
        return self.data["store"]["text"] if self.data.get("store") else None

    @property
    def store_action(self):
        """With a store: "start", "resume", "grow" or "refuse"."""
        return self.data["store"]["action"] if self.data.get("store") else None

    def __str__(self):
        return self.text


@dataclass
class Job:
    """A submitted Slurm job writing `store`; with `shards` > 1 an array of that many elements,
    whose first element to start submits the merge job (`plan --emit`'s built-in merge)."""
    job_id: str
    store: Path
    script: Path
    shards: int = 1

    def _records(self, job_id):
        """[(JobState, exit code of the batch script or None)] of a job or of each array element,
        from scontrol, else sacct."""
        p = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True)
        out = []
        for line in p.stdout.splitlines():
            state = re.search(r"JobState=(\S+)", line)
            code = re.search(r"\bExitCode=(\d+):(\d+)", line)
            if state:
                out.append((state.group(1), int(code.group(1)) if code else None))
        if out:
            return out
        try:
            p = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,ExitCode"],
                               capture_output=True, text=True)
        except FileNotFoundError:
            return [("UNKNOWN", None)]
        out = [(m.group(1), int(m.group(2))) for m in re.finditer(r"^(\w+)[^|]*\|(\d+):(\d+)", p.stdout, re.M)]
        return out or [("UNKNOWN", None)]

    def _slurm(self, job_id=None):
        """(JobState, exit code) of the job (an array: its first element)."""
        return self._records(job_id or self.job_id)[0]

    def merge_job(self):
        """An array's merge job id, as its first element logged it beside the store ("submitted the
        merge job N"); None for one job, or before an element has started."""
        if self.shards <= 1:
            return None
        for log in sorted(Path(self.store).parent.glob(f"rcsweep-{self.job_id}_*.out")):
            m = re.search(r"submitted the merge job (\d+)", log.read_text(errors="replace"))
            if m:
                return m.group(1)
        return None

    def state(self):
        """Slurm's JobState (PENDING, RUNNING, COMPLETED, FAILED, ...); of an array, its merge job's
        once submitted, else its first element's."""
        merge = self.merge_job()
        return self._slurm(merge)[0] if merge else self._slurm()[0]

    @staticmethod
    def _wait_queue(job_id, end, timeout, poll):
        while True:
            q = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True)
            if q.returncode == 0 and not q.stdout.strip():
                return
            if end is not None and time.monotonic() > end:
                raise TimeoutError(f"job {job_id} still queued after {timeout} s")
            time.sleep(poll)

    def _ended(self, what, state, code, load):
        if state in ("COMPLETED", "UNKNOWN") or (state == "FAILED" and code == 3):
            return _finished(subprocess.CompletedProcess([], 0, "", ""), what, self.store, want_load=load)
        message = f"Slurm state {state}; see its output next to {self.store}"
        if code == 4:
            raise RunStopped(what, 4, f"stopped early (signal or time limit); submit again to resume. {message}",
                             self.store)
        raise RcsweepError(what, code if code else state, message)

    def wait(self, timeout=None, poll=2.0, load=True):
        """Wait until the job (and its requeues) has left the queue; return the store loaded
        (`load=False`: its Path). A job that completed, or whose rcsweep exited 3 (finished with
        some tasks failed), returns it, warning with the counts (as `Sweep.run`); exit
        code 4 (stopped early, e.g. out of requeues) raises RunStopped; any other end RcsweepError.
        An array: every element, then its merge job, which writes the store."""
        end = None if timeout is None else time.monotonic() + timeout
        self._wait_queue(self.job_id, end, timeout, poll)
        if self.shards <= 1:
            return self._ended(f"job {self.job_id}", *self._slurm(), load)
        for state, code in self._records(self.job_id):
            if state != "COMPLETED" and not (state == "FAILED" and code == 3):
                self._ended(f"array job {self.job_id}", state, code, False)  # raises
        merge = self.merge_job()
        if merge is None:
            raise RcsweepError(f"array job {self.job_id}", "no merge",
                               f"no element logged the merge job it submitted (rcsweep-{self.job_id}_*.out next to "
                               f"{self.store}): merge the shards with jobs/slurm/merge_job.sh")
        self._wait_queue(merge, end, timeout, poll)
        return self._ended(f"merge job {merge} of array {self.job_id}", *self._slurm(merge), load)


def _echo(sink, text):
    """Write `text` to `sink` as far as it can take it (characters its encoding lacks replaced);
    False when it takes nothing any more (closed)."""
    try:
        try:
            sink.write(text)
        except UnicodeEncodeError:
            encoding = getattr(sink, "encoding", None) or "ascii"
            sink.write(text.encode(encoding, "replace").decode(encoding, "replace"))
        sink.flush()
        return True
    except (OSError, ValueError, AttributeError, UnicodeError):
        return False


def _run_engine(cmd, echo=False, handlers=()):
    """Run rcsweep; capture stdout and stderr (bytes that are not UTF-8 read as U+FFFD), also
    copied to sys.stdout/sys.stderr as they come when `echo`. With `handlers`, stdout carries events
    (`--progress json`): each handler is called with each event as a dict, in order, from a thread
    of its own, so a slow handler gets the events late but never holds the pipe (every event is
    delivered before this returns); the other lines are echoed. The first exception a handler
    raises (any, KeyboardInterrupt included) is raised when rcsweep ends; that handler gets no more
    events. Whatever the bytes, the handlers and the sinks do, both pipes are read to their end, so
    rcsweep never waits on a full pipe. Progress events come every second (RCSWEEP_PROGRESS_INTERVAL unless set). An
    interrupt (KeyboardInterrupt: Ctrl-C, a notebook's stop button) stops rcsweep cleanly (it keeps
    every finished task; exit 4) before it is raised; a second one at once."""
    env = None
    if handlers and "RCSWEEP_PROGRESS_INTERVAL" not in os.environ:
        env = dict(os.environ, RCSWEEP_PROGRESS_INTERVAL="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    chunks = {"out": [], "err": []}
    failures = []
    live = list(handlers)
    waiting = collections.deque()  # events read, not yet given to the handlers; None: no more
    arrived = threading.Condition()

    def deliver():
        """Give each event to the handlers, in order; an exception is recorded, never raised."""
        while True:
            with arrived:
                while not waiting:
                    arrived.wait()
                ev = waiting.popleft()
            if ev is None:
                return
            for h in list(live):
                try:
                    h(ev)
                except BaseException as e:  # raised in the caller's thread once rcsweep ends
                    failures.append(e)
                    live.remove(h)

    def queue(ev):
        with arrived:
            waiting.append(ev)
            arrived.notify()

    def handle(text, sink, events):
        """Give one piece of output to the handlers' queue or its sink."""
        ev = parse_event(text) if events else None
        if ev is not None:
            queue(ev)
        elif echo_ok[sink]:
            echo_ok[sink] = _echo(sink, text)

    echo_ok = {sys.stdout: echo, sys.stderr: echo}

    def pump(stream, key, sink, events):
        """Read `stream` to its end: by lines for events, else as it comes."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            while True:
                try:
                    data = stream.readline(1 << 20) if events else stream.read1(65536)
                except (OSError, ValueError):
                    break
                if not data:
                    break
                text = decoder.decode(data)
                chunks[key].append(text)
                try:
                    handle(text, sink, events)
                except BaseException as e:
                    failures.append(e)
        finally:
            try:  # whatever stopped the loop, nothing is left in the pipe
                while stream.read(65536):
                    pass
            except (OSError, ValueError):
                pass
            stream.close()
            if events:
                queue(None)

    readers = [threading.Thread(target=pump, args=(proc.stdout, "out", sys.stdout, bool(handlers)), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, "err", sys.stderr, False), daemon=True)]
    if handlers:
        readers.append(threading.Thread(target=deliver, daemon=True))
    for r in readers:
        r.start()
    try:
        proc.wait()
    except KeyboardInterrupt:
        # A clean stop, as rcsweep's own first Ctrl-C (SIGUSR1 does not count as a second stop
        # signal when a terminal's Ctrl-C reached rcsweep too); interrupted again: stop at once.
        proc.send_signal(signal.SIGUSR1)
        try:
            proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            proc.wait()
            raise
        raise KeyboardInterrupt(f"rcsweep stopped (exit {proc.returncode}): every finished task is kept; "
                                "the same call resumes the store") from None
    finally:
        for r in readers:
            r.join()
    if failures:
        raise failures[0]
    return subprocess.CompletedProcess(cmd, proc.returncode, "".join(chunks["out"]), "".join(chunks["err"]))


def task_counts(store):
    """The store's task counts from `rcsweep info --json`: {"pending", "done", "failed",
    "diverged", "vanished", "not_needed"}; None when rcsweep cannot read it."""
    proc = subprocess.run([rcsweep_bin(), "info", "--json", _arg_path(store)], capture_output=True, text=True,
                          errors="replace")
    if proc.returncode != 0:
        return None
    try:
        return dict(json.loads(proc.stdout)["tasks"])
    except (ValueError, KeyError, TypeError):
        return None


def _finished(proc, what, store, want_load=True, pending=True, outcomes=False):
    """The end of a run: exit 0 or 3 return the store (loaded), warning with its counts of failed
    and (unless `pending` is False: a shard's store, whose other shards' tasks are pending)
    pending tasks, and with `outcomes` (fail_on_diverged) diverged and vanished ones; other codes
    raise."""
    if proc.returncode == 4:
        raise RunStopped(what, 4, proc.stderr + "\nstopped early (a signal or the time limit): the store keeps "
                         "every finished task; run the same again to resume", store)
    if proc.returncode not in (0, 3):
        _check(proc, what)
    counts = task_counts(store)
    if counts is None:
        if proc.returncode == 3:
            warnings.warn(TaskOutcomeWarning(f"{store}: some tasks failed (see ds.status and ds.message)"),
                          stacklevel=3)
    else:
        kinds = ("diverged", "vanished", "failed", "pending") if outcomes else ("failed", "pending")
        parts = outcome_words({k: counts.get(k, 0) for k in kinds if pending or k != "pending"})  # by name
        if parts:
            total = sum(counts.values()) - counts.get("not_needed", 0)
            hint = "; run again with retry_failed=True to rerun the failed tasks" if counts.get("failed") else ""
            warnings.warn(TaskOutcomeWarning(
                f"{store}: finished with {parts} of {total} tasks (ds.status, ds.message){hint}",
                counts), stacklevel=3)
    return load(store) if want_load else Path(store)


def _check(proc, what):
    if proc.returncode == 2:
        raise SweepConfigError(what, 2, proc.stderr)
    if proc.returncode != 0:
        raise RcsweepError(what, proc.returncode, proc.stderr)
