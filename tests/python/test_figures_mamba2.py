"""The Lambda-skip figures on Mamba-2 (scripts/rcsweep_tools/figures/mamba2.py: ls-fig1-mamba2,
ls-fig2-mamba2, ls-fig3-mamba2) on tiny stores the engine makes here: a Mamba-2 config.json written
here (d_model 32, 3 layers, 4 heads; tests/python/tiny_mamba2.py) drawn at the published
initialisation on random rows, and its checkpoint (spread-out weights) on token ids, set by the
command-line overrides docs/FIGURES.md gives; T = 8, 2 replicates. What each figure draws, read back
from the matplotlib artists, equals the store's numbers read with h5py (means and ± 1 sd bands
recomputed here), its caption names the model, the weights, the input, T and the replicates; the
ALBERT curve of a tiny ALBERT store joins Fig. 2, from Python and through `rcsweep-plot --with`
(which refuses a figure without a second store, a file that is not a store and a store of the wrong
kind, exit 2 naming --with); a store that is not a Mamba-2 store, or lacks the
swept axis a figure plots, is refused naming the sweep file (exit 2 in rcsweep-plot); the shipped
example sweeps (and the 2.7B override) pass `rcsweep plan` in minutes; what docs/FIGURES.md says
the shipped examples show holds on mamba2-130m run shallower here."""
import json
import re
import subprocess

import numpy as np
import pytest
from matplotlib.figure import Figure

import tiny_encoders
import tiny_mamba2
from conftest import BIN, SOURCE, drawn_by_rcsweep_plot, plot_main, texts_outside_the_figure
from test_figures_lambda_skip import MU_REL, Raw, check_mean_line, line

from rcsweep_tools import load
from rcsweep_tools.figures import FIGURES
from rcsweep_tools.figures.mamba2 import fig2
from rcsweep_tools.plot import FigureDataError

NAMES = ("ls-fig1-mamba2", "ls-fig2-mamba2", "ls-fig3-mamba2")
EXAMPLES = {"ls-fig1-mamba2": "ls_fig1_mamba2.toml", "ls-fig2-mamba2": "ls_fig2_mamba2.toml",
            "ls-fig3-mamba2": "ls_fig3_mamba2.toml"}
