"""lambda-skip Theorem 4.1's flag through the command line: /theory/bound_applies is 1 only where
every hypothesis of the theorem holds (the stack of its eq. (6), unit rows at every layer including
the input, condition (7), mu(X_0)^2 >= b), and /theory/bound_reason says which one fails
(docs/MODELS.md "Per-task theory")."""
import h5py
import numpy as np
import pytest

from conftest import rcsweep

APPLIES, NOT_COVERED, ROWS_NOT_UNIT, CONDITION_FAILS, MU0_BELOW_B = 0, 1, 2, 3, 4

# Softmax attention with the row normalisation of eq. (4): the stack the theorem covers.
COVERED = """
[sweep]
name = "thm41_rows"
seed = 11
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
input_scale = [1.0, 100.0]
lambda = [0.5, 1000.0, 10000.0, 100000.0, -100000.0]
"""

# The same with every component the theorem leaves out, one at a time and together.
COMPONENTS = """
[sweep]
name = "thm41_components"
seed = 12

[model]
mixer = "softmax"
input = "orthonormal"
T = 8
d = 8
depth = 3
value_scale = "inv_sqrt_d"
lambda = 100000.0

[axes]
norm = ["rms", "layernorm", "none"]
gate = ["none", "silu"]
mlp = ["none", "relu"]
heads = [1, 2]
"""


def run_sweep(tmp_path, name, text):
    sweep = tmp_path / f"{name}.toml"
    sweep.write_text(text)
    store = tmp_path / f"{name}.h5"
    rcsweep("run", sweep, "-o", store, "-q", check=0)
    with h5py.File(store, "r") as f:
        points = f["points"][...][f["tasks"]["point"][...]]
        status = f["tasks"]["status"][...]
        theory = {q: f["theory"][q][...] for q in f["theory"]}
        desc = {q: f["theory"][q].attrs.get("description") for q in f["theory"]}
    return points, status, theory, desc


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def test_scaled_input_is_outside_the_theorem(tmp_path):
    """input_scale = 100 (rows of norm 100) and large |lambda|: condition (7) holds and mu(X_0)^2 >= b,
    but the proof's unit rows do not: the bound does not apply, reason "rows not unit"."""
    points, status, th, _ = run_sweep(tmp_path, "rows", COVERED)
    assert (status == 1).all()
    assert "bound_reason" in th
    scaled = points["input_scale"] == 100.0
    big = np.abs(points["lambda"]) >= 1000.0
    # the old flag's inputs: the condition holds and b is far below mu(X_0)^2 = 100^2 (T - 1)
    assert np.isfinite(th["b"][scaled & big]).all() and (th["b"][scaled & big] < 1e4 * 7).all()
    assert (th["bound_applies"][scaled] == 0).all()
    assert (th["bound_reason"][scaled] == ROWS_NOT_UNIT).all()


def test_covered_stack_applies_and_holds(tmp_path):
    """Unit-row input, rms norm, one softmax head: the bound applies where (7) holds and
    mu(X_0)^2 >= b, and there the observed mu respects it, as the theorem says it must."""
    points, status, th, desc = run_sweep(tmp_path, "rows", COVERED)
    unit = points["input_scale"] == 1.0
    applies = unit & (th["bound_applies"] == 1)
    assert applies.sum() >= 4  # |lambda| = 1e4, 1e5 and -1e5 at least: b ~ 1/|lambda|
    assert (th["bound_reason"][applies] == APPLIES).all()
    assert (th["bound_holds"][applies] == 1).all()
    # the other unit-row tasks fail on (7) or on b, and say which
    small = unit & (points["lambda"] == 0.5)
    assert (th["bound_applies"][small] == 0).all() and (th["bound_reason"][small] == CONDITION_FAILS).all()
    rest = unit & ~applies & ~small
    assert (th["bound_reason"][rest] == MU0_BELOW_B).all()
    # bound_applies is exactly the reason "applies"
    assert np.array_equal(th["bound_applies"] == 1, th["bound_reason"] == APPLIES)
    for code, word in ((APPLIES, "applies"), (NOT_COVERED, "not covered"), (ROWS_NOT_UNIT, "rows not unit"),
                       (CONDITION_FAILS, "condition"), (MU0_BELOW_B, "b")):
        assert f"{code} = " in text(desc["bound_reason"]) and word in text(desc["bound_reason"])


def test_components_outside_the_theorem(tmp_path):
    """LayerNorm, no norm, a gate, an MLP or several heads: not the stack of eq. (6), so the bound
    does not apply whatever lambda (reason "not covered"); only rms, no gate, no MLP, one head
    applies at this lambda."""
    points, status, th, _ = run_sweep(tmp_path, "components", COMPONENTS)
    covered = ((np.array([text(v) for v in points["norm"]]) == "rms")
               & (np.array([text(v) for v in points["gate"]]) == "none")
               & (np.array([text(v) for v in points["mlp"]]) == "none") & (points["heads"] == 1))
    assert covered.sum() == 1
    assert (th["bound_applies"][covered] == 1).all() and (th["bound_holds"][covered] == 1).all()
    done = status == 1
    assert done[~covered].sum() >= 10
    assert (th["bound_applies"][~covered & done] == 0).all()
    assert (th["bound_reason"][~covered & done] == NOT_COVERED).all()
    # the quantities themselves are still computed for every finished task
    assert np.isfinite(th["C_M"][done]).all() and np.isfinite(th["b"][done]).all()


@pytest.mark.parametrize("mixer", ["s4d"])
def test_per_channel_mixer_is_not_covered(tmp_path, mixer):
    """s4d has one mixer per channel, not one M: not covered, with the rms norm and unit rows."""
    text_ = COMPONENTS.replace('mixer = "softmax"', f'mixer = "{mixer}"').split("[axes]")[0] + 'norm = "rms"\n'
    points, status, th, _ = run_sweep(tmp_path, "s4d", text_)
    assert (status == 1).all()
    assert (th["bound_applies"] == 0).all() and (th["bound_reason"] == NOT_COVERED).all()


def test_without_mu_only_the_last_hypothesis_is_undecided(tmp_path):
    """[output] metrics without mu_rel: bound_holds is NaN, and so are bound_applies and bound_reason
    where only mu(X_0)^2 >= b is left to decide; a stack outside the theorem is still 0, reason 1."""
    text_ = COMPONENTS.split("[axes]")[0] + '[axes]\nnorm = ["rms", "layernorm"]\n[output]\nmetrics = ["sr_cov"]\n'
    points, status, th, _ = run_sweep(tmp_path, "nomu", text_)
    assert (status == 1).all()
    rms = np.array([text(v) for v in points["norm"]]) == "rms"
    assert np.isnan(th["bound_holds"]).all()
    assert np.isnan(th["bound_applies"][rms]).all() and np.isnan(th["bound_reason"][rms]).all()
    assert (th["bound_applies"][~rms] == 0).all() and (th["bound_reason"][~rms] == NOT_COVERED).all()
