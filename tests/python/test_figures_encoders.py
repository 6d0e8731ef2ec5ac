"""The encoder figures (scripts/rcsweep_tools/figures/encoders.py: mtg-fig3, mtg-fig8, mtg-fig9,
mtg-fig11, dong-fig2-encoders, ls-fig2-albert) on tiny stores the engine makes here: a TinyBERT-shaped
BERT (d = 32, 4 heads, 3 layers; config.json written here, with a checkpoint of spread-out weights
for the "after training" panels) and a tiny ALBERT, the published initialisation, T = 16 (4..96
where T is swept), the example token file jobs/examples/tokens/excerpts.txt. What each figure draws,
read back from the matplotlib artists, equals the store's numbers read with h5py (means and ± 1 sd
bands recomputed here; one realisation's spectra equal the stored ones), the theory curves equal
their formulas computed here; PNG written by rcsweep-plot; a store that is not an encoder store is
refused with a clear message (exit 2); the jobs/examples sweeps of these figures pass `rcsweep plan`."""
import json
import subprocess

import h5py
import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

import tiny_encoders
from conftest import BIN, SOURCE, plot_cli, plot_main
from test_figures_lambda_skip import MU_REL, RES_REL, Raw, check_mean_line, line

from rcsweep_tools import load
from rcsweep_tools.figures import FIGURES
from rcsweep_tools.figures.encoders import embedding_stable_rank, fig11_lengths, mp_stable_rank
from rcsweep_tools.plot import FigureDataError

TOKENS = SOURCE / "jobs" / "examples" / "tokens" / "excerpts.txt"
SR = (1.0, np.inf)        # a stable rank is >= 1: its bands are clipped there
GAP = (1.0, np.inf)       # s1/s2 >= 1
ENCODER_FIGURES = ("mtg-fig3", "mtg-fig8", "mtg-fig9", "mtg-fig11", "dong-fig2-encoders", "ls-fig2-albert")
EXAMPLES = ("mtg_fig3_bert.toml", "mtg_fig8_roberta.toml", "mtg_fig9_roberta_random.toml", "mtg_fig11_tinybert.toml",
            "dong_fig2_encoders.toml", "ls_fig2_albert.toml")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A TinyBERT-shaped BERT with a checkpoint (weights N(0, 0.3^2): far from the initialisation),
    and a tiny ALBERT (config.json only); both read the example token file (vocabulary 30522)."""
    root = tmp_path_factory.mktemp("encoders")
    bert = root / "tiny_bert"
    bert.mkdir()
    cfg = tiny_encoders.config("bert", 32, 4, 3, 64, vocab=30522, max_positions=128)
    (bert / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    sd = tiny_encoders.state_dict(cfg, np.random.default_rng(37))
    tiny_encoders.write_safetensors(bert / "model.safetensors", {k: (v, "F32") for k, v in sd.items()})
    albert = root / "tiny_albert"
    albert.mkdir()
    acfg = tiny_encoders.config("albert", 32, 4, 3, 64, vocab=30522, max_positions=128, embedding_size=16)
    (albert / "config.json").write_text(json.dumps(acfg, indent=2) + "\n")
    return {"bert": bert, "albert": albert}


def sweep(name, folder, model, axes="", output="", replicates=3):
    """A tiny encoder sweep: the published block (both skips unless swept, the MLP, the LayerNorms)."""
    return f"""
