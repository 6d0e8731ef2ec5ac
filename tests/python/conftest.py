"""Shared fixtures of the Python toolkit tests (loader, rcsweep-plot, figures, report).

`run_sweep(toml, ranks=1, args=(), ok=(0, 3))` runs `$RCSWEEP_BIN run` (under `$MPIEXEC` when
ranks > 1) on a sweep file given as a path or as TOML text, into a fresh store under pytest's tmp
dir, and returns the store's path. Exit code 3 (some tasks diverged) is accepted by default; pass
`ok=(4,)` for a `--time-limit` run. Identical calls within a session share one store (do not
modify it). The toolkit (scripts/) is importable as `rcsweep_tools`.
"""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("RCSWEEP_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BIN = os.environ.get("RCSWEEP_BIN", str(SOURCE / "build" / "rcsweep"))
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
SCRIPTS = SOURCE / "scripts"
PLOT = SCRIPTS / "rcsweep-plot"
PYTHON = "/usr/bin/python3"
sys.path.insert(0, str(SCRIPTS))
os.environ.setdefault("MPLBACKEND", "Agg")


def mpi_prefix(ranks):
    if ranks <= 1:
        return []
    cmd = [MPIEXEC, "-n", str(ranks), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


@pytest.fixture(scope="session")
def run_sweep(tmp_path_factory):
    cache = {}

    def run(toml, ranks=1, args=(), ok=(0, 3), timeout=300):
        text = Path(toml).read_text() if isinstance(toml, Path) or (
            isinstance(toml, str) and "\n" not in toml and toml.endswith(".toml")) else toml
        key = hashlib.sha1(repr((text, ranks, tuple(map(str, args)), tuple(ok))).encode()).hexdigest()[:12]
        if key in cache:
            return cache[key]
        d = tmp_path_factory.mktemp(f"sweep_{key}")
        sweep = d / "sweep.toml"
        if isinstance(toml, (str, Path)) and str(toml).endswith(".toml") and "\n" not in str(toml):
            sweep = Path(toml).resolve()  # keep its folder: input_path is relative to it
        else:
            sweep.write_text(text)
        out = d / "store.h5"
        cmd = mpi_prefix(ranks) + [BIN, "run", str(sweep), "-o", str(out), "-q", *map(str, args)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        assert proc.returncode in ok, f"{cmd} -> {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        cache[key] = out
        return out

    return run


def plot_cli(*args, timeout=120):
    """Run scripts/rcsweep-plot with Debian's python; CompletedProcess with text output."""
    return subprocess.run([PYTHON, str(PLOT), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "MPLBACKEND": "Agg"})


_plot_module = None


def plot_main(*args):
    """rcsweep-plot's main() in this process (the same code as the command, without the ~2-5 s
    of a new interpreter importing matplotlib, xarray and scipy): (exit code, stdout, stderr)."""
    import contextlib
    import importlib.machinery
    import importlib.util
    import io

    global _plot_module
    if _plot_module is None:
        loader = importlib.machinery.SourceFileLoader("rcsweep_plot", str(PLOT))
        spec = importlib.util.spec_from_loader("rcsweep_plot", loader)
        _plot_module = importlib.util.module_from_spec(spec)
        loader.exec_module(_plot_module)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = _plot_module.main([str(a) for a in args])
        except SystemExit as e:  # argparse usage errors
            code = e.code
    return code, out.getvalue(), err.getvalue()


def drawn_by_rcsweep_plot(monkeypatch, *args):
    """rcsweep-plot's main() on `args` (exit code, stderr) and the Figure it saved (None if none)."""
    from rcsweep_tools import plot_cli

    made, build = [], plot_cli.build

    def keep(*a, **kw):
        made.append(build(*a, **kw))
        return made[-1]

    monkeypatch.setattr(plot_cli, "build", keep)
    code, _, stderr = plot_main(*args)
    return code, stderr, (made[0] if made else None)


def texts_outside_the_figure(fig):
    """The visible texts of a drawn figure (titles, labels, legends, caption; tick labels only where
    drawn, within the axis' view) whose window extent leaves the figure's box, with their extents:
    none when every text fits."""
    from rcsweep_tools.facet import drawn_tick_labels

    fig.draw_without_rendering()
    renderer, box = fig._get_renderer(), fig.bbox
    axes = [axis for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)]
    ticks = {id(label) for axis in axes for tick in [*axis.majorTicks, *axis.minorTicks]
             for label in (tick.label1, tick.label2)}
    texts = [t for t in fig.findobj(lambda o: hasattr(o, "get_text") and hasattr(o, "get_window_extent"))
             if id(t) not in ticks] + [t for axis in axes for t in drawn_tick_labels(axis)]
    out = []
    for t in texts:
        if not t.get_visible() or not isinstance(t.get_text(), str) or not t.get_text().strip():
            continue
        e = t.get_window_extent(renderer)
        if e.x0 < box.x0 - 0.5 or e.x1 > box.x1 + 0.5 or e.y0 < box.y0 - 0.5 or e.y1 > box.y1 + 0.5:
            out.append((t.get_text(), e.extents.round(1).tolist()))
    return out
