"""input = "matrix" / "file" through the command line: the [Sys-1] example against the closed
recursion, an HDF5 input file against the same matrix written inline, and wrong input files."""
import math

import h5py
import numpy as np

from conftest import SOURCE, rcsweep

SYS1 = SOURCE / "jobs" / "examples" / "sys1.toml"


def point_rows(store):
    with h5py.File(store, "r") as f:
        pts = f["points"][...]
        mu = f["layers"]["mu"][...]
    return pts, mu


def sys1_mu(lam, depth, layernorm=False):
    """[Sys-1] (lambda-skip App. A.10): Y <- D((M + lam I) Y), M = [[1, 0], [2, 1]], Y_0 = I."""
    y = np.eye(2)
    m = np.array([[1.0, 0.0], [2.0, 1.0]])
    out = []
    for k in range(depth + 1):
        if k:
            y = m @ y + lam * y
            if layernorm:
                y = (y - y.mean(1, keepdims=True)) / np.sqrt(y.var(1, keepdims=True) + 1e-5)
            else:
                y = y / np.linalg.norm(y, axis=1, keepdims=True)
        out.append(np.linalg.norm(y - y.mean(0, keepdims=True)))
    return np.array(out)


def test_sys1_example_matches_recursion(tmp_path):
    store = tmp_path / "sys1.h5"
    proc = rcsweep("run", SYS1, "-o", store, "-q")
    assert proc.returncode == 0, proc.stderr  # lambda = -1 ends early (zero row): an outcome; the rest is done
    pts, mu = point_rows(store)
    checked = 0
    for t, p in enumerate(pts):
        lam, norm = float(p["lambda"]), p["norm"].decode() if isinstance(p["norm"], bytes) else str(p["norm"])
        if lam == -1.0:
            assert np.isnan(mu[t, 2:]).all()  # rms: NaN from layer 1; layernorm: X vanishes at layer 2
            continue
        ref = sys1_mu(lam, mu.shape[1] - 1, layernorm=norm == "layernorm")
        np.testing.assert_allclose(mu[t], ref, rtol=0, atol=1e-12, err_msg=f"lambda {lam} {norm}")
        checked += 1
    assert checked == len(pts) - 2


def write_sweep(path, extra, T=3, d=2):
    path.write_text(
        f'[sweep]\nname = "file-input"\nseed = 3\n[model]\nmixer = "ssd"\nbc_init = "identity"\nnorm = "rms"\n'
        f"T = {T}\nd = {d}\ndepth = 6\n{extra}\n[axes]\nlambda = [-0.5, 0.5, 2.0]\n"
    )
    return path


X = np.array([[1.0, 0.25], [0.5, -1.0], [0.125, 0.75]])


def test_file_input_equals_inline_matrix(tmp_path):
    with h5py.File(tmp_path / "emb.h5", "w") as f:
        f.create_dataset("emb/X", data=X)
    rows = ", ".join("[" + ", ".join(repr(float(v)) for v in r) + "]" for r in X)
    inline = write_sweep(tmp_path / "inline.toml", f'input = "matrix"\ninput_matrix = [{rows}]')
    # relative to the sweep file's folder, not the working directory
    fromfile = write_sweep(tmp_path / "file.toml", 'input = "file"\ninput_path = "emb.h5"\ninput_dataset = "emb/X"')
    rcsweep("run", inline, "-o", tmp_path / "a.h5", "-q", check=0)
    rcsweep("run", fromfile, "-o", tmp_path / "b.h5", "-q", check=0, cwd="/")
    with h5py.File(tmp_path / "a.h5", "r") as a, h5py.File(tmp_path / "b.h5", "r") as b:
        for k in a["layers"]:
            x, y = a["layers"][k][...], b["layers"][k][...]
            assert np.array_equal(x.view(np.uint64), y.view(np.uint64)), k
        assert "input_path = \"emb.h5\"" in b.attrs["config"]
    plan = rcsweep("plan", fromfile, check=0)
    assert "file-input" in plan.stdout


def test_file_input_wrong_shape_is_a_config_error(tmp_path):
    with h5py.File(tmp_path / "emb.h5", "w") as f:
        f.create_dataset("X", data=X.T)  # 2 x 3, the sweep wants T x d = 3 x 2
        f.create_dataset("cube", data=np.zeros((3, 2, 1)))
    sweep = write_sweep(tmp_path / "bad.toml", 'input = "file"\ninput_path = "emb.h5"')
    for cmd in ("run", "plan"):
        proc = rcsweep(cmd, sweep, "-o", tmp_path / "x.h5", "-q") if cmd == "run" else rcsweep(cmd, sweep)
        assert proc.returncode == 2, proc.stderr
        assert "model.input_path" in proc.stderr and "2 x 3" in proc.stderr and "3 x 2" in proc.stderr, proc.stderr
    assert not (tmp_path / "x.h5").exists()
    for extra, words in [
        ('input_path = "missing.h5"', ["model.input_path", "does not exist"]),
        ('input_path = "emb.h5"\ninput_dataset = "nope"', ["model.input_path", "no dataset 'nope'"]),
        ('input_path = "emb.h5"\ninput_dataset = "cube"', ["model.input_path", "rank 3"]),
    ]:
        proc = rcsweep("plan", write_sweep(tmp_path / "bad2.toml", 'input = "file"\n' + extra))
        assert proc.returncode == 2, proc.stderr
        for w in words:
            assert w in proc.stderr, proc.stderr