[sweep]
name = "{name}"
seed = 37
replicates = {replicates}
[model]
block = "encoder"
model_folder = "{folder}"
d = 32
heads = 4
depth = 3
norm = "layernorm"
{model}
[axes]
{axes}
[output]
{output}
"""


TOKEN_INPUT = f'input = "tokens"\ninput_path = "{TOKENS}"'
GAUSSIAN_INPUT = 'input = "gaussian"\ninput_scale = 5.656854249492381'   # sqrt(32)
PUBLISHED = 'lambda = 1.0\nmlp = "model"'
SPECTRA = 'spectra = "all"\nmixer_spectra = "all"'


@pytest.fixture(scope="module")
def stores(run_sweep, models):
    bert, albert = models["bert"], models["albert"]
    texts = {
        "mtg-fig3": sweep("t_enc_fig3", bert, f"{TOKEN_INPUT}\n{PUBLISHED}", "T = [4, 8, 16]\ninit = [\"random\", \"checkpoint\"]"),
        "mtg-fig8": sweep("t_enc_fig8", bert, f"{TOKEN_INPUT}\n{PUBLISHED}\nT = 16", output=SPECTRA),
        "mtg-fig9": sweep("t_enc_fig9", bert, f"{GAUSSIAN_INPUT}\n{PUBLISHED}\nT = 16", output=SPECTRA, replicates=2),
        "mtg-fig11": sweep("t_enc_fig11", bert, f"{GAUSSIAN_INPUT}\n{PUBLISHED}", "T = [16, 48, 64, 96]",
                           'mixer_spectra = "all"'),
        "dong-fig2-encoders": sweep("t_enc_dong", bert, f'{TOKEN_INPUT}\nT = 16\nmeasure = "attention"',
                                    'init = ["random", "checkpoint"]\nlambda = [0.0, 1.0]\nmlp = ["none", "model"]',
                                    'metrics = ["all", "res_best"]'),
        "ls-fig2-albert": sweep("t_enc_ls", albert, f'{TOKEN_INPUT}\nT = 16\nmlp = "model"',
                                "lambda = [-100.0, -1.0, 0.0, 0.5, 1.0, 100.0]"),
        # not an encoder store: the random-initialisation stack of dong_fig2.toml, tiny
        "stack": """
[sweep]
name = "t_enc_stack"
seed = 37
replicates = 2
[model]
input = "sphere"
T = 6
d = 8
depth = 2
[axes]
lambda = [0.0, 1.0]
mlp = ["none", "relu"]
""",
        # the attention branch only: not the blocks' outputs that mtg-fig3 plots
        "attention": sweep("t_enc_attention", bert, f'{TOKEN_INPUT}\n{PUBLISHED}\nmeasure = "attention"', "T = [4, 8]"),
    }
    return {name: run_sweep(text) for name, text in texts.items()}


def draw(name, store, band="sd"):
    fig = Figure(layout="constrained")
    FIGURES[name].draw(load(store), fig, band=band)
    fig.draw_without_rendering()  # lay out as saving does: it must draw without error
    return fig


def panel(fig, start):
    found = [ax for ax in fig.axes if ax.get_title().startswith(start)]
    assert len(found) == 1, (start, [ax.get_title() for ax in fig.axes])
    return found[0]


def theory(ax, gid):
    found = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    assert len(found) == 1, (gid, [ln.get_gid() for ln in ax.get_lines()])
    return found[0]


def scatter(ax, gid):
    found = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_gid() == gid]
    assert len(found) == 1, (gid, [c.get_gid() for c in ax.collections])
    return found[0].get_offsets()


class Spectra:
    """The stored spectra of a store through h5py: one task's, at one layer."""

    def __init__(self, path):
        with h5py.File(path, "r") as f:
            self.g = {k: f["spectra"][k][...] for k in f["spectra"]}

    def x_sv(self, task, layer):
        o, n = self.g["x_sv_offset"][task, layer], self.g["x_sv_length"][task]
        return self.g["x_sv"][o:o + n]

    def m_sv(self, task, layer):
        o, n = self.g["m_offset"][task, layer], self.g["m_length"][task]
        return self.g["m_sv"][o:o + n]

    def m_eig(self, task, layer):
        o, n = self.g["m_offset"][task, layer], self.g["m_length"][task]
        return self.g["m_eig_re"][o:o + n] + 1j * self.g["m_eig_im"][o:o + n]


