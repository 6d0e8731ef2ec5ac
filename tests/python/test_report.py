"""scripts/reproduce.sh and the HTML report (scripts/rcsweep_tools/report.py).

reproduce.sh runs three small registered sweeps (the real jobs/examples files of ls-fig4, ls-thm41
and dong-fig2, about a second each) on 2 MPI ranks, draws them and writes the report; a second run
finds the stores up to date and does not run them again; a changed sweep file replaces its store;
bad arguments exit 2 with a message. The page is opened in headless Chromium: the DOM after load
(every <img> marked with its naturalWidth by the page's script) shows each figure loaded at the
PNG's own width, and a screenshot is not blank; a page with a deleted PNG shows up as broken, so
the check can fail."""
import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import h5py
import pytest

from conftest import BIN, MPIEXEC, PYTHON, SCRIPTS, SOURCE

from rcsweep_tools import report
from rcsweep_tools.figures import FIGURES

REPRODUCE = SCRIPTS / "reproduce.sh"
PICKED = ["ls-fig4", "ls-thm41", "dong-fig2"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def reproduce(*args, timeout=600):
    env = {**os.environ, "RCSWEEP_BIN": BIN, "MPIEXEC": MPIEXEC, "MPLBACKEND": "Agg"}
    return subprocess.run(["bash", str(REPRODUCE), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def png_size(path):
    data = Path(path).read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", data[16:24])


def chromium(*args, timeout=120):
    assert CHROMIUM, "headless Chromium is needed (Debian package chromium; scripts/install_deps.sh installs it)"
    with tempfile.TemporaryDirectory() as profile:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--virtual-time-budget=10000", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def dom_images(index):
    """{figure name: natural width} of every <img class="figure"> and the #image-status attributes."""
    p = chromium("--dump-dom", Path(index).resolve().as_uri())
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    widths = {}
    for tag in re.findall(r"<img [^>]*>", dom):
        src = re.search(r'src="figures/([^"]+)\.png"', tag).group(1)
        w = re.search(r'data-natural-width="(\d+)"', tag)
        widths[src] = int(w.group(1)) if w else None  # None: the load script never ran
    status = re.search(r'<span id="image-status" data-loaded="(\d*)" data-total="(\d+)"', dom)
    return widths, (status.group(1), status.group(2)) if status else None


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """reproduce.sh with the real sweep files of PICKED, copied so that a test may change one."""
    base = tmp_path_factory.mktemp("reproduce")
    sweeps = base / "sweeps"
    sweeps.mkdir()
    for name in PICKED:
        shutil.copy(SOURCE / "jobs" / "examples" / FIGURES[name].sweep, sweeps)
    out, rep = base / "out", base / "report"
    p = reproduce("--sweeps", sweeps, "-o", out, "--report", rep, ",".join(PICKED), 2)
    assert p.returncode == 0, p.stdout + p.stderr
    return {"base": base, "sweeps": sweeps, "out": out, "report": rep, "first": p}


def test_reproduce_runs_and_draws(made):
    for name in PICKED:
        sweep = FIGURES[name].sweep
        store = made["out"] / (Path(sweep).stem + ".h5")
        with h5py.File(store, "r") as f:
            assert f.attrs["finished"] and f.attrs["mpi_ranks"] == 2
            assert (f["tasks"]["status"][...] != 0).all()
        w, h = png_size(made["out"] / f"{name}.png")
        assert w > 300 and h > 200
    assert "up to date" not in made["first"].stdout


def test_second_run_skips_up_to_date_stores(made):
    store = made["out"] / "ls_thm41.h5"
    before = store.stat().st_mtime_ns
    p = reproduce("--sweeps", made["sweeps"], "-o", made["out"], "ls-thm41", 2)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("is up to date") == 1, p.stdout
    assert f"{BIN} run" not in p.stdout and "[rcsweep] writing" not in p.stderr
    assert store.stat().st_mtime_ns == before
    assert (made["out"] / "ls-thm41.png").stat().st_mtime_ns > before  # drawn again


def test_changed_sweep_file_replaces_store(made, tmp_path):
    sweeps = tmp_path / "sweeps"
    shutil.copytree(made["sweeps"], sweeps)
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(made["out"] / "ls_fig4.h5", out)
    f4 = sweeps / "ls_fig4.toml"
    f4.write_text(f4.read_text().replace("replicates = 16", "replicates = 2"))
    p = reproduce("--sweeps", sweeps, "-o", out, "ls-fig4", 1)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "replaced" in p.stdout
    with h5py.File(out / "ls_fig4.h5", "r") as f:
        assert f.attrs["replicates"] == 2 and f.attrs["finished"]


def test_partial_store_is_resumed(made, tmp_path):
    """A store with tasks pending (here a --shard 0/2 run) is resumed, not replaced or skipped."""
    out = tmp_path / "out"
    out.mkdir()
    store = out / "ls_thm41.h5"
    p = subprocess.run([BIN, "run", str(made["sweeps"] / "ls_thm41.toml"), "-o", str(store), "--shard", "0/2", "-q"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    with h5py.File(store, "r") as f:
        pending = int((f["tasks"]["status"][...] == 0).sum())
        n_tasks = int(f.attrs["n_tasks"])
        assert 0 < pending < n_tasks
    p = reproduce("--sweeps", made["sweeps"], "-o", out, "ls-thm41", 1)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "resuming" in p.stdout and "up to date" not in p.stdout and "replaced" not in p.stdout
    assert f"{pending} tasks in" in p.stderr and f"({n_tasks - pending} already finished)" in p.stderr, p.stderr
    with h5py.File(store, "r") as f:
        assert (f["tasks"]["status"][...] == 1).all()


@pytest.mark.parametrize("args,message", [
    (["no-such-figure"], "unknown figure 'no-such-figure'"),
    (["ls-fig4,nope"], "unknown figure 'nope'"),
    (["ls-fig4", "0"], "RANKS must be a positive integer"),
    (["ls-fig4", "two"], "RANKS must be a positive integer"),
    (["--bogus", "ls-fig4"], "unknown option '--bogus'"),
    ([], "give FIGURE|all"),
])
def test_reproduce_usage_errors(args, message, tmp_path):
    p = reproduce("-o", tmp_path / "out", *args)
    assert p.returncode == 2, p
    assert message in p.stderr, p.stderr
    assert not any((tmp_path / "out").glob("*.h5")) if (tmp_path / "out").exists() else True


def test_reproduce_help_lists_figures():
    p = reproduce("--help")
    assert p.returncode == 0
    assert "Usage: rcsweep-reproduce" in p.stdout and "scripts/reproduce.sh" in p.stdout
    for name in FIGURES:
        assert name in p.stdout


def test_report_page_in_chromium(made):
    index = made["report"] / "index.html"
    html = index.read_text()
    widths, status = dom_images(index)
    assert set(widths) == set(PICKED)
    for name in PICKED:
        assert widths[name] == png_size(made["out"] / f"{name}.png")[0], (name, widths)
    assert status == (str(len(PICKED)), str(len(PICKED)))
    # the sweep file and the store's provenance are on the page
    for name in PICKED:
        sweep = made["sweeps"] / FIGURES[name].sweep
        assert f"name = &quot;{Path(sweep).stem}&quot;" in html
        with h5py.File(made["out"] / (sweep.stem + ".h5"), "r") as f:
            for key in ("git_commit", "plan_hash", "created", "finished", "host", "rcsweep_version"):
                assert f"<th>{key}</th><td>{f.attrs[key]}</td>" in html, key
            assert f"<th>mpi_ranks</th><td>{f.attrs['mpi_ranks']}</td>" in html


def test_report_screenshot_not_blank(made, tmp_path):
    shot = tmp_path / "shot.png"
    p = chromium(f"--screenshot={shot}", "--window-size=1280,2400", (made["report"] / "index.html").resolve().as_uri())
    assert p.returncode == 0 and shot.exists(), p.stderr[-2000:]
    import matplotlib.image

    img = matplotlib.image.imread(shot)[..., :3]
    nonwhite = (img < 0.9).any(axis=2).mean()
    colourful = (img.max(axis=2) - img.min(axis=2) > 0.2).mean()  # the plotted lines and bands
    assert nonwhite > 0.02 and colourful > 0.002, (nonwhite, colourful)


def test_broken_image_is_detected(made, tmp_path):
    """Negative control: delete one PNG of a copied report; the DOM check reports it as broken."""
    rep = tmp_path / "report"
    shutil.copytree(made["report"], rep)
    (rep / "figures" / "ls-thm41.png").unlink()
    widths, status = dom_images(rep / "index.html")
    assert widths["ls-thm41"] == 0 and widths["ls-fig4"] > 0
    assert status == (str(len(PICKED) - 1), str(len(PICKED)))


def test_report_module_missing_figure(made, tmp_path):
    """report.py directly: a figure without PNG gets a note, build exits 1; an unknown one exits 2."""
    args = ["build", "--out", str(tmp_path / "r"), "--stores", str(made["out"]), "--sweeps", str(made["sweeps"])]
    assert report.main(args + ["ls-fig4", "ls-fig1"]) == 1
    page = (tmp_path / "r" / "index.html").read_text()
    assert page.count('<img class="figure"') == 1 and "not drawn" in page and "no store" in page
    assert report.main(args + ["nope"]) == 2


def test_uptodate(made, tmp_path):
    store = made["out"] / "ls_fig4.h5"
    with h5py.File(store, "r") as f:
        h = f.attrs["plan_hash"]
    assert report.store_up_to_date(store, h)
    assert not report.store_up_to_date(store, "0" * 16)
    assert not report.store_up_to_date(tmp_path / "missing.h5", h)
    p = subprocess.run([PYTHON, "-m", "rcsweep_tools.report", "uptodate", str(store), h], cwd=SCRIPTS)
    assert p.returncode == 0
