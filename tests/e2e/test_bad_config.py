"""Bad sweep files: exit code 2, a message naming the key, and nothing written."""
import pytest

from conftest import rcsweep

GOOD = """
[sweep]
name = "bad"
seed = 1
replicates = 2
[model]
T = 8
d = 16
depth = 3
[axes]
lambda = [0.0, 1.0]
[output]
spectra = "none"
"""

# (description, transformation of GOOD, text the error must contain)
CASES = [
    ("unknown model key", lambda s: s.replace("depth = 3", "depth = 3\nlamda = 1.0"), "model.lamda"),
    ("suggestion for a typo", lambda s: s.replace("depth = 3", "depth = 3\nlamda = 1.0"), "did you mean 'lambda'"),
    ("unknown table", lambda s: s + "\n[modle]\nT = 3\n", "modle"),
    ("wrong type", lambda s: s.replace("T = 8", 'T = "eight"'), "model.T"),
    ("negative size", lambda s: s.replace("d = 16", "d = -4"), "model.d"),
    ("non-finite lambda", lambda s: s.replace("lambda = [0.0, 1.0]", "lambda = [0.0, nan]"), "axes.lambda[1]"),
    ("empty axis", lambda s: s.replace("lambda = [0.0, 1.0]", "lambda = []"), "axes.lambda"),
    ("bad choice", lambda s: s.replace("depth = 3", 'depth = 3\nmixer = "softmx"'), "model.mixer"),
    ("orthonormal with T > d", lambda s: s.replace("T = 8", "T = 32"), "T"),
    ("parameter in two places", lambda s: s.replace("depth = 3", "depth = 3\nlambda = 0.5"), "lambda"),
    ("zip lengths differ", lambda s: s + "\n[[zip]]\nsigma_v = [1.0, 2.0]\nsigma_qk = [1.0]\n", "zip[0]"),
    ("replicates zero", lambda s: s.replace("replicates = 2", "replicates = 0"), "sweep.replicates"),
    ("bad spectra", lambda s: s.replace('spectra = "none"', 'spectra = "some"'), "output.spectra"),
    ("missing T", lambda s: s.replace("T = 8\n", ""), "T"),
    ("TOML syntax error", lambda s: s.replace("seed = 1", "seed = = 1"), "line"),
    ("depth in a zip", lambda s: s + "\n[[zip]]\ndepth = [1, 2]\nsigma_v = [1.0, 2.0]\n", "depth"),
]


@pytest.mark.parametrize("name,transform,expect", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("command", ["run", "plan"])
def test_bad_config_exit_2_names_key_writes_nothing(tmp_path, name, transform, expect, command):
    sweep = tmp_path / "bad.toml"
    sweep.write_text(transform(GOOD))
    out = tmp_path / "out.h5"
    args = [command, sweep] + (["-o", out] if command == "run" else [])
    proc = rcsweep(*args)
    assert proc.returncode == 2, proc.stderr
    assert expect in proc.stderr, proc.stderr
    assert not out.exists()


def test_all_errors_are_reported_at_once(tmp_path):
    sweep = tmp_path / "bad.toml"
    sweep.write_text(GOOD.replace("T = 8", 'T = "x"').replace("replicates = 2", "replicates = 0")
                     .replace('spectra = "none"', 'spectra = "x"'))
    proc = rcsweep("run", sweep, "-o", tmp_path / "o.h5")
    assert proc.returncode == 2
    for key in ("model.T", "sweep.replicates", "output.spectra"):
        assert key in proc.stderr


def test_bad_config_under_mpi_reports_once(tmp_path):
    sweep = tmp_path / "bad.toml"
    sweep.write_text(GOOD.replace("T = 8", "T = -1"))
    proc = rcsweep("run", sweep, "-o", tmp_path / "o.h5", ranks=2)
    assert proc.returncode == 2
    assert proc.stderr.count("model.T") == 1


def test_bad_command_line_values(tmp_path):
    from conftest import DATA
    assert rcsweep("run", DATA / "kill.toml", "--shard", "2/2", "-o", tmp_path / "x.h5").returncode == 2
    assert rcsweep("run", DATA / "kill.toml", "--blas-threads", "0").returncode == 2
    assert rcsweep("run", tmp_path / "missing.toml").returncode == 2
    assert not (tmp_path / "x.h5").exists()