def same_points(offsets, values):
    """The scatter offsets are the complex values (as a set: scatter keeps their order)."""
    got = np.asarray(offsets, dtype=float)
    values = np.asarray(values)
    assert got.shape == (len(values), 2)
    np.testing.assert_allclose(np.sort(got[:, 0] + 1j * got[:, 1]), np.sort(values), rtol=1e-12, atol=1e-15)


# --------------------------------------------------------------------------------------------
def test_mtg_fig3_width_and_depth_per_init(stores):
    """One row per init: (a) sr against T at every layer, (b) sr against layer for every T; the means and
    bands are h5py's; the embedding's theory is drawn for the published initialisation only."""
    s = stores["mtg-fig3"]
    raw, fig = Raw(s), draw("mtg-fig3", s)
    Ts, layers = [4, 8, 16], np.arange(int(raw.attrs["max_depth"]) + 1)
    sr = raw.layers["sr_cov"]
    assert len([ax for ax in fig.axes if ax.get_title()]) == 4
    for init, words in (("random", "before training"), ("checkpoint", "after training")):
        ax_w = panel(fig, f"(a) width: tiny_bert\n{words} (init = {init})")
        ax_d = panel(fig, f"(b) depth: tiny_bert\n{words} (init = {init})")
        assert ax_w.get_xscale() == "log" and ax_w.get_yscale() == "log" and ax_d.get_yscale() == "log"
        for ell in layers:
            values = np.array([sr[raw.rows(T=t, init=init), ell] for t in Ts]).T  # replicates x T
            check_mean_line(ax_w, f"ℓ = {ell}", Ts, values, SR)
        for t in Ts:
            check_mean_line(ax_d, f"T = {t}", layers, sr[raw.rows(T=t, init=init)], SR)
        np.testing.assert_array_equal(theory(ax_w, "theory:sr=1").get_ydata(), 1.0)
        embedding = [ln for ln in ax_w.get_lines() if ln.get_gid() == "theory:embedding"]
        if init == "random":  # 1 + 4 (T - 1)/(T + 2)^2: the shared token-type row, computed here
            (ln,) = embedding
            np.testing.assert_allclose(ln.get_ydata(), [1 + 4 * (t - 1) / (t + 2) ** 2 for t in Ts], rtol=1e-14)
        else:  # a checkpoint's embedding is not the published initialisation's
            assert not embedding


def test_embedding_stable_rank_formula():
    """sr of d (2/3 I + 1/3 1 1^T) by its eigenvalues, against the closed form, and the engine's
    layer 0 of bert-base's width (768) is close to it (the finite-d part is O(1/sqrt(d)))."""
    for T in (1, 2, 4, 16, 110):
        eig = np.linalg.eigvalsh(2 / 3 * np.eye(T) + 1 / 3 * np.ones((T, T)))
        np.testing.assert_allclose(embedding_stable_rank(T), (eig ** 2).sum() / eig.max() ** 2, rtol=1e-12)


def test_embedding_theory_at_width_768(run_sweep):
    """At the published width the published initialisation's X_0 has the stable rank of the formula
    (within 5 %, for every excerpt): the collapse in width at layer 0 is the embedding's."""
    store = run_sweep(f"""
[sweep]
name = "t_enc_embed"
seed = 3
replicates = 4
[model]
block = "encoder"
model_folder = "{SOURCE / 'jobs' / 'examples' / 'models' / 'bert-base-uncased'}"
{TOKEN_INPUT}
d = 768
heads = 12
depth = 0
[axes]
T = [4, 16, 48]
""")
    raw = Raw(store)
    for t in (4, 16, 48):
        np.testing.assert_allclose(raw.layers["sr_cov"][raw.rows(T=t), 0], embedding_stable_rank(t), rtol=0.05)


