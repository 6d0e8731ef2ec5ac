"""Theorem 4.1 in the lambda-skip figures (ls-thm41, ls-fig1): tasks outside the theorem's
hypotheses (a scaled input, whose rows are not unit; a stack with LayerNorm) are drawn as outside
it, never as "the bound applies" nor as a counterexample, and no bound line is drawn for them."""
import numpy as np
from matplotlib.figure import Figure

from conftest import drawn_by_rcsweep_plot, texts_outside_the_figure
from rcsweep_tools import load
from rcsweep_tools.figures import FIGURES
from rcsweep_tools.figures.lambda_skip import APPLIES, OUTSIDE

THM41 = """
[sweep]
name = "t_thm41_outside"
seed = 5
replicates = 2
[model]
mixer = "softmax"
input = "orthonormal"
T = 8
d = 8
depth = 4
norm = "rms"
value_scale = "inv_sqrt_d"
collapse_rate = 0.9
[axes]
lambda = [1.0, 10000.0, 100000.0, 1000000.0]
"""

FIG1 = """
[sweep]
name = "t_fig1_outside"
seed = 5
replicates = 2
[model]
input = "sphere"
T = 8
d = 8
depth = 4
value_scale = "inv_sqrt_d"
norm = "rms"
[axes]
mixer = ["softmax"]
lambda = [1.0, 100000.0]
"""


def draw(name, store):
    fig = Figure(layout="constrained")
    FIGURES[name].draw(load(store), fig)
    fig.draw_without_rendering()
    return fig


def code_map(fig):
    images = {im.get_gid(): im for ax in fig.axes for im in ax.get_images()}
    return np.asarray(images["map:code"].get_array())


def violations(fig):
    return [t for ax in fig.axes for t in ax.texts if t.get_gid() == "violation"]


def test_thm41_map_unit_input_applies(run_sweep):
    fig = draw("ls-thm41", run_sweep(THM41))
    code = code_map(fig)
    assert (code[:, -1] == APPLIES).all() and not (code == OUTSIDE).any()
    assert not violations(fig)


def test_thm41_map_scaled_input_is_outside(run_sweep):
    """input_scale = 100: condition (7) holds and mu(X_0)^2 >= b(L) at large lambda, and the observed
    mu breaks a^L mu(X_0)^2 (the rms norm brings the rows back to 1): outside the theorem, not a
    counterexample."""
    fig = draw("ls-thm41", run_sweep(THM41.replace('norm = "rms"', 'norm = "rms"\ninput_scale = 100.0')))
    code = code_map(fig)
    assert (code == OUTSIDE).all()
    assert not violations(fig)
    labels = [t.get_text() for leg in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
              for t in leg.get_texts()]
    assert any("outside the theorem" in s for s in labels)


def bound_lines(fig):
    return {ln.get_gid() for ax in fig.axes for ln in ax.get_lines() if str(ln.get_gid()).startswith("theory:bound")}


def test_fig1_draws_the_bound_for_the_theorem_s_stack_only(run_sweep):
    assert "theory:bound:100000" in bound_lines(draw("ls-fig1", run_sweep(FIG1)))
    # the same with LayerNorm: (7) holds as before, but the stack is not the theorem's
    assert not bound_lines(draw("ls-fig1", run_sweep(FIG1.replace('norm = "rms"', 'norm = "layernorm"'))))


def panel_widths(fig):
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    return [round(ax.get_window_extent(renderer).width, 1) for ax in fig.axes]


def test_thm41_fits_a_column_and_a_page(run_sweep, monkeypatch, tmp_path):
    """rcsweep-plot STORE ls-thm41 --width column (the two maps one under another) and --width page:
    every text, the maps' titles among them, lies inside the figure, and the layout is stable: a
    second draw keeps the panels' widths, each map at least half the figure's width (the colorbar,
    right of the lower map, once made the layout narrow both panels at every draw)."""
    store = run_sweep(THM41)
    for width, maps_wide in (("column", 0.5), ("page", 0.25)):
        code, stderr, fig = drawn_by_rcsweep_plot(monkeypatch, store, "ls-thm41", "--width", width,
                                                  "-o", tmp_path / f"thm41-{width}.png")
        assert code == 0, stderr
        assert texts_outside_the_figure(fig) == [], (width, fig.get_size_inches())
        first = panel_widths(fig)
        assert panel_widths(fig) == first, width
        maps = [ax for ax in fig.axes if ax.get_images() and ax.get_label() != "<colorbar>"]
        assert len(maps) == 2
        renderer = fig._get_renderer()
        for ax in maps:
            assert ax.get_window_extent(renderer).width >= maps_wide * fig.bbox.width, (width, first)
