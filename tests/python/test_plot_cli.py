"""scripts/rcsweep-plot as a user runs it: --list, --help, the default output name, PNG/SVG by
extension, and every usage error exits 2 with a message naming the problem, writing nothing."""
import h5py

from conftest import PLOT, plot_cli, plot_main

from rcsweep_tools.figures import FIGURES

SWEEP = """
[sweep]
name = "cli"
seed = 1
replicates = 2
[model]
mixer = "markov"
input = "orthonormal"
depth = 2
[axes]
gap_fix = ["none", "perp"]
[[zip]]
T = [4, 8]
d = [4, 8]
"""


def test_list_names_every_registered_figure():
    proc = plot_cli("--list")
    assert proc.returncode == 0, proc.stderr
    for name, f in FIGURES.items():
        line = next(l for l in proc.stdout.splitlines() if l.split()[:1] == [name])
        assert f"jobs/examples/{f.sweep}" in line
    for paper in {f.paper for f in FIGURES.values()}:
        assert f"{paper}:" in proc.stdout


def test_help_explains_usage_and_exit_codes():
    proc = plot_cli("--help")
    assert proc.returncode == 0
    for text in ("STORE", "FIGURE", "--list", "-o", ".svg", "95%", "t-based", "Exit codes", "mtg-fig4a"):
        assert text.lower() in proc.stdout.lower(), text
    assert PLOT.stat().st_mode & 0o111 and PLOT.read_text().startswith("#!/usr/bin/python3\n")


def test_default_output_is_figure_name_png(run_sweep, tmp_path):
    store = run_sweep(SWEEP)
    import subprocess
    import os
    proc = subprocess.run(["/usr/bin/python3", str(PLOT), str(store), "mtg-fig4a"], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "mtg-fig4a.png").read_bytes()[:4] == b"\x89PNG"
    assert "wrote mtg-fig4a.png" in proc.stdout


def test_svg_by_extension(run_sweep, tmp_path):
    out = tmp_path / "w.SVG"
    proc = plot_cli(run_sweep(SWEEP), "mtg-fig4a", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert b"<svg" in out.read_bytes()[:2000]


def test_unknown_figure_exits_2(run_sweep, tmp_path):
    proc = plot_cli(run_sweep(SWEEP), "mtg-fig99", "-o", tmp_path / "x.png")
    assert proc.returncode == 2
    assert "unknown figure 'mtg-fig99'" in proc.stderr and "mtg-fig4a" in proc.stderr
    assert not (tmp_path / "x.png").exists()


def test_wrong_store_exits_2_naming_what_is_missing(run_sweep, tmp_path):
    proc = plot_cli(run_sweep(SWEEP), "mtg-fig5", "-o", tmp_path / "x.png")
    assert proc.returncode == 2
    assert "cannot draw mtg-fig5" in proc.stderr and "grad_log10_g_all" in proc.stderr
    assert "jobs/examples/mtg_gradients.toml" in proc.stderr
    assert not (tmp_path / "x.png").exists()


def test_not_a_store_missing_file_bad_extension_and_missing_args_exit_2(run_sweep, tmp_path):
    bogus = tmp_path / "bogus.h5"
    with h5py.File(bogus, "w") as f:
        f["x"] = 1
    text = tmp_path / "text.h5"
    text.write_text("not hdf5")
    for args, message in (([bogus, "mtg-fig4a"], "not an rcsweep store"),
                          ([text, "mtg-fig4a"], "cannot read as an rcsweep store"),
                          ([tmp_path / "missing.h5", "mtg-fig4a"], "no such file"),
                          ([run_sweep(SWEEP), "mtg-fig4a", "-o", tmp_path / "x.pdf"], "must end in .png or .svg"),
                          ([run_sweep(SWEEP)], "give STORE and FIGURE")):
        code, _, err = plot_main(*args)  # in process: a subprocess per case is slow (same main())
        assert code == 2, (args, code, err)
        assert message in err, (args, err)
    assert not (tmp_path / "x.pdf").exists()