def spectra_row(fig, raw, spectra, k, T):
    """Panels (a)-(c) of row k of mtg-fig8/9 against replicate 0's stored spectra."""
    task = raw.rows()[0]  # replicate 0
    ax_x, ax_s, ax_e = panel(fig, "(a) input"), panel(fig, "(b) spectral gap"), panel(fig, "(c) eigenvalues")
    (x_eig,) = [ln for ln in ax_x.get_lines() if ln.get_gid() == f"x_eig:{k}"]
    np.testing.assert_allclose(x_eig.get_ydata(), spectra.x_sv(task, 0) ** 2, rtol=1e-14)
    np.testing.assert_allclose(x_eig.get_ydata().sum(), 1.0, rtol=1e-12)  # of X_0 / ||X_0||_F
    np.testing.assert_allclose(theory(ax_x, "theory:isometric").get_ydata(), 1.0 / T, rtol=1e-15)
    assert f"{raw.layers['sr_cov'][task, 0]:.3g}" in ax_x.get_title()
    (sv,) = [ln for ln in ax_s.get_lines() if ln.get_gid() == f"sv:{k}"]
    np.testing.assert_allclose(sv.get_ydata(), spectra.m_sv(task, 1), rtol=1e-14)
    assert f"{raw.layers['m_gap'][task, 1]:.3g}" in ax_s.get_title()
    eig = spectra.m_eig(task, 1)
    same_points(scatter(ax_e, f"eig:{k}"), eig)
    top = int(np.argmax(np.abs(eig)))
    same_points(scatter(ax_e, f"outlier:{k}"), eig[[top]])
    # the bulk inset holds the others; the largest is P's Perron eigenvalue 1 (row-stochastic)
    (inset,) = ax_e.child_axes
    same_points(scatter(inset, f"bulk:{k}"), np.delete(eig, top))
    np.testing.assert_allclose(eig[top], 1.0, atol=1e-10)
    (perron,) = [ln for ln in ax_e.get_lines() if ln.get_gid() == "theory:perron"]
    assert list(perron.get_xydata()[0]) == [1.0, 0.0]


@pytest.mark.parametrize("name", ["mtg-fig8", "mtg-fig9"])
def test_mtg_fig8_fig9_spectra_and_gap(stores, name):
    s = stores[name]
    raw, fig, spectra = Raw(s), draw(name, s), Spectra(s)
    spectra_row(fig, raw, spectra, 0, 16)
    ax_g = panel(fig, "(d) spectral gap against depth")
    layers = np.arange(1, int(raw.attrs["max_depth"]) + 1)
    check_mean_line(ax_g, r"$s_1/s_2$ of $P_\ell$", layers, raw.layers["m_gap"][raw.rows()][:, 1:], GAP)
    # the input differs: tokens' X_0 has the shared token-type row, random embeddings do not
    sr0 = raw.layers["sr_cov"][raw.rows(), 0]
    assert (sr0 < 2).all() if name == "mtg-fig8" else (sr0 > 2).all(), sr0


def test_mtg_fig8_and_fig9_refuse_each_others_input(stores):
    with pytest.raises(FigureDataError, match="draw it as mtg-fig9.*mtg_fig8_roberta.toml"):
        draw("mtg-fig8", stores["mtg-fig9"])
    with pytest.raises(FigureDataError, match="draw it as mtg-fig8.*mtg_fig9_roberta_random.toml"):
        draw("mtg-fig9", stores["mtg-fig8"])
    with pytest.raises(FigureDataError, match="spectra_stored"):  # the spectra are needed
        draw("mtg-fig8", stores["dong-fig2-encoders"])