EXCERPTS = [[3, 41, 17, 17, 0, 8, 29, 49, 12, 5, 30], [11, 2, 36, 44, 7, 7, 19, 23, 40, 1, 6, 9]]  # ids < 50
FIG1_L = [-10.0, -1.0, 0.0, 1.0, 10.0]
FIG2_L = [-10.0, -1.0, 0.0, 0.5, 1.0, 10.0]
ALBERT_L = [-100.0, 0.0, 1.0, 100.0]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("mamba2_figures")
    cfg = tiny_mamba2.config(d_model=32, n_layer=3, d_state=8, headdim=16)  # 4 heads, 1 group, vocabulary 50
    rand = root / "tiny-mamba2"
    rand.mkdir()
    (rand / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    ckpt = root / "tiny-mamba2-trained"
    tiny_mamba2.write_folder(ckpt, cfg, tiny_mamba2.state_dict(cfg, np.random.default_rng(5)), "F32")
    tokens = root / "ids.txt"
    tiny_encoders.write_tokens(tokens, EXCERPTS)
    albert = root / "tiny_albert"
    albert.mkdir()
    acfg = tiny_encoders.config("albert", 32, 4, 3, 64, vocab=30522, max_positions=128, embedding_size=16)
    (albert / "config.json").write_text(json.dumps(acfg, indent=2) + "\n")
    return {"random": rand, "checkpoint": ckpt, "tokens": tokens, "albert": albert}


def sweep(name, folder, model="", axes=""):
    return f"""
[sweep]
name = "{name}"
seed = 11
replicates = 2
[model]
block = "mamba2"
model_folder = "{folder}"
init = "random"
input = "sphere"
T = 8
d = 32
depth = 3
{model}
[axes]
{axes}
"""


@pytest.fixture(scope="module")
def stores(run_sweep, models):
    m = models["random"]
    texts = {
        "ls-fig1-mamba2": sweep("t_m2_fig1", m, 'norm = "rms"\ngate = "none"', f"lambda = {FIG1_L}"),
        "ls-fig2-mamba2": sweep("t_m2_fig2", m, 'norm = "rms"', f'lambda = {FIG2_L}\ngate = ["none", "silu"]'),
        "ls-fig3-mamba2": sweep("t_m2_fig3", m, "lambda = 1.0",
                                'gate = ["silu", "none"]\nnorm = ["rms", "none"]\ngated_norm = [true, false]'),
        "albert": f"""
[sweep]
name = "t_m2_albert"
seed = 11
replicates = 2
[model]
block = "encoder"
model_folder = "{models['albert']}"
init = "random"
input = "tokens"
input_path = "{SOURCE / 'jobs' / 'examples' / 'tokens' / 'excerpts.txt'}"
T = 8
d = 32
heads = 4
depth = 3
mlp = "model"
norm = "layernorm"
[axes]
lambda = {ALBERT_L}
""",
        "stack": """
[sweep]
name = "t_m2_stack"
seed = 11
replicates = 2
[model]
mixer = "ssd"
input = "sphere"
T = 6
d = 8
depth = 2
[axes]
lambda = [0.0, 1.0]
gate = ["none", "silu"]
norm = ["none", "rms"]
""",
    }
    out = {name: run_sweep(text) for name, text in texts.items()}
    # the checkpoint on token ids: Fig. 2's sweep with the overrides docs/FIGURES.md gives
    out["checkpoint"] = run_sweep(texts["ls-fig2-mamba2"], args=(
        "--", "model.init=checkpoint", f"model.model_folder={models['checkpoint']}", "model.input=tokens",
        f"model.input_path={models['tokens']}"))
    return out


def draw(name, store, band="sd", **kw):
    fig = Figure(layout="constrained")
    if kw:
        fig2(load(store), fig, band=band, **kw)
    else:
        FIGURES[name].draw(load(store), fig, band=band)
    fig.draw_without_rendering()
    return fig


def caption(fig):
    return fig._supxlabel.get_text()


def test_fig1_lines_carry_the_store(stores):
    s = stores["ls-fig1-mamba2"]
    raw, fig = Raw(s), draw("ls-fig1-mamba2", s)
    (ax,) = fig.axes
    L = int(raw.attrs["max_depth"])
    for lam in FIG1_L:
        values = raw.layers["mu_rel"][raw.rows(**{"lambda": lam})]
        check_mean_line(ax, rf"$\lambda$ = {lam:g}", np.arange(L + 1), values, MU_REL)
    assert "gate = none" in ax.get_title() and "tiny-mamba2" in ax.get_title()
    text = caption(fig)
    for part in ("Fig. 1", "tiny-mamba2", "init = random", "a new model per replicate", "'sphere'", "T = 8",
                 "n = 2", "d = 32"):
        assert part in text, (part, text)
    legends = list(fig.legends) + [a.get_legend() for a in fig.axes if a.get_legend() is not None]
    labels = [t.get_text() for lg in legends for t in lg.get_texts()]
    assert labels[:len(FIG1_L)] == [rf"$\lambda$ = {v:g}" for v in FIG1_L]  # in increasing order


def test_fig2_last_layer_per_gate(stores):
    s = stores["ls-fig2-mamba2"]
    raw, fig = Raw(s), draw("ls-fig2-mamba2", s)
    (ax,) = fig.axes
    L = int(raw.attrs["max_depth"])
    for gate in ("none", "silu"):
        values = np.array([raw.layers["mu_rel"][raw.rows(**{"lambda": v, "gate": gate}), L] for v in FIG2_L]).T
        check_mean_line(ax, f"tiny-mamba2, L = {L}: gate = {gate}", FIG2_L, values, MU_REL)
    assert ax.get_xscale() == "symlog"
    assert not [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("theory:")]  # no Theorem 4.1
    assert "init = random" in ax.get_title() and "Fig. 2" in caption(fig)


def test_fig2_with_the_albert_curve(stores):
    s, a = stores["ls-fig2-mamba2"], stores["albert"]
    fig = draw("ls-fig2-mamba2", s, albert=a)  # a path; a loaded store does too
    (ax,) = fig.axes
    raw, araw = Raw(s), Raw(a)
    La = int(araw.attrs["max_depth"])
    values = np.array([araw.layers["mu_rel"][araw.rows(**{"lambda": v}), La] for v in ALBERT_L]).T
    check_mean_line(ax, f"tiny_albert, L = {La}", ALBERT_L, values, MU_REL)
    L = int(raw.attrs["max_depth"])
    line(ax, f"tiny-mamba2, L = {L}: gate = none")  # the Mamba-2 curves stay
    assert "tiny_albert" in caption(fig) and "each model's last layer" in ax.get_ylabel()
    fig2(load(s), Figure(), albert=load(a))
    with pytest.raises(FigureDataError, match="not an encoder store.*ls_fig2_albert.toml"):
        fig2(load(s), Figure(), albert=s)  # a Mamba-2 store is no ALBERT curve


def test_fig2_with_the_albert_curve_through_rcsweep_plot(stores, monkeypatch, tmp_path):
    """rcsweep-plot STORE ls-fig2-mamba2 --with ALBERT_STORE: both stores' curves, each equal to its
    own store's numbers; the caption, legend and provenance title name the ALBERT store's model and
    file."""
    s, a = stores["ls-fig2-mamba2"], stores["albert"]
    out = tmp_path / "fig2-albert.png"
    code, stderr, fig = drawn_by_rcsweep_plot(monkeypatch, s, "ls-fig2-mamba2", "--with", a, "-o", out)
    assert code == 0, stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (ax,) = fig.axes
    raw, araw = Raw(s), Raw(a)
    L, La = int(raw.attrs["max_depth"]), int(araw.attrs["max_depth"])
    for gate in ("none", "silu"):
        values = np.array([raw.layers["mu_rel"][raw.rows(**{"lambda": v, "gate": gate}), L] for v in FIG2_L]).T
        check_mean_line(ax, f"tiny-mamba2, L = {L}: gate = {gate}", FIG2_L, values, MU_REL)
    values = np.array([araw.layers["mu_rel"][araw.rows(**{"lambda": v}), La] for v in ALBERT_L]).T
    check_mean_line(ax, f"tiny_albert, L = {La}", ALBERT_L, values, MU_REL)
    legends = list(fig.legends) + [x.get_legend() for x in fig.axes if x.get_legend() is not None]
    labels = [t.get_text() for lg in legends for t in lg.get_texts()]
    assert f"tiny_albert, L = {La}" in labels, labels
    assert "tiny_albert" in caption(fig) and "each model's last layer" in ax.get_ylabel()
    heading = fig._suptitle.get_text()
    assert f"with {a.name}: sweep 't_m2_albert'" in heading.replace("\n", " "), heading
    # at a journal's column the longer y label stays inside the figure, below the panel's title
    code, stderr, fig = drawn_by_rcsweep_plot(monkeypatch, s, "ls-fig2-mamba2", "--with", a, "--width", "column",
                                              "-o", out)
    assert code == 0, stderr
    renderer = fig._get_renderer()
    box, top = (t.get_window_extent(renderer) for t in (fig.axes[0].yaxis.label, fig.axes[0].title))
    assert 0 <= box.y0 and box.y1 <= top.y0, (box, top)
    # without --with: the Mamba-2 curves alone
    code, stderr, fig = drawn_by_rcsweep_plot(monkeypatch, s, "ls-fig2-mamba2", "-o", out)
    assert code == 0, stderr
    assert not [ln for ln in fig.axes[0].get_lines() if "tiny_albert" in (ln.get_gid() or "")]


def test_with_refusals(stores, tmp_path):
    """--with for a figure that takes no second store, for the generic plot, a missing file, a file
    that is not a store and a store that is no ALBERT curve: exit 2 naming --with, nothing written."""
    import h5py

    s, a = stores["ls-fig2-mamba2"], stores["albert"]
    out = tmp_path / "never.png"
    code, _, stderr = plot_main(stores["ls-fig1-mamba2"], "ls-fig1-mamba2", "--with", a, "-o", out)
    assert code == 2 and f"--with {a}: figure ls-fig1-mamba2 takes no second store" in stderr, stderr
    assert "ls-fig2-mamba2" in stderr  # the figure that takes one
    code, _, stderr = plot_main(s, "--y", "mu_rel", "--with", a, "-o", out)
    assert code == 2 and "--with" in stderr and "generic plot" in stderr, stderr
    code, _, stderr = plot_main(s, "ls-fig2-mamba2", "--with", tmp_path / "nowhere.h5", "-o", out)
    assert code == 2 and "--with " in stderr and "nowhere.h5: no such file" in stderr, stderr
    bogus = tmp_path / "bogus.h5"
    with h5py.File(bogus, "w") as f:
        f["x"] = 1
    code, _, stderr = plot_main(s, "ls-fig2-mamba2", "--with", bogus, "-o", out)
    assert code == 2 and f"--with {bogus}: cannot read as an rcsweep store" in stderr, stderr
    for wrong, why in ((s, "not an encoder store"), (stores["stack"], "not an encoder store")):
        code, _, stderr = plot_main(s, "ls-fig2-mamba2", "--with", wrong, "-o", out)
        assert code == 2 and stderr.startswith(f"rcsweep-plot: --with {wrong}: "), stderr
        assert why in stderr and "jobs/examples/ls_fig2_albert.toml" in stderr, stderr
    assert not out.exists()


def test_fig3_gate_by_norm_panels(stores):
    s = stores["ls-fig3-mamba2"]
    raw, fig = Raw(s), draw("ls-fig3-mamba2", s)
    L = int(raw.attrs["max_depth"])
    assert len(fig.axes) == 2
    for gn in ("true", "false"):
        (ax,) = [ax for ax in fig.axes if f"gated_norm = {gn}" in ax.get_title()]
        for gate, gname in (("silu", "gate"), ("none", "no gate")):
            for norm, nname in (("rms", "RMSNorm"), ("none", "no norm")):
                values = raw.layers["mu_rel"][raw.rows(gate=gate, norm=norm, gated_norm=gn)]
                check_mean_line(ax, f"{gname}, {nname}", np.arange(L + 1), values, MU_REL)
    assert "lambda = 1" in fig.axes[0].get_title() and "T = 8" in caption(fig)


def test_checkpoint_on_tokens_by_overrides(stores):
    """docs/FIGURES.md's command: the example sweep with init, model_folder, input and input_path
    overridden draws a trained model on token ids, and says so."""
    s = stores["checkpoint"]
    ds = load(s)
    assert str(ds["init"].values) == "checkpoint" and str(ds["input"].values) == "tokens"
    raw, fig = Raw(s), draw("ls-fig2-mamba2", s)
    (ax,) = fig.axes
    L = int(raw.attrs["max_depth"])
    values = np.array([raw.layers["mu_rel"][raw.rows(**{"lambda": v, "gate": "silu"}), L] for v in FIG2_L]).T
    check_mean_line(ax, f"tiny-mamba2-trained, L = {L}: gate = silu", FIG2_L, values, MU_REL)
    text = caption(fig)
    assert "trained weights (init = checkpoint)" in text and "ids.txt" in text and "tiny-mamba2-trained" in text
    # the trained weights give other numbers than the initialisation's
    rnd = Raw(stores["ls-fig2-mamba2"])
    assert not np.allclose(values, np.array([rnd.layers["mu_rel"][rnd.rows(**{"lambda": v, "gate": "silu"}), L]
                                             for v in FIG2_L]).T)


def test_refusals(stores):
    with pytest.raises(FigureDataError, match=r"not a Mamba-2 store \(block = stack\).*ls_fig1_mamba2.toml"):
        draw("ls-fig1-mamba2", stores["stack"])
    with pytest.raises(FigureDataError, match=r"not a Mamba-2 store \(block = encoder\).*ls_fig2_mamba2.toml"):
        draw("ls-fig2-mamba2", stores["albert"])
    with pytest.raises(FigureDataError, match=r"not a Mamba-2 store.*ls_fig3_mamba2.toml"):
        draw("ls-fig3-mamba2", stores["stack"])
    with pytest.raises(FigureDataError, match=r"needs lambda swept.*ls_fig1_mamba2.toml"):
        draw("ls-fig1-mamba2", stores["ls-fig3-mamba2"])
    with pytest.raises(FigureDataError, match=r"needs lambda swept.*ls_fig2_mamba2.toml"):
        draw("ls-fig2-mamba2", stores["ls-fig3-mamba2"])
    with pytest.raises(FigureDataError, match=r"needs gate and norm swept.*ls_fig3_mamba2.toml"):
        draw("ls-fig3-mamba2", stores["ls-fig1-mamba2"])
    code, _, stderr = plot_main(stores["stack"], "ls-fig2-mamba2", "-o", "never.png")
    assert code == 2 and "not a Mamba-2 store" in stderr and "jobs/examples/ls_fig2_mamba2.toml" in stderr


@pytest.mark.parametrize("name", NAMES)
def test_written_as_png(stores, name, tmp_path):
    out = tmp_path / f"{name}.png"
    code, _, stderr = plot_main(stores[name], name, "-o", out)
    assert code == 0, stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_registry():
    for name in NAMES:
        f = FIGURES[name]
        assert f.paper == "Lambda-skip (Mamba-2)" and f.sweep == EXAMPLES[name], f
    second = FIGURES["ls-fig2-mamba2"].second
    assert second.keyword == "albert" and second.sweep == "ls_fig2_albert.toml"
    assert [n for n, f in FIGURES.items() if f.second] == ["ls-fig2-mamba2"]
    with pytest.raises(ValueError, match="takes no second store"):
        FIGURES["ls-fig1-mamba2"].draw(None, Figure(), second=object())


def _wall_seconds(plan_text):
    m = re.search(r"about ([\d.]+) (s|min|h) wall", plan_text)
    assert m, plan_text
    return float(m.group(1)) * {"s": 1, "min": 60, "h": 3600}[m.group(2)]


@pytest.mark.parametrize("args", [(f,) for f in EXAMPLES.values()] + [(
    "ls_fig2_mamba2.toml", "model.model_folder=mamba2/mamba2-2.7b", "model.d=2560", "model.depth=64",
    "sweep.replicates=2")], ids=list(EXAMPLES.values()) + ["2.7b"])
def test_example_plans_in_minutes(args):
    """Each example (and the 2.7B override of docs/FIGURES.md) plans on the published config.json,
    at initialisation, and within 10 minutes on 2 ranks by the plan's estimate."""
    path = SOURCE / "jobs" / "examples" / args[0]
    assert 'init = "random"' in path.read_text()
    p = subprocess.run([BIN, "plan", str(path), "--cores", "2", *args[1:]], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert _wall_seconds(p.stdout + p.stderr) < 600


def test_what_the_docs_say_at_initialisation(run_sweep):
    """docs/FIGURES.md "Mamba-2", each statement on mamba2-130m's published initialisation at layer
    24: without the gate mu collapses at lambda = 0 (0.5 alike), less the larger |lambda|, symmetric
    in its sign; with the gate it stays near 1 at every lambda; Fig. 3's order, no divergence without
    the pre-norms, and the gated norm's effect. The shipped sweeps at T = 32, 2 replicates."""
    ex = SOURCE / "jobs" / "examples"
    common = ("--", "model.T=32", "sweep.replicates=2")
    s2 = run_sweep(ex / "ls_fig2_mamba2.toml", ranks=2, args=(*common, "axes.lambda=[-10,-3,-1,0,0.5,1,2,3,10]"))
    ds2 = load(s2)
    assert int(ds2["layer"].values[-1]) == 24 and (ds2["status"].values == 1).all()
    last = ds2["mu_rel"].isel(layer=-1).mean("replicate")
    no, g = last.sel(gate="none"), last.sel(gate="silu")

    def at(da, v):
        return float(da.sel({"lambda": v}))
    assert float(ds2["mu_rel"].isel(layer=0).min()) > 0.98
    assert at(no, 0) < 0.3 and abs(at(no, 0.5) - at(no, 0)) < 0.05
    assert at(no, 0.5) < at(no, 1) < at(no, 2) < at(no, 10)
    assert 0.35 < at(no, 1) < 0.5 and at(no, 10) > 0.95
    assert 0.7 < at(no, 2) < at(no, 3) < 0.92
    for v in (1, 3, 10):  # no sign asymmetry
        assert abs(at(no, -v) - at(no, v)) < 0.02, v
    assert float(g.min()) > 0.95
    s3 = run_sweep(ex / "ls_fig3_mamba2.toml", ranks=2, args=common)
    ds3 = load(s3)
    assert (ds3["status"].values == 1).all()  # no replicate diverges, with or without the pre-norms
    m = ds3["mu_rel"].isel(layer=-1).mean("replicate")
    on, off = m.sel(gated_norm="true"), m.sel(gated_norm="false")
    assert float(on.sel(gate="silu").min()) > 0.95
    assert float(on.sel(gate="none", norm="none")) < 0.2 < float(on.sel(gate="none", norm="rms")) < 0.5
    assert (off.sel(gate="none") > on.sel(gate="none")).all()  # without the gated norm they fall less


def test_fig2_fits_a_column(stores, monkeypatch, tmp_path):
    """rcsweep-plot STORE ls-fig2-mamba2 --width column (with and without --with): every text, the
    panel's title ("tiny-mamba2: at initialisation (init = random), a new model per replicate")
    among them, lies inside the figure; the title is broken into lines, not cut."""
    s, a = stores["ls-fig2-mamba2"], stores["albert"]
    out = tmp_path / "fig2-column.png"
    for extra in ((), ("--with", a)):
        code, stderr, fig = drawn_by_rcsweep_plot(monkeypatch, s, "ls-fig2-mamba2", *extra, "--width", "column",
                                                  "-o", out)
        assert code == 0, stderr
        assert texts_outside_the_figure(fig) == [], (extra, fig.get_size_inches())
        title = fig.axes[0].get_title()
        assert " ".join(title.split()) == "tiny-mamba2: at initialisation (init = random), a new model per replicate"