def test_mtg_fig11_eigenvalues_and_width(stores):
    s = stores["mtg-fig11"]
    raw, fig, spectra = Raw(s), draw("mtg-fig11", s), Spectra(s)
    d, Ts = 32, [16, 48, 64, 96]
    for t in (48, 64, 96):  # gamma = T/d > 1: one realisation's P_1
        ax = panel(fig, rf"$P_1$, T = {t}, $\gamma$ = T/d = {t / d:.3g}")
        task = raw.rows(T=t)[0]
        eig = spectra.m_eig(task, 1)
        assert len(eig) == t
        same_points(scatter(ax, f"eig:0:T={t}"), eig)
    assert not [ax for ax in fig.axes if ax.get_title().startswith(r"$P_1$, T = 16,")]
    ax = panel(fig, "rank collapse in width")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    for ell in range(int(raw.attrs["max_depth"]) + 1):
        values = np.array([raw.layers["sr_cov"][raw.rows(T=t), ell] for t in Ts]).T
        check_mean_line(ax, f"ℓ = {ell}", Ts, values, SR)
    mp = theory(ax, "theory:mp")  # T d (T + d + 1) / (sqrt T + sqrt d)^4, computed here
    np.testing.assert_allclose(mp.get_ydata(), [t * d * (t + d + 1) / (t ** 0.5 + d ** 0.5) ** 4 for t in Ts],
                               rtol=1e-14)
    assert list(theory(ax, "theory:gamma=1").get_xdata()) == [d, d]


def test_fig11_picks_up_to_three_lengths_above_d():
    assert fig11_lengths([78, 156, 312, 468, 624, 936], 312) == [3, 4, 5]
    assert fig11_lengths([400, 100, 800, 500, 900, 700], 312) == [0, 5, 4]  # 400, 700, 900 of 400..900
    assert fig11_lengths([16, 32], 64) == [0, 1]  # none above d: every T
    assert fig11_lengths([16, 128], 64) == [1]
    np.testing.assert_allclose(mp_stable_rank(4, 4), 4 * 4 * 9 / 4 ** 4)


def test_mp_stable_rank_against_numpy():
    """The Marchenko-Pastur value is the large-size limit of sr(X X^T) of i.i.d. Gaussian X."""
    rng = np.random.default_rng(0)
    for T, d in ((1200, 400), (400, 800)):
        s = np.linalg.svd(rng.standard_normal((T, d)), compute_uv=False)
        sr = (s ** 4).sum() / s[0] ** 4
        np.testing.assert_allclose(sr, mp_stable_rank(T, d), rtol=0.06)


def test_dong_fig2_before_and_after_training(stores):
    """A panel per init; each the four variants' res_rel of the attention output against layer, and
    (the store has it) their res_best, the residual with the best row vector, dashed and below."""
    s = stores["dong-fig2-encoders"]
    raw, fig = Raw(s), draw("dong-fig2-encoders", s)
    layers = np.arange(int(raw.attrs["max_depth"]) + 1)
    variants = {"SAN (pure attention)": (0.0, "none"), "SAN + MLP": (0.0, "model"), "SAN + skip": (1.0, "none"),
                "SAN + MLP + skip": (1.0, "model")}
    assert len(fig.axes) == 2
    for init, words in (("random", "before training"), ("checkpoint", "after training")):
        ax = panel(fig, f"tiny_bert: {words}")
        assert "SAN" in ax.get_ylabel()  # measure = "attention": Dong et al.'s ratio of SAN(X)
        assert len([ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("mean:")]) == 8
        for label, (lam, mlp) in variants.items():
            rows = raw.rows(init=init, mlp=mlp, **{"lambda": lam})
            check_mean_line(ax, label, layers, raw.layers["res_rel"][rows], RES_REL)
            best = line(ax, f"{label}, best x")  # the mean, no band
            np.testing.assert_allclose(best.get_ydata(), raw.layers["res_best"][rows].mean(axis=0), rtol=1e-12)
            assert best.get_linestyle() == "--" and not [c for c in ax.collections if c.get_gid() == f"band:{label}, best x"]
            assert (line(ax, f"{label}, best x").get_ydata() <= line(ax, label).get_ydata() * (1 + 1e-12)).all()
        if init == "random":  # at initialisation pure attention collapses: below the transformer's residual
            assert line(ax, "SAN (pure attention)").get_ydata()[-1] < line(ax, "SAN + MLP + skip").get_ydata()[-1]


def test_ls_fig2_albert_reuses_ls_fig2_without_theory(stores):
    s = stores["ls-fig2-albert"]
    raw, fig = Raw(s), draw("ls-fig2-albert", s)
    (ax,) = fig.axes
    L = int(raw.attrs["max_depth"])
    lams = [-100.0, -1.0, 0.0, 0.5, 1.0, 100.0]
    values = np.array([raw.layers["mu_rel"][raw.rows(**{"lambda": v}), L] for v in lams]).T
    check_mean_line(ax, "tiny_albert", lams, values, MU_REL)
    assert ax.get_xscale() == "symlog" and f"L = {L}" in ax.get_title() and "before training" in ax.get_title()
    assert not [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("theory:")]  # no Theorem 4.1
    mean = line(ax, "tiny_albert").get_ydata()
    assert mean[lams.index(0.0)] < mean[lams.index(100.0)]  # no skip collapses, a strong skip does not


@pytest.mark.parametrize("name", ENCODER_FIGURES)
def test_figure_written_as_png(stores, name, tmp_path):
    out = tmp_path / f"{name}.png"
    code, stdout, stderr = plot_main(stores[name], name, "-o", out)
    assert code == 0, stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_paper_column_with_insets(stores, tmp_path):
    """--width column restacks the panels: the bulk insets (no grid place) go along."""
    out = tmp_path / "fig8.png"
    code, _, stderr = plot_main(stores["mtg-fig8"], "mtg-fig8", "--width", "column", "-o", out)
    assert code == 0, stderr
    assert out.stat().st_size > 0


@pytest.mark.parametrize("name", ENCODER_FIGURES)
def test_stack_store_is_refused(stores, name):
    with pytest.raises(FigureDataError, match=rf"cannot draw {name}: it is not an encoder store \(block = stack\).*"
                                              rf"jobs/examples/{FIGURES[name].sweep}"):
        draw(name, stores["stack"])


def test_stack_store_refused_on_the_command_line(stores, tmp_path):
    out = tmp_path / "x.png"
    p = plot_cli(stores["stack"], "mtg-fig3", "-o", out)
    assert p.returncode == 2, p
    assert "cannot draw mtg-fig3: it is not an encoder store (block = stack)" in p.stderr
    assert "jobs/examples/mtg_fig3_bert.toml" in p.stderr
    assert not out.exists()


def test_other_stores_refused(stores):
    with pytest.raises(FigureDataError, match=r'measure = "block"\), the store has measure = attention'):
        draw("mtg-fig3", stores["attention"])
    with pytest.raises(FigureDataError, match="lambda = 0 and a non-zero lambda, and mlp = none and model"):
        draw("dong-fig2-encoders", stores["mtg-fig3"])
    with pytest.raises(FigureDataError, match="needs lambda swept"):
        draw("ls-fig2-albert", stores["mtg-fig8"])
    with pytest.raises(FigureDataError, match="mixer_spectra_stored"):
        draw("mtg-fig11", stores["mtg-fig3"])


def test_registry():
    for name in ENCODER_FIGURES:
        f = FIGURES[name]
        assert f.paper.endswith(" (encoders)") and f.sweep in EXAMPLES, f


@pytest.mark.parametrize("sweep_file", EXAMPLES)
def test_example_sweep_plans_at_the_published_size(sweep_file):
    """Each example plans (its model folder, token file and sizes accepted) and runs the published
    initialisation, saying how to point it at a checkpoint instead."""
    path = SOURCE / "jobs" / "examples" / sweep_file
    text = path.read_text()
    assert 'init = "random"' in text and 'init = "checkpoint"' in text
    p = subprocess.run([BIN, "plan", str(path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
